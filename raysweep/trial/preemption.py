"""A node that announces its end: a spot VM reclaimed, SLURM's signal before its time limit, an
autoscaler draining it. Ray's GCS marks such a node draining, with a deadline
(``ray drain-node --reason DRAIN_NODE_REASON_PREEMPTION --deadline-remaining-seconds N``, the API
autoscaler v2 and KubeRay call); Ray places nothing new there.

A trial with a rank on a draining node is told (``raysweep.get_context().preemption``: the
deadline, for a loop that checkpoints every few epochs to save one now); at its next report that
carries a checkpoint it ends as ``Preempted`` and Tune starts it again from that checkpoint on
nodes that are not draining. ``Preempted`` is an actor error of a preempted node, which Tune does
not count against ``max_failures``; a trial whose node died under it (with or without notice)
ends so too, within ``raysweep.max_preemptions``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ray.exceptions import RayActorError

from raysweep import private_api

POLL_S = 0.5  # how often a trial's process asks the GCS (one call, cached between)


@dataclass(frozen=True)
class Preemption:
    """A node of the trial drains: ``deadline`` is when it ends (epoch seconds; None: no deadline given)."""

    node_ids: tuple[str, ...]
    deadline: float | None

    @property
    def seconds_left(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.time())


class Preempted(RayActorError):
    """The trial left a draining (or lost) node: Tune starts it again from its last checkpoint, and
    counts it as the preemption of an actor's node, not as a failure."""

    def __init__(self, message: str):
        super().__init__(error_msg=message, preempted=True)
        self.message = message

    def __reduce__(self):  # crosses processes with its message
        return (Preempted, (self.message,))

    def __str__(self) -> str:
        return self.message


class Watch:
    """The draining nodes among a trial's nodes, asked of the GCS at most every ``POLL_S``."""

    def __init__(self, node_ids: list[str] | tuple[str, ...], at_checkpoints: bool = True):
        self.node_ids = tuple(dict.fromkeys(node_ids))
        self.at_checkpoints = at_checkpoints  # False: a script, told by SIGTERM, leaves as it ends
        self._asked = 0.0
        self._seen: Preemption | None = None

    def notice(self) -> Preemption | None:
        now = time.monotonic()
        if now - self._asked >= POLL_S:
            self._asked = now
            draining = {n: ms for n, ms in private_api.draining_nodes().items() if n in self.node_ids}
            deadlines = [ms / 1000 for ms in draining.values() if ms]
            self._seen = Preemption(tuple(draining), min(deadlines) if deadlines else None) if draining else None
        return self._seen


_watch: Watch | None = None  # this process's trial (a Tune actor, a warm rank, a Train worker runs one at a time)


def watch(node_ids: list[str] | tuple[str, ...], at_checkpoints: bool = True) -> None:
    """Watch these nodes for this process's trial (each rank's entry point, and the trial's process);
    ``at_checkpoints``: the trial leaves at its next checkpoint (a ``program:`` script's leaves when
    the script, told by SIGTERM, ends: ``script_preemption.py``)."""
    global _watch
    _watch = Watch(node_ids, at_checkpoints)


def notice() -> Preemption | None:
    """The drain of a node of this process's trial, if one was announced."""
    return _watch.notice() if _watch is not None else None


def leaves_at_checkpoint() -> bool:
    """A node of this process's trial drains, and the trial leaves at its next checkpoint."""
    return _watch is not None and _watch.at_checkpoints and notice() is not None


def after_checkpoint() -> None:
    """Called in the trial's process after a report whose checkpoint Tune has kept: a trial on a
    draining node leaves it now, from that checkpoint."""
    seen = notice() if _watch is not None and _watch.at_checkpoints else None
    if seen is not None:
        left = seen.seconds_left
        when = f"{left:.0f} s before its deadline" if left is not None else "(no deadline given)"
        raise Preempted(
            f"preempted: node(s) {', '.join(seen.node_ids)} of this trial drain; it left them at its report's "
            f"checkpoint, {when}, and goes on from it on nodes that are not draining"
        )
