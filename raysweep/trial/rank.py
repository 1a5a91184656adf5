"""What runs on each rank of a trial: the train loop (with its hang watchdog) or the program.

``run`` is every rank's one body; the three entry points below only say where the rank runs
(its backend) and who it is. Kept free of Tune: a warm DDP worker unpickles these entry
points, and importing ``tune_trial.py`` there (ray.tune, ray.train) would add more than a
second to its start.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from raysweep import trial
from raysweep.placement import RankPlace
from raysweep.trial import devices, output_marks, wandb_function, watchdog
from raysweep.trial.backends import Backend, TrainBackend, TuneBackend, WarmBackend
from raysweep.trial.job import TrialJob
from raysweep.trial.ports import free_port
from raysweep.trial.program import run_program

if TYPE_CHECKING:
    from raysweep.trial.warm_rank import RankLink


def import_loop(path: str) -> Callable[[dict], Any]:
    """Resolve ``module:function``; only such imports are ever run as train loops."""
    module_name, _, func_name = path.partition(":")
    if os.getcwd() not in sys.path:  # loops live in the project the sweep is run from
        sys.path.insert(0, os.getcwd())
    try:
        loop = getattr(importlib.import_module(module_name), func_name)
    except Exception as e:  # a module that raises on import, or has a syntax error, is the user's too
        raise ImportError(f"train_loop {path!r} could not be imported: {type(e).__name__}: {e}") from e
    if not callable(loop):
        raise ImportError(f"train_loop {path!r} is a {type(loop).__name__}, not a function taking the trial's config")
    return loop


def run(
    job: TrialJob,
    backend: Backend,
    rank: int,
    place: RankPlace,
    master: tuple[str, int] | None = None,
    visible_devices: str | None = None,
) -> None:
    """Run the trial's loop, function or script as ``rank`` of ``job.world_size`` on ``backend``,
    at ``place`` (its node and its index there)."""
    if job.program is not None:
        trial.use(backend)
        master = master or ("127.0.0.1", free_port())
        run_program(job, rank, place, master, trial.report, backend.share, visible_devices, trial.report_without_metric)
        return
    guard = None
    if job.report_timeout_s:
        guard = watchdog.ReportWatchdog(job.report_timeout_s, job.trial_dir, rank, job.world_size)
        guard.start()
    backend.watchdog = guard
    trial.use(backend)
    try:
        if job.capacity.use_gpu:  # a rank that cannot use its GPU fails with a sentence, before the loop
            devices.check_usable(str(backend.context().device))
        loop = job.function if job.function is not None else import_loop(job.train_loop)
        with output_marks.shown(job.trial_id, job.trial_dir, rank):  # rank 0's prints on the user's console
            if job.wandb_function is not None:
                wandb_function.call(loop, job, rank)
            else:
                loop(job.config)
    finally:
        if guard is not None:
            guard.stop()


ALONE = RankPlace("", "127.0.0.1", 0, 0, 1)  # the one rank of a 1-worker trial


def in_process(job: TrialJob) -> None:
    """Entry point of a 1-worker trial in the Tune trial's own process."""
    run(job, TuneBackend(job.trial_dir, job.metric), 0, ALONE)


def on_warm_worker(job: TrialJob, link: RankLink, master: tuple[str, int]) -> None:
    """Entry point on every warm worker; a script sees its node's GPUs of the trial, its own at
    cuda:LOCAL_RANK, as under torchrun."""
    visible = ",".join(link.gpus) if link.gpus else None
    run(job, WarmBackend(link, job.trial_dir, job.metric), link.rank, link.place, master, visible)


def on_train_worker(job: TrialJob) -> None:
    """Entry point on every TorchTrainer worker. Its place is found by node id (Ray Train counts
    local ranks by node address, which nodes can share), from every rank's node over Ray
    Train's process group."""
    import ray.train
    import torch.distributed as dist

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    node_id = ray.get_runtime_context().get_node_id()
    nodes: list[Any] = [None] * world
    if world > 1 and dist.is_initialized():
        dist.all_gather_object(nodes, node_id)
    else:
        nodes = [node_id]
    order = list(dict.fromkeys(nodes))  # the nodes in the order of their first rank
    place = RankPlace(
        node_id,
        ray.util.get_node_ip_address(),
        order.index(node_id),
        nodes[:rank].count(node_id),
        nodes.count(node_id),
    )
    master = None
    if job.program is not None:
        from ray.train.collective import broadcast_from_rank_zero

        # The script's own process group needs a port of its own (Ray Train's group holds one),
        # and a restarted worker group a fresh metrics file: rank 0 picks both.
        mine = (ray.util.get_node_ip_address(), free_port(), job.new_attempt().attempt) if rank == 0 else None
        addr, port, attempt = broadcast_from_rank_zero(mine)
        job, master = replace(job, attempt=attempt), (addr, port)
    if job.holdings is not None:  # the trial counts its started ranks; the driver frees the group after
        group = ray.util.get_current_placement_group()
        job.holdings.started.remote(job.trial_id, ctx.get_experiment_name(), rank, group)
    backend = TrainBackend(job.trial_dir, job.metric, job.restored_checkpoint, place)
    run(job, backend, rank, place, master)
