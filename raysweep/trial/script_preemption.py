"""A ``program:`` script on a node that announces its end: it is told as SLURM and torchrun's
agent tell a job, by SIGTERM, with the rest of the node's deadline as its grace before it is ended.
A script that saves to its trial checkpoint directory on SIGTERM (``script_checkpoints.py``) and
exits has that save kept with its last report: rank 0's reports wait, from the notice, for its
script to end. The trial then goes on from that checkpoint on nodes that are not draining, and
its end is a preemption, not a failure, whatever the script's exit code.
"""

from __future__ import annotations

import signal
import subprocess
import time

from raysweep.trial.preemption import Preempted, Preemption

NO_DEADLINE_GRACE_S = 30.0  # a drain without a deadline: as long as W&B's agent waits after SIGTERM
MARGIN_S = 1.0  # ended this long before the deadline, so its last report leaves the node first


class Leaving:
    """One rank's script from the notice on: told once, ended at its deadline if it has not ended."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.notice: Preemption | None = None
        self.end_at: float | None = None  # monotonic

    @property
    def started(self) -> bool:
        return self.notice is not None

    def follow(self, notice: Preemption | None) -> None:
        """At the first notice, SIGTERM to the script (through its supervisor, to its process group)."""
        if notice is None or self.started:
            return
        self.notice = notice
        left = notice.seconds_left
        grace = NO_DEADLINE_GRACE_S if left is None else max(0.0, left - MARGIN_S)
        self.end_at = time.monotonic() + grace
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR1)

    def overdue(self) -> bool:
        """The script outlived its grace (the caller ends it)."""
        return self.end_at is not None and time.monotonic() > self.end_at and self.proc.poll() is None

    def preempted(self, label: str) -> Preempted:
        left = self.notice.seconds_left if self.notice else None
        when = f"{left:.0f} s before its deadline" if left is not None else "(no deadline given)"
        nodes = ", ".join(self.notice.node_ids) if self.notice else "?"
        return Preempted(
            f"preempted: node(s) {nodes} of this trial drain; program {label} was told by SIGTERM and ended "
            f"{when}; the trial goes on from its last checkpoint on nodes that are not draining"
        )
