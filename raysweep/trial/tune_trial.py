"""One trial: the Tune function trainable that runs a train loop (or a script) on ``num_gpus`` ranks.

It builds the trial's ``TrialJob`` once and hands it to one of three runners:

* ``in_process``: a 1-worker trial runs in the Tune trial's own process (a ``program:`` trial,
  or any 1-worker trial under ``ddp_workers: torchtrainer``);
* ``warm``: the sweep's warm DDP workers (``pool.py``, ``gang.py``), as many as the trial has
  ranks, all on the trial's node, whose CPUs/GPUs the trial's placement group holds;
* ``torchtrainer``: one Ray Train ``TorchTrainer`` run (``ddp_workers: torchtrainer``).

Each rank runs ``rank.py``'s entry point for where it is; its reports come back here averaged
over ranks (``metrics.mean_over_ranks``) and go to Tune.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import ray
from ray import tune
from ray.train import UserCallback
from ray.util.queue import Queue

from raysweep.env import TRAIN_START_TIMEOUT
from raysweep.placement import rank_places
from raysweep.runs.files import read_explanation
from raysweep.trial import gang, rank, slots, watchdog
from raysweep.trial.cpu_threads import ThreadShare
from raysweep.trial.job import Sweep, TrialJob
from raysweep.trial.job_builder import InfeasibleTrial, build_job
from raysweep.trial.lease import borrow, give_back
from raysweep.trial.metrics import mean_over_ranks
from raysweep.trial.output_marks import marked
from raysweep.trial.start_bound import StartBound, WorkersNotStarted, free_of, group_state
from raysweep.trial.warm_rank import RankCall
from raysweep.values import short_config
from raysweep.words import Runner

__all__ = ["InfeasibleTrial", "RUNNERS", "TrialHung", "WorkersNotStarted", "run_trial"]


class NodeLost(RuntimeError):
    """A node of a multi-node trial died mid-trial."""


def lost_nodes(nodes: list[str]) -> list[str]:
    """The addresses of the nodes among ``nodes`` (ids) that are no longer alive."""
    if len(nodes) < 2:  # a one-node trial's node is alive: this code runs there
        return []
    dead = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes() if not n.get("Alive")}
    return [dead[n] for n in nodes if n in dead]


class TrialHung(RuntimeError):
    """A rank sent no report for report_timeout_s (the watchdog's explanation is the message)."""


class RankMeanReports(UserCallback):
    """Hands each report of a TorchTrainer run to its Tune trial: the *mean over ranks* of every
    numeric metric (Ray's own TuneReportCallback forwards rank 0's), and the path of the Ray
    Train checkpoint saved with it."""

    def __init__(self, reports: Queue):
        self.reports = reports

    def after_report(self, run_context: Any, metrics: list[dict[str, Any]], checkpoint: Any) -> None:
        self.reports.put((mean_over_ranks(metrics), checkpoint.path if checkpoint else None))


_FIT_ENDED = "fit ended"


_POINTER = "ray_train_checkpoint.json"


def _report_to_tune(metrics: dict[str, Any], train_checkpoint: str | None) -> None:
    """A report with a Ray Train checkpoint carries a Tune checkpoint too: a small file naming it
    (the checkpoint stays where Ray Train saved it, never copied). A resumed or retried trial goes
    on from the one Tune restored, so its reports and iteration count go on from there too."""
    if train_checkpoint is None:
        tune.report(metrics)
        return
    with tempfile.TemporaryDirectory(prefix="raysweep_pointer_") as d:
        with open(os.path.join(d, _POINTER), "w") as f:
            json.dump({"path": train_checkpoint}, f)
        tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))


def _restored_train_checkpoint() -> str | None:
    """The Ray Train checkpoint of the Tune checkpoint this trial was restored from, if any."""
    restored = tune.get_checkpoint()
    if restored is None:
        return None
    with restored.as_directory() as d:
        if not os.path.exists(os.path.join(d, _POINTER)):  # it ran in its own process before, at 1 worker
            return restored.path  # (``raysweep.grow``): its checkpoint is the trial's own
        with open(os.path.join(d, _POINTER)) as f:
            return json.load(f)["path"]


def run_in_process(job: TrialJob, sweep: Sweep, worker_pool: Any, bound: StartBound, group: Any) -> None:
    rank.in_process(job)  # its one worker is this process: nothing to wait for


def run_warm(job: TrialJob, sweep: Sweep, worker_pool: Any, bound: StartBound, group: Any) -> None:
    """Run the trial on ``job.world_size`` of the pool's warm workers, on each of its nodes
    (``group`` holds their slots)."""
    capacity = job.capacity
    places = rank_places(trial_nodes(job, bound, group), job.shape.per_node)

    def forward(metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
        tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(checkpoint_dir) if checkpoint_dir else None)

    restored = tune.get_checkpoint()
    lease = borrow(worker_pool, places, group, thread_share(job))
    try:
        with restored.as_directory() if restored else contextlib.nullcontext() as checkpoint_dir:
            call = RankCall(
                fn=rank.on_warm_worker,
                args=job,
                group_backend=job.group_backend,
                checkpoint_dir=checkpoint_dir,
                places=places,
                use_gpu=capacity.use_gpu,
                threads=lease.threads,
                group_timeout_s=job.group_timeout_s,
                env=job.network_env(),
            )
            gang.run(lease, call, forward, bound)
    finally:
        give_back(worker_pool, lease)


def thread_share(job: TrialJob) -> ThreadShare | None:
    """What the trial's CPU ranks may use (``cpu_threads.py``): ``cpus_per_worker`` threads each,
    or, while the trial is alone on its node, the node's CPUs (a 1-worker trial alone then runs as
    a lone torchrun process does, on every core). Trials across nodes keep ``cpus_per_worker``;
    GPU ranks set no threads (None)."""
    capacity = job.capacity
    if capacity.use_gpu:
        return None
    own = max(1, int(capacity.cpus_per_worker))
    here = ray.get_runtime_context().get_node_id()
    node = next((n for n in capacity.nodes if n.id == here), None)
    if job.shape.nodes > 1 or node is None:
        return ThreadShare(own)
    return ThreadShare(own, int(node.cpus))


def trial_nodes(job: TrialJob, bound: StartBound, group: Any) -> list[tuple[str, str, list[Any]]]:
    """Each node of the trial, rank 0's first: (node id, address, the GPUs Ray gave its bundle).

    The trial's process holds the first bundle of Tune's group, so Ray tells it its GPUs; a task
    placed in each other bundle (each bundle, in a group the trial made: ``slots.py``), asking for
    that bundle's GPUs, reads them there.
    """
    here = (ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address(), ray.get_gpu_ids())
    own = group is not None and group != ray.util.get_current_placement_group()
    if job.shape.nodes == 1 and not own:
        return [here]
    first = 0 if own else 1
    indices = range(first, job.shape.nodes)
    if not job.capacity.use_gpu:  # no GPUs to learn: the group's table says where each bundle is
        return [here] * first + slots.bundle_places(group, indices)
    probes = slots.probe_bundles(group, indices, gpus=job.shape.per_node * job.capacity.gpus_per_worker)

    def waited_for(late: list[int]) -> str:
        return f"its bundle(s) {', '.join(str(i + first + 1) for i in late)} did not answer; {group_state(group)}"

    return [here] * first + bound.get(probes, waited_for)


def bundle_nodes(job: TrialJob, group: Any) -> list[str]:
    """The node of each bundle of the group holding the trial's slots, rank 0's first."""
    if job.shape.nodes == 1 and group == ray.util.get_current_placement_group():
        return [ray.get_runtime_context().get_node_id()]
    table = ray.util.placement_group_table(group)
    return [table["bundles_to_node_id"][i] for i in range(job.shape.nodes)]


GROUP_LOSSES_RETRIED = 1  # runs started again after Ray Train's own cleaner removed a live run's group


def run_torchtrainer(job: TrialJob, sweep: Sweep, worker_pool: Any, bound: StartBound, group: Any) -> None:
    """The trial is a Ray Train run on the trial's nodes (the ones its placement group holds slots on).

    Ray Train 2.60's placement-group cleaner asks the State API whether the run's controller is
    alive and takes no answer for dead: on loaded nodes it removed a live run's worker group a
    second after its start (the matrix's resumed TorchTrainer cell; ray-project/ray#65447's review
    names the false death). Such a run, which no failure of the trial's own ended, starts again
    once, as a run of its own, from the last checkpoint it reported."""
    restored = _restored_train_checkpoint()
    for attempt in range(GROUP_LOSSES_RETRIED + 1):
        failure, last = _fit(job, sweep, bound, group, restored)
        if failure is None:
            return
        if attempt == GROUP_LOSSES_RETRIED or GROUP_REMOVED not in str(failure):
            raise failure
        print(
            marked(
                job.trial_id,
                "Ray Train's cleaner removed its live worker group; starting the run again from "
                + ("its last checkpoint" if last else "its start"),
            ),
            file=sys.stderr,
            flush=True,
        )
        restored, bound = last or restored, StartBound(job.start_timeout_s)


GROUP_REMOVED = "placement group was removed"  # Ray's exit detail of a worker whose group was removed


def _fit(
    job: TrialJob, sweep: Sweep, bound: StartBound, group: Any, restored: str | None
) -> tuple[BaseException | None, str | None]:
    """One Ray Train run of the trial, its reports handed to Tune as they come: how it failed (None:
    it ended), and the last checkpoint it reported."""
    import torch.distributed as dist
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    capacity = job.capacity
    nodes = bundle_nodes(job, group)
    per_node = job.shape.per_node
    run_name = f"{job.trial_id}-{uuid.uuid4().hex[:8]}"
    per_worker = {"CPU": capacity.cpus_per_worker} | ({"GPU": capacity.gpus_per_worker} if capacity.use_gpu else {})
    reports = Queue(
        maxsize=1, actor_options={"num_cpus": 0}
    )  # a report waits until Tune has it, as Ray's callback does
    trainer = TorchTrainer(
        rank.on_train_worker,
        train_loop_config=replace(job, restored_checkpoint=restored),
        scaling_config=ScalingConfig(
            num_workers=job.world_size,
            use_gpu=capacity.use_gpu,
            resources_per_worker=per_worker,
            placement_strategy="STRICT_PACK" if len(nodes) == 1 else "PACK",
            # the nodes whose slots this trial holds, per_node workers on each
            label_selector=[{"ray.io/node-id": nodes[r // per_node]} for r in range(job.world_size)],
        ),
        # A torch without NCCL on GPUs Ray advertises (fake GPUs, or a CPU build: its ranks then fail
        # on their device with a sentence, devices.check_usable) gets gloo, as warm workers do.
        torch_config=TorchConfig(
            backend="nccl" if capacity.use_gpu and dist.is_nccl_available() else "gloo",
            timeout_s=int(job.group_timeout_s),
        ),
        run_config=RunConfig(
            # A run of its own per start: a restarted trial goes on from the checkpoint Tune
            # restored (TrialJob.restored_checkpoint), not from the latest one Ray Train saved,
            # which a killed driver may not have recorded.
            name=run_name,
            storage_path=f"{sweep.run_dir}/train_runs",
            callbacks=[RankMeanReports(reports)],
            # Ray Train gives up on a worker group that cannot start (controller_failure_limit=0), at
            # the trial's own bound (TRAIN_START_TIMEOUT, below), and removes its group: retried
            # without end, its controller outlived the failed trial and left a pending group that was
            # granted later and kept (Ray 2.60, #62753)
            failure_config=FailureConfig(max_failures=job.max_failures, **_NO_CONTROLLER_RETRY),
            **({"worker_runtime_env": {"env_vars": job.network_env()}} if job.network_env() else {}),
        ),
    )
    failure: list[BaseException] = []

    def fit() -> None:
        try:
            trainer.fit()
        except BaseException as e:
            failure.append(e)
        finally:
            reports.put((_FIT_ENDED, None))

    fitting = threading.Thread(target=fit, name="raysweep-torchtrainer-fit", daemon=True)
    os.environ[TRAIN_START_TIMEOUT] = f"{max(1.0, bound.left()):.1f}"  # Ray Train's controller reads it as it starts
    fitting.start()
    _wait_started(job, run_name, per_worker, bound, fitting)
    _fitting[job.trial_id] = (job, fitting)
    last = None
    try:
        while (item := reports.get())[0] != _FIT_ENDED:  # reports reach Tune from this, the trial's own thread
            _report_to_tune(*item)
            last = item[1] or last
    except BaseException:  # Tune stopped the trial (or refused a report): take the ranks' last reports
        _drain(reports, fitting)
        raise
    finally:
        _fitting.pop(job.trial_id, None)
    return (failure[0] if failure else None), last


_fitting: dict[str, tuple[TrialJob, threading.Thread]] = {}  # this process's TorchTrainer runs, by trial id
TRAIN_GIVES_UP_S = 30.0  # after the bound: its controller's start came later, and its group's removal


def _no_controller_retry() -> dict[str, int]:
    """``controller_failure_limit=0`` where Ray Train has it (2.60 does; the field is a DeveloperAPI)."""
    from ray.train import FailureConfig

    return (
        {"controller_failure_limit": 0}
        if "controller_failure_limit" in getattr(FailureConfig, "__dataclass_fields__", {})
        else {}
    )


_NO_CONTROLLER_RETRY = _no_controller_retry()


def stop_trainers() -> None:
    """Tune stops this process's trial (``driver/trainable.py``: its ``cleanup``, before the process
    ends): the ranks of its Ray Train run stop at their next report (``TrainBackend.report``), as warm
    ranks stop at theirs, so a W&B-style function's run is finished and written before its worker
    ends. Waits until the run has ended, ``gang.STOP_GRACE_S`` at most (a rank in a long epoch: its
    process then ends with the trial's)."""
    deadline = time.monotonic() + gang.STOP_GRACE_S
    for job, _ in list(_fitting.values()):
        if job.holdings is not None:
            job.holdings.stop.remote(job.trial_id)
    for _, fitting in list(_fitting.values()):
        fitting.join(timeout=max(0.0, deadline - time.monotonic()))


def _drain(reports: Queue, fitting: threading.Thread) -> None:
    """Take the stopped run's reports until it ends (one waits in the queue, and Ray Train's
    controller waits to put the next), ``gang.STOP_GRACE_S`` at most."""
    deadline = time.monotonic() + gang.STOP_GRACE_S
    while fitting.is_alive() and time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # Empty after the timeout; the queue's actor ending with the run
            if reports.get(timeout=0.5)[0] == _FIT_ENDED:
                return


def _wait_started(
    job: TrialJob,
    run_name: str,
    per_worker: dict[str, float],
    bound: StartBound,
    fitting: threading.Thread,
) -> None:
    """Until every worker of the Ray Train run has entered the loop (or the run has ended: its
    error is the trial's). Ray Train itself retries a worker group that cannot start without end."""
    started = 0
    while fitting.is_alive() and job.holdings is not None:
        started = ray.get(job.holdings.count.remote(run_name))
        if started >= job.world_size:
            return
        if bound.expired():
            fitting.join(timeout=TRAIN_GIVES_UP_S)  # Ray Train gives up too, and removes its workers' group
            addresses = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
            group = ray.util.get_current_placement_group()  # Tune's: a TorchTrainer trial places no slots itself
            where = ", ".join(addresses.get(n, n[:8]) for n in bundle_nodes(job, group))
            raise bound.failure(
                f"{started} of {job.world_size} Ray Train worker(s) started. Ray Train asked for {job.world_size} x "
                f"{short_config(per_worker)} on node(s) {where} ({free_of(per_worker)}); the trial holds its "
                f"{group_state(group)}"
            )
        time.sleep(0.25)


RUNNERS: dict[Runner, Callable[[TrialJob, Sweep, Any, StartBound, Any], None]] = {
    Runner.IN_PROCESS: run_in_process,
    Runner.WARM: run_warm,
    Runner.TORCHTRAINER: run_torchtrainer,
}


def run_trial(flat_config: dict[str, Any], sweep: Sweep, worker_pool: Any) -> None:
    """The Tune function trainable (bound with ``tune.with_parameters``); ``worker_pool`` is the
    sweep's ``pool.WorkerPool`` (None with ``ddp_workers: torchtrainer``)."""
    ctx = tune.get_context()
    job = build_job(sweep, flat_config, ctx.get_trial_id(), ctx.get_trial_dir())
    group, own = slots.slot_group(job, sweep.holdings)
    bound = StartBound(job.start_timeout_s)  # from when the trial holds its slots
    watchdog.clear(job.trial_dir)  # a retried trial starts without the last attempt's explanation
    nodes = bundle_nodes(job, group)
    if sweep.holdings is not None:  # the driver's admission sees which slots this trial holds
        sweep.holdings.hold.remote(job.trial_id, dict.fromkeys(nodes, job.shape.per_node))
    try:
        RUNNERS[job.runner](job, sweep, worker_pool, bound, group)
    except Exception as e:
        if job.runner == Runner.IN_PROCESS:
            raise
        lost = lost_nodes(nodes)
        if lost:
            raise NodeLost(
                f"node(s) {', '.join(lost)} of this {job.shape.nodes}-node trial died; its ranks on every node "
                "were ended. It restarts from its last checkpoint as max_failures allows, on nodes that can hold it"
            ) from e
        if isinstance(e, WorkersNotStarted):
            raise
        explanation = read_explanation(job.trial_dir)
        if explanation:
            raise TrialHung(explanation) from e
        early = watchdog.ended_early(job.trial_dir, job.world_size)  # a TorchTrainer says only that its workers died
        if early and not isinstance(e, gang.RankReports):
            ranks, reports = early
            raise gang.RankReports(watchdog.ended_early_text(ranks, job.world_size, reports)) from e
        if isinstance(e, ray.exceptions.RayActorError):  # Tune would take it for this trial's own actor's death
            raise gang.worker_died(e, "an actor this trial used") from e
        raise
    finally:
        slots.release(group, own, sweep.holdings)
