"""A trial's row of ``trials.jsonl``, typed (``TrialRow``), and the journal it is read from.

raysweep's readers and writers of the file go through ``TrialRow`` (``files.read_trials`` gives
tests and bench/ the raw dicts); its JSON form is the file's, unchanged: the world size is
``num_workers`` there (docs/run-dir.md), a key whose value is unknown is left out, and
``metric_logged`` is written only when False.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from raysweep.runs.files import TRIALS_FILE, read_trials
from raysweep.values import HOUR
from raysweep.words import ENDED, FINISHED, TrialStatus

_JSON_NAMES = {"world_size": "num_workers"}  # this record's name -> the file's
LATE_GRACE = 5.0  # seconds a reserved trial may start after its reservation and still be on time


@dataclass(frozen=True)
class TrialRow:
    trial_id: str
    status: TrialStatus = TrialStatus.PENDING
    config: dict[str, Any] = field(default_factory=dict)  # the flat config Tune ran
    world_size: int = 1
    trial_dir: str | None = None
    created: float | None = None  # when Tune made it: it waits (pending) from then until its start
    start: float | None = None  # when it first started (None: it never has)
    end: float | None = None
    since: float | None = None  # while it runs: its running time is counted from here
    run_s: float = 0.0  # the seconds it held its workers, every driver's, start-up included
    iterations: int | None = None
    metrics: dict[str, Any] = field(default_factory=dict)  # its last report
    wall_s: float | None = None
    error: str | None = None
    metric_logged: bool = True  # False: a W&B-style trial that ended without logging the metric
    reserved_at: float | None = None  # it waited with a reservation: the time first expected for its start
    backfilled: bool | None = None  # True: started behind another trial's reservation
    # a trial that changed size (``growth.py``): [size, from when, iterations then, run_s then], one per segment
    sizes: list[list[float]] | None = None
    worker_s: float | None = None  # the seconds it held each worker, summed (None: world_size x run_s)
    preemptions: int = 0  # the times it left a draining or lost node and went on from its checkpoint

    @property
    def late(self) -> bool:
        """It started more than ``LATE_GRACE`` after its reservation (a trial before it overran)."""
        return self.reserved_at is not None and self.start is not None and self.start > self.reserved_at + LATE_GRACE

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrialRow:
        names = {v: k for k, v in _JSON_NAMES.items()}
        known = {names.get(k, k): v for k, v in data.items() if names.get(k, k) in cls.__dataclass_fields__}
        row = cls(**known)
        return replace(
            row,
            status=TrialStatus(row.status),
            config=row.config or {},
            metrics=row.metrics or {},
            world_size=row.world_size or 1,
            run_s=row.run_s or 0.0,
        )

    def to_json(self) -> dict[str, Any]:
        out = {_JSON_NAMES.get(k, k): v for k, v in asdict(self).items() if v is not None}
        if self.metric_logged:
            del out["metric_logged"]
        if not self.preemptions:
            del out["preemptions"]
        return out

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def end_at(self, status: TrialStatus, end: float) -> TrialRow:
        """This trial, ended at ``end`` with ``status`` (a started trial: its wall time is from its start)."""
        return replace(self, status=status, end=end, wall_s=round(end - self.start, 2))

    @property
    def cost_hours(self) -> float:
        """What it cost: its workers x the time it ran (a trial that grew: each size's share)."""
        return self.held_worker_s / HOUR

    @property
    def held_worker_s(self) -> float:
        """The seconds it held each of its workers, summed, up to its last account."""
        return self.worker_s if self.worker_s is not None else self.world_size * self.run_s

    def accounted(self, now: float, running: bool = True) -> TrialRow:
        """Its time since the last account added (``run_s``, and each worker's at its size now);
        ``running`` False: its run ended at ``now``."""
        if self.since is None:
            return self
        spent = now - self.since
        worker_s = None if self.sizes is None else round(self.held_worker_s + self.world_size * spent, 3)
        return replace(self, run_s=round(self.run_s + spent, 3), worker_s=worker_s, since=now if running else None)

    def grown(self, size: int, at: float) -> TrialRow:
        """It goes on at ``size`` workers from ``at`` (accounted up to then at its size before)."""
        row = self.accounted(at) if self.since is not None else self
        first = [[row.world_size, row.start if row.start is not None else at, 0, 0.0]]
        worker_s = row.held_worker_s
        return replace(
            row,
            world_size=size,
            sizes=(row.sizes or first) + [[size, at, row.iterations or 0, row.run_s]],
            worker_s=worker_s,
        )

    def report_seconds(self) -> list[tuple[int, float]]:
        """The seconds one report took at each size it ran at (start-up shared out): (size, seconds)."""
        if self.sizes is None:
            return (
                [(self.world_size, self.run_s / self.iterations)] if (self.iterations or 0) > 0 and self.run_s else []
            )
        ends = [(s[2], s[3]) for s in self.sizes[1:]] + [(self.iterations or 0, self.run_s)]
        out = []
        for (size, _, iterations, run_s), (iterations_end, run_s_end) in zip(self.sizes, ends):
            if iterations_end > iterations and run_s_end > run_s:
                out.append((int(size), (run_s_end - run_s) / (iterations_end - iterations)))
        return out

    def metric(self, name: str | None) -> Any:
        """The metric's last reported value (None: not reported, or no metric)."""
        return self.metrics.get(name) if name else None


class Rows(dict):
    """A driver's rows by trial id, which count their changes (``version``): readers that derive
    figures from every row (``driver/estimates.py``) recompute them only when a row changed. The
    admission asks for each waiting trial's length at every step: over a thousand trials that was
    most of a simulated sweep's time (bench/simulate.py)."""

    version = 0

    def __setitem__(self, key: str, value: TrialRow) -> None:
        self.version += 1
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self.version += 1
        super().__delitem__(key)

    def pop(self, *args: Any) -> Any:
        self.version += 1
        return super().pop(*args)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self.version += 1
        super().update(*args, **kwargs)

    def clear(self) -> None:
        self.version += 1
        super().clear()


def worker_seconds(rows: Iterable[TrialRow], now: float) -> float:
    """What the trials have spent: each one's workers x the time it ran, running ones to ``now``."""
    return sum(r.held_worker_s + r.world_size * (now - r.since if r.since is not None else 0.0) for r in rows)


def read_rows(run_dir: Path | str) -> list[TrialRow]:
    """The run dir's trials, typed: each trial's last line of the journal (``files.read_trials``)."""
    return [TrialRow.from_json(data) for data in read_trials(Path(run_dir) / TRIALS_FILE)]
