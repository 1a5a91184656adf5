"""The torchtrainer runner (``ddp_workers: torchtrainer``): a trial is one Ray Train
``TorchTrainer`` run on the nodes its placement group holds slots on; each report reaches Tune
as the mean over ranks, with a pointer to the Ray Train checkpoint saved with it."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import replace
from typing import Any

import ray
from ray import tune
from ray.train import UserCallback
from ray.util.queue import Queue

from raysweep.env import TRAIN_START_TIMEOUT
from raysweep.trial import gang, preemption, rank, slots
from raysweep.trial.job import Sweep, TrialJob
from raysweep.trial.metrics import mean_over_ranks
from raysweep.trial.output_marks import marked
from raysweep.trial.start_bound import StartBound, free_of, group_state
from raysweep.values import short_config


class RankMeanReports(UserCallback):
    """Hands each report of a TorchTrainer run to its Tune trial: the *mean over ranks* of every
    numeric metric (Ray's own TuneReportCallback forwards rank 0's), and the path of the Ray
    Train checkpoint saved with it."""

    def __init__(self, reports: Queue):
        self.reports = reports

    def after_report(self, run_context: Any, metrics: list[dict[str, Any]], checkpoint: Any) -> None:
        self.reports.put((mean_over_ranks(metrics), checkpoint.path if checkpoint else None))


_FIT_ENDED = "fit ended"


POINTER = "ray_train_checkpoint.json"


def _report_to_tune(metrics: dict[str, Any], train_checkpoint: str | None) -> None:
    """A report with a Ray Train checkpoint carries a Tune checkpoint too: a small file naming it
    (the checkpoint stays where Ray Train saved it, never copied). A resumed or retried trial goes
    on from the one Tune restored, so its reports and iteration count go on from there too."""
    if train_checkpoint is None:
        tune.report(metrics)
        return
    with tempfile.TemporaryDirectory(prefix="raysweep_pointer_") as d:
        with open(os.path.join(d, POINTER), "w") as f:
            json.dump({"path": train_checkpoint}, f)
        tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))


def _restored_train_checkpoint(sweep: Sweep) -> str | None:
    """The Ray Train checkpoint of the Tune checkpoint this trial was restored from, if any."""
    restored = tune.get_checkpoint()
    if restored is None:
        return None
    with restored.as_directory() as d:
        if not os.path.exists(os.path.join(d, POINTER)):  # it ran in its own process before, at 1 worker
            return sweep.uri_of(restored.path)  # (``raysweep.grow``): its checkpoint is the trial's own
        with open(os.path.join(d, POINTER)) as f:
            return json.load(f)["path"]


GROUP_LOSSES_RETRIED = 1  # runs started again after Ray Train's own cleaner removed a live run's group


def run_torchtrainer(job: TrialJob, sweep: Sweep, worker_pool: Any, bound: StartBound, group: Any) -> None:
    """The trial is a Ray Train run on the trial's nodes (the ones its placement group holds slots on).

    Ray Train 2.60's placement-group cleaner asks the State API whether the run's controller is
    alive and takes no answer for dead: on loaded nodes it removed a live run's worker group a
    second after its start (the matrix's resumed TorchTrainer cell; ray-project/ray#65447's review
    names the false death). Such a run, which no failure of the trial's own ended, starts again
    once, as a run of its own, from the last checkpoint it reported; the reports Tune already has
    from the epochs since, which the new run makes again, are not handed to Tune twice."""
    restored, skip = _restored_train_checkpoint(sweep), 0
    for attempt in range(GROUP_LOSSES_RETRIED + 1):
        failure, last, unsaved = _fit(job, sweep, bound, group, restored, skip)
        if failure is None:
            return
        if attempt == GROUP_LOSSES_RETRIED or GROUP_REMOVED not in str(failure):
            raise failure
        print(
            marked(
                job.trial_id,
                "Ray Train's cleaner removed its live worker group; starting the run again from "
                + ("its last checkpoint" if last else "its start")
                + (f" (its {unsaved} report(s) since are not reported again)" if unsaved else ""),
            ),
            file=sys.stderr,
            flush=True,
        )
        restored, bound, skip = last or restored, StartBound(job.start_timeout_s), unsaved


GROUP_REMOVED = "placement group was removed"  # Ray's exit detail of a worker whose group was removed


def _trainer(job: TrialJob, sweep: Sweep, group: Any, restored: str | None, run_name: str, reports: Queue) -> Any:
    """The trial's ``TorchTrainer``: ``job.world_size`` workers, ``per_node`` on each node whose slots
    the trial's placement group holds, each report handed to ``reports``."""
    import torch.distributed as dist
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    capacity = job.capacity
    nodes = slots.bundle_nodes(job, group)
    per_node = job.shape.per_node
    return TorchTrainer(
        rank.on_train_worker,
        train_loop_config=replace(job, restored_checkpoint=restored),
        scaling_config=ScalingConfig(
            num_workers=job.world_size,
            use_gpu=capacity.use_gpu,
            resources_per_worker=per_worker(job),
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
            storage_path=sweep.in_home("train_runs"),
            callbacks=[RankMeanReports(reports)],
            # Ray Train gives up on a worker group that cannot start (controller_failure_limit=0), at
            # the trial's own bound (TRAIN_START_TIMEOUT, in _fit), and removes its group: retried
            # without end, its controller outlived the failed trial and left a pending group that was
            # granted later and kept (Ray 2.60, #62753)
            failure_config=FailureConfig(max_failures=job.max_failures, **_NO_CONTROLLER_RETRY),
            **({"worker_runtime_env": {"env_vars": job.network_env()}} if job.network_env() else {}),
        ),
    )


def per_worker(job: TrialJob) -> dict[str, float]:
    """What each Ray Train worker asks for: its CPUs, and its GPUs on a GPU sweep."""
    capacity = job.capacity
    return {"CPU": capacity.cpus_per_worker} | ({"GPU": capacity.gpus_per_worker} if capacity.use_gpu else {})


def _fit(
    job: TrialJob, sweep: Sweep, bound: StartBound, group: Any, restored: str | None, skip: int = 0
) -> tuple[BaseException | None, str | None, int]:
    """One Ray Train run of the trial, its reports handed to Tune as they come but its first ``skip``
    without a checkpoint (Tune has them from a run before): how it failed (None: it ended), the
    last checkpoint it reported, and how many reports Tune has from it since (or since its start)."""
    run_name = f"{job.trial_id}-{uuid.uuid4().hex[:8]}"
    reports = Queue(
        maxsize=1, actor_options={"num_cpus": 0}
    )  # a report waits until Tune has it, as Ray's callback does
    trainer = _trainer(job, sweep, group, restored, run_name, reports)
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
    _wait_started(job, run_name, per_worker(job), bound, fitting)
    _fitting[job.trial_id] = (job, fitting)
    last, unsaved = None, skip
    try:
        while (item := reports.get())[0] != _FIT_ENDED:  # reports reach Tune from this, the trial's own thread
            metrics, path = item
            if skip and path is None:
                skip -= 1
                continue
            skip = 0
            train_checkpoint = sweep.uri_of(path) if path else None  # one every node opens
            _report_to_tune(metrics, train_checkpoint)
            last = train_checkpoint or last
            unsaved = 0 if train_checkpoint else unsaved + 1
            if train_checkpoint is not None:
                preemption.after_checkpoint()
    except BaseException as e:  # Tune stopped the trial (or refused a report), or it left a draining node
        if isinstance(e, preemption.Preempted) and job.holdings is not None:
            job.holdings.stop.remote(job.trial_id)  # its ranks stop at their next report
        _drain(reports, fitting)
        raise
    finally:
        _fitting.pop(job.trial_id, None)
    return (failure[0] if failure else None), last, unsaved


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
    asked: dict[str, float],
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
            where = ", ".join(addresses.get(n, n[:8]) for n in slots.bundle_nodes(job, group))
            raise bound.failure(
                f"{started} of {job.world_size} Ray Train worker(s) started. Ray Train asked for {job.world_size} x "
                f"{short_config(asked)} on node(s) {where} ({free_of(asked)}); the trial holds its "
                f"{group_state(group)}"
            )
        time.sleep(0.25)
