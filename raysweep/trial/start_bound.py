"""A trial's workers start within ``raysweep.worker_start_timeout_s`` of the moment it holds its
resources, or the trial fails with a sentence that names what it waited for.

The clock starts in the trial's own process, which Tune starts only once the trial's placement
group is granted: a trial that waits its turn for a busy cluster is queued, not late. What it
then waits for differs by runner: the warm workers it borrowed answering (``gang.py``), Ray
Train's worker group entering the loop (``tune_trial.run_torchtrainer``), a bundle's node
answering (a trial across nodes). Each wait is bounded by the one deadline; a 1-worker trial in
its own process waits for nothing. The failure is an ordinary trial error: ``max_failures``
applies to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import ray

from raysweep.values import short_config


class WorkersNotStarted(RuntimeError):
    """Not every worker of the trial started within ``worker_start_timeout_s``; the message says what it waited for."""


class StartBound:
    """The deadline of one start of a trial's workers."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def get(self, refs: Sequence[Any], waited_for: Callable[[list[int]], str]) -> list[Any]:
        """``ray.get(refs)`` by the deadline; else ``WorkersNotStarted`` with ``waited_for(the
        indices that did not answer)``."""
        _, pending = ray.wait(list(refs), num_returns=len(refs), timeout=self.left())
        if pending:
            late = [i for i, ref in enumerate(refs) if ref in set(pending)]
            raise self.failure(waited_for(late))
        return ray.get(list(refs))

    def failure(self, what: str) -> WorkersNotStarted:
        return WorkersNotStarted(
            f"the trial's workers did not all start within {self.timeout_s:g} s of it holding its resources "
            f"(raysweep.worker_start_timeout_s): {what}"
        )


def group_state(group: Any) -> str:
    """A placement group in words: its id, its bundles, its state and the nodes it holds."""
    if group is None:
        return "no placement group"
    table = ray.util.placement_group_table(group)
    addresses = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
    nodes = sorted({addresses.get(node, node[:8]) for node in table.get("bundles_to_node_id", {}).values() if node})
    bundles = list(table.get("bundles", {}).values())
    held = f" on node(s) {', '.join(nodes)}" if nodes else ""
    return (
        f"placement group {group.id.hex()[:8]} ({len(bundles)} bundle(s) of {_resources(bundles[0]) if bundles else '{}'})"
        f" is {table.get('state', 'REMOVED')}{held}"
    )


def free_of(resources: dict[str, float]) -> str:
    """What the cluster has free of each of ``resources``' kinds, e.g. ``0 of 2 CPU free``."""
    available, total = ray.available_resources(), ray.cluster_resources()
    return ", ".join(f"{available.get(k, 0):g} of {total.get(k, 0):g} {k} free" for k in resources)


def _resources(bundle: dict[str, float]) -> str:
    return short_config({k: bundle[k] for k in sorted(bundle) if not k.startswith("bundle_group")})
