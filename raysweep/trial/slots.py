"""The placement group that holds a warm trial's slots: Tune's for the trial, or one the trial
makes itself.

Tune gives each trial a placement group of its shape and runs it in an actor made for that
shape, so a trial of another size waits for the old actor to end and a new one to start and
import Tune (2.8-6.8 s a switch on 2 cores, docs/benchmarks.md). Where the driver's admission
decides which trial starts (``driver/admission.py``), it gives a warm trial's Tune group a token
on its rank 0's node instead (``placement.token_bundles``), and the trial places its slots here.
Tune then runs trials of every size in the same actors, and the admission can start the
reserved trial's process a few seconds before its slots are expected to free.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable
from typing import Any

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from raysweep.placement import is_token, trial_bundles
from raysweep.trial.job import TrialJob


def slot_group(job: TrialJob, holdings: Any) -> tuple[Any, bool]:
    """The group that holds the trial's slots, and whether the trial made it (it then removes it).

    A group of its own waits for its slots without a bound: the admission started the trial
    because they are expected to free, so it is queued, not stuck (``worker_start_timeout_s``
    counts from when they are held)."""
    group = ray.util.get_current_placement_group()
    if group is None or not is_token(group.bundle_specs):
        return group, False
    bundles, strategy = trial_bundles(job.world_size, job.capacity)
    bundles[0] = {**bundles[0], f"node:{ray.util.get_node_ip_address()}": 0.001}  # rank 0 beside this process
    own = placement_group(bundles, strategy=strategy)
    if holdings is not None:  # the driver removes it if this process dies first
        holdings.placed.remote(job.trial_id, own)
    ray.get(own.ready())
    return own, True


NUDGES = 20  # the waiting group is granted within ~0.1 s of the removal (docs/benchmarks.md)
NUDGE_EVERY_S = 0.025


NUDGE_CALL_S = 2.0  # how long a trial's end waits for the holdings actor to take the nudging on


def release(group: Any, own: bool, holdings: Any = None) -> None:
    """Remove the group the trial made, and nudge Ray to grant the slots to a group waiting for
    them: from the sweep's ``holdings`` actor where there is one. This process may end first: Tune
    ends a trial's actor at once when no trial is left to reuse it, and the sweep's last trial then
    waited out Ray's 1-second tick for its slots (0.4-0.8 s, docs/benchmarks.md, 2026-12-05)."""
    if own:
        remove_placement_group(group)
        if holdings is None or not _nudged_from(holdings):
            start_nudging()


def _nudged_from(holdings: Any) -> bool:
    """Whether the holdings actor has taken the nudging on. The call is waited for (a few ms): one
    only sent died with a process ended right after it (1 trial in 15 on 2 loaded cores)."""
    try:
        ray.get(holdings.nudge.remote(), timeout=NUDGE_CALL_S)
    except ray.exceptions.RayError:  # gone (the sweep is ending) or slow: nudge from here
        return False
    return True


def start_nudging() -> None:
    threading.Thread(target=_nudge, name="raysweep-nudge", daemon=True).start()


def _nudge() -> None:
    """Ray grants a waiting placement group when its scheduler next runs: on a group's creation or
    removal, and once a second. Removing this trial's group runs it before the node has given the
    slots back, so the trial started ahead of them waited up to a second more, every slot idle
    (0.28 s median, 0.94 s at worst: ``bench.handoff``). Each group made here, of one byte of
    memory, runs it again. It only speeds a start up: a Ray that is going away ends it quietly."""
    with contextlib.suppress(Exception):
        for _ in range(NUDGES):
            time.sleep(NUDGE_EVERY_S)
            remove_placement_group(placement_group([{"memory": 1}], name="raysweep-nudge"))


def bundle_places(group: Any, indices: Iterable[int]) -> list[tuple[str, str, list[Any]]]:
    """(node id, address, no GPUs) of each of ``indices``' bundles, from the group's table."""
    table = ray.util.placement_group_table(group)
    addresses = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
    nodes = [table["bundles_to_node_id"][i] for i in indices]
    return [(node, addresses.get(node, node[:8]), []) for node in nodes]


def probe_bundles(group: Any, indices: Iterable[int], gpus: float) -> list[Any]:
    """A task in each of ``indices``' bundles, asking for its ``gpus``: each answers (node id,
    address, the GPUs Ray gave it there). A task of this small module, so the process Ray starts
    for it imports no Tune."""
    return [
        _bundle_node.options(
            num_cpus=0,
            num_gpus=gpus,
            scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index),
        ).remote()
        for index in indices
    ]


@ray.remote
def _bundle_node() -> tuple[str, str, list[Any]]:
    return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address(), ray.get_gpu_ids()


def bundle_nodes(job: TrialJob, group: Any) -> list[str]:
    """The node of each bundle of the group holding the trial's slots, rank 0's first."""
    if job.shape.nodes == 1 and group == ray.util.get_current_placement_group():
        return [ray.get_runtime_context().get_node_id()]
    table = ray.util.placement_group_table(group)
    return [table["bundles_to_node_id"][i] for i in range(job.shape.nodes)]
