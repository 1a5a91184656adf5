"""One trial: the Tune function trainable that runs a train loop (or a script) on ``num_gpus``
ranks. It builds the trial's ``TrialJob`` once and hands it to the runner the driver chose for its
size (``runners.py``: in the Tune trial's own process, on warm DDP workers, or as a TorchTrainer
run); a failure is explained here whatever the runner (a node lost, a rank silent or ended early).
"""

from __future__ import annotations

from typing import Any

import ray
from ray import tune

from raysweep.runs.files import read_explanation
from raysweep.trial import gang, preemption, slots, watchdog
from raysweep.trial.job import Sweep
from raysweep.trial.job_builder import InfeasibleTrial, build_job
from raysweep.trial.runners import RUNNERS
from raysweep.trial.start_bound import StartBound, WorkersNotStarted

__all__ = ["InfeasibleTrial", "TrialHung", "WorkersNotStarted", "run_trial"]


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


def within_limit(job: Any, preempted: preemption.Preempted, failure: str) -> Exception:
    """``preempted`` (no failure: Tune starts the trial again from its checkpoint) while the trial has
    been preempted at most ``max_preemptions`` times; past that, ``failure``, which counts as one."""
    count = ray.get(job.holdings.preempted.remote(job.trial_id)) if job.holdings is not None else 1
    if count <= job.max_preemptions:
        return preempted
    return NodeLost(f"{failure}; preempted {count} times, past raysweep.max_preemptions ({job.max_preemptions})")


def run_trial(flat_config: dict[str, Any], sweep: Sweep, worker_pool: Any) -> None:
    """The Tune function trainable (bound with ``tune.with_parameters``); ``worker_pool`` is the
    sweep's ``pool.WorkerPool`` (None with ``ddp_workers: torchtrainer``)."""
    ctx = tune.get_context()
    job = build_job(sweep, flat_config, ctx.get_trial_id(), ctx.get_trial_dir())
    group, own = slots.slot_group(job, sweep.holdings)
    bound = StartBound(job.start_timeout_s)  # from when the trial holds its slots
    watchdog.clear(job.trial_dir)  # a retried trial starts without the last attempt's explanation
    nodes = slots.bundle_nodes(job, group)
    preemption.watch(nodes, at_checkpoints=not job.entry.runs_own_process)
    if sweep.holdings is not None:  # the driver's admission sees which slots this trial holds
        sweep.holdings.hold.remote(job.trial_id, dict.fromkeys(nodes, job.shape.per_node))
    runner = RUNNERS[job.runner]
    try:
        runner.start(job, sweep, worker_pool, bound, group)
    except preemption.Preempted as e:  # it left a draining node at a checkpoint
        raise within_limit(job, e, str(e)) from None
    except Exception as e:
        if runner.in_trial_process:
            raise
        lost = lost_nodes(nodes)
        if lost:
            text = f"node(s) {', '.join(lost)} of this {job.shape.nodes}-node trial died; its ranks on every node were ended"
            preempted = preemption.Preempted(f"preempted: {text}; it goes on from its last checkpoint")
            raise within_limit(
                job, preempted, f"{text}. It restarts from its last checkpoint as max_failures allows"
            ) from e
        if isinstance(e, WorkersNotStarted):
            raise
        if preemption.notice() is not None:  # a rank left its draining node (a script told by SIGTERM)
            preempted = preemption.Preempted(f"preempted: a node of this trial drains, and its ranks ended: {e}")
            raise within_limit(job, preempted, f"its ranks ended while a node of it drained: {e}") from e
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
