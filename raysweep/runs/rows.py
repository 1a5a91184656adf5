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
        """What it cost: its workers x the time it ran."""
        return self.world_size * self.run_s / HOUR

    def metric(self, name: str | None) -> Any:
        """The metric's last reported value (None: not reported, or no metric)."""
        return self.metrics.get(name) if name else None


def worker_seconds(rows: Iterable[TrialRow], now: float) -> float:
    """What the trials have spent: each one's workers x the time it ran, running ones to ``now``."""
    return sum(r.world_size * (r.run_s + (now - r.since if r.since is not None else 0.0)) for r in rows)


def read_rows(run_dir: Path | str) -> list[TrialRow]:
    """The run dir's trials, typed: each trial's last line of the journal (``files.read_trials``)."""
    return [TrialRow.from_json(data) for data in read_trials(Path(run_dir) / TRIALS_FILE)]
