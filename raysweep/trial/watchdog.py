"""The hang watchdog: a rank that sends no report for ``report_timeout_s`` fails its trial.

A rank stuck in a collective (waiting for a rank that stopped), ranks that report different
numbers of times, or a loop that simply stops reporting would otherwise hold their slots
forever. Each rank runs a daemon thread; every ``report`` beats it. When a rank goes silent,
its thread writes the explanation to ``watchdog.txt`` in the trial dir (the first rank to
time out wins) and ends the process: a thread stuck in C code (gloo, NCCL) cannot be
interrupted any other way. Ray sees the process die and fails the trial (or restarts it
from its last checkpoint, as ``max_failures`` allows); the driver shows the explanation.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from raysweep.runs.files import WATCHDOG_FILE

_RANKS_DIR = ".ranks"  # one small JSON per rank: its report count, so a timeout can compare ranks


class ReportWatchdog:
    def __init__(self, timeout_s: float, trial_dir: str, rank: int, world_size: int):
        self.timeout_s = timeout_s
        self.trial_dir = Path(trial_dir)
        self.rank, self.world_size = rank, world_size
        self.reports = 0
        self.last_beat = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="raysweep-watchdog", daemon=True)

    def start(self) -> None:
        (self.trial_dir / _RANKS_DIR).mkdir(parents=True, exist_ok=True)
        self._record(finished=False)
        self._thread.start()

    def beat(self) -> None:
        """Called after each completed report of this rank."""
        self.reports += 1
        self.last_beat = time.monotonic()
        self._record(finished=False)

    def stop(self) -> None:
        """The loop returned (or raised): this rank is no longer expected to report."""
        self._stop.set()
        self._record(finished=True)

    def _record(self, finished: bool) -> None:
        path = self.trial_dir / _RANKS_DIR / f"rank{self.rank}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"reports": self.reports, "finished": finished}))
        os.replace(tmp, path)

    def _watch(self) -> None:
        while not self._stop.wait(min(1.0, self.timeout_s / 4)):
            if time.monotonic() - self.last_beat > self.timeout_s:
                self._fire()

    def _fire(self) -> None:
        write_explanation(self.trial_dir, self.explain())
        os._exit(70)  # EX_SOFTWARE; the thread that hangs may be inside C code

    def explain(self) -> str:
        after = f"after its report #{self.reports}" if self.reports else "before its first report"
        who = f"rank {self.rank} of {self.world_size}" if self.world_size > 1 else "the train loop"
        lines = [
            f"watchdog: {who} sent no report for {self.timeout_s:g} s (report_timeout_s) {after}; "
            "the trial was ended as hung."
        ]
        early = ended_early(self.trial_dir, self.world_size) if self.world_size > 1 else None
        if early:  # the cause: a rank's loop returned while this one waits for it in a report
            lines.insert(0, ended_early_text(early[0], self.world_size, early[1]) + ".")
        if self.world_size > 1:
            lines.append(f"reports per rank: {rank_summary(self.trial_dir, self.world_size)}.")
            lines.append(
                "A rank waits in a collective when another rank stopped or every rank does not report "
                "the same number of times."
            )
        return "\n".join(lines)


def rank_summary(trial_dir: Path, world_size: int) -> str:
    parts = []
    for rank in range(world_size):
        path = trial_dir / _RANKS_DIR / f"rank{rank}.json"
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            parts.append(f"rank {rank}: unknown")
            continue
        parts.append(f"rank {rank}: {state['reports']}" + (" (its loop returned)" if state["finished"] else ""))
    return ", ".join(parts)


def ended_early_text(ranks: list[int], size: int, reports: int) -> str:
    """The sentence for ranks that reported fewer times than their peers (both trial paths use it)."""
    ended = ", ".join(str(r) for r in ranks)
    return (
        f"rank(s) {ended} of {size} ended after {reports} report(s) while the others reported again; "
        "every rank must report the same number of times"
    )


def ended_early(trial_dir: str | os.PathLike, world_size: int) -> tuple[list[int], int] | None:
    """Ranks whose loop returned while another rank was still reporting, and their report
    count, from the ranks' records (under a TorchTrainer the others then wait in a report)."""
    states = {}
    for rank in range(world_size):
        try:
            states[rank] = json.loads((Path(trial_dir) / _RANKS_DIR / f"rank{rank}.json").read_text())
        except (OSError, ValueError):
            return None
    done = [r for r, s in states.items() if s["finished"]]
    if not done or len(done) == world_size:
        return None
    return done, states[done[0]]["reports"]


def write_explanation(trial_dir: Path, text: str) -> None:
    """Keep the first explanation: later ranks time out only because the first one hung."""
    try:
        fd = os.open(trial_dir / WATCHDOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")


def clear(trial_dir: str | os.PathLike) -> None:
    """A new attempt of a trial starts with no explanation and no rank records."""
    root = Path(trial_dir)
    (root / WATCHDOG_FILE).unlink(missing_ok=True)
    for path in (root / _RANKS_DIR).glob("rank*.json"):
        path.unlink(missing_ok=True)
