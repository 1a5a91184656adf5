"""The warm runner: a trial's ranks on the sweep's warm DDP workers (``pool.py``), borrowed on
each of its nodes (``lease.py``) and run as one gang (``gang.py``); the slots they use are held
by the trial's placement group (Tune's, or ``slots.py``'s)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ray
from ray import tune

from raysweep.placement import rank_places
from raysweep.trial import gang, preemption, rank, slots
from raysweep.trial.cpu_threads import ThreadShare
from raysweep.trial.job import Sweep, TrialJob
from raysweep.trial.lease import borrow, give_back
from raysweep.trial.staging import STAGED, unstage
from raysweep.trial.start_bound import StartBound, group_state
from raysweep.trial.warm_rank import RankCall


def run_warm(job: TrialJob, sweep: Sweep, worker_pool: Any, bound: StartBound, group: Any) -> None:
    """Run the trial on ``job.world_size`` of the pool's warm workers, on each of its nodes
    (``group`` holds their slots)."""
    capacity = job.capacity
    places = rank_places(trial_nodes(job, bound, group), job.shape.per_node)

    def forward(metrics: dict[str, Any], checkpoint: Any) -> None:
        if isinstance(checkpoint, str):  # a directory on this node
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(checkpoint))
        else:
            tune.report(metrics, checkpoint=checkpoint)
            if checkpoint is not None:  # staged on the storage by a rank 0 on another node
                unstage(checkpoint)
        if checkpoint is not None:
            preemption.after_checkpoint()

    lease = borrow(worker_pool, places, group, thread_share(job))
    try:
        call = RankCall(
            fn=rank.on_warm_worker,
            args=job,
            group_backend=job.group_backend,
            checkpoint=tune.get_checkpoint(),
            places=places,
            use_gpu=capacity.use_gpu,
            threads=lease.threads,
            group_timeout_s=job.group_timeout_s,
            env=job.network_env(),
            trial_node=ray.get_runtime_context().get_node_id(),
            stage_at=sweep.in_home(Path(job.trial_dir).name, STAGED),
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
