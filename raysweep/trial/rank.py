"""Where each rank of a trial runs: the three places below say the rank's backend and who it
is, and the job's entry point (``entries.py``: a loop, a function or a script) runs there.

Kept free of Tune: a warm DDP worker unpickles these entry points, and importing
``tune_trial.py`` there (ray.tune, ray.train) would add more than a second to its start.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from raysweep.placement import RankPlace
from raysweep.trial import preemption
from raysweep.trial.backends import TrainBackend, TuneBackend, WarmBackend
from raysweep.trial.job import TrialJob
from raysweep.trial.ports import free_port
from raysweep.trial.warm_rank import TrialStopped

if TYPE_CHECKING:
    from raysweep.trial.warm_rank import RankLink


ALONE = RankPlace("", "127.0.0.1", 0, 0, 1)  # the one rank of a 1-worker trial


def in_process(job: TrialJob) -> None:
    """Entry point of a 1-worker trial in the Tune trial's own process."""
    job.entry.run(job, TuneBackend(job.trial_dir, job.metric), 0, ALONE)


def on_warm_worker(job: TrialJob, link: RankLink, master: tuple[str, int]) -> None:
    """Entry point on every warm worker; a script sees its node's GPUs of the trial, its own at
    cuda:LOCAL_RANK, as under torchrun."""
    visible = ",".join(link.gpus) if link.gpus else None
    job.entry.run(
        job, WarmBackend(link, job.trial_dir, job.metric), link.rank, link.place, master=master, visible_devices=visible
    )


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
    preemption.watch(order, at_checkpoints=not job.entry.runs_own_process)  # get_context().preemption reads it
    place = RankPlace(
        node_id,
        ray.util.get_node_ip_address(),
        order.index(node_id),
        nodes[:rank].count(node_id),
        nodes.count(node_id),
    )
    master = None
    if job.entry.runs_own_process:
        from ray.train.collective import broadcast_from_rank_zero

        # The script's own process group needs a port of its own (Ray Train's group holds one),
        # and a restarted worker group a fresh metrics file: rank 0 picks both.
        mine = (ray.util.get_node_ip_address(), free_port(), job.new_attempt().attempt) if rank == 0 else None
        addr, port, attempt = broadcast_from_rank_zero(mine)
        job, master = replace(job, attempt=attempt), (addr, port)
    if job.holdings is not None:  # the trial counts its started ranks; the driver frees the group after
        group = ray.util.get_current_placement_group()
        job.holdings.started.remote(job.trial_id, ctx.get_experiment_name(), rank, group)
    holdings = job.holdings
    stopping = None if holdings is None else lambda: ray.get(holdings.stopping.remote(job.trial_id))
    backend = TrainBackend(job.trial_dir, job.metric, job.restored_checkpoint, place, stopping)
    try:
        job.entry.run(job, backend, rank, place, master=master)
    except TrialStopped:  # Tune stopped the trial: its ranks end at that report, their W&B runs finished
        return
