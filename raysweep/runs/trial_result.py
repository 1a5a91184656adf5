"""One trial as a Python user reads it (``SweepResult.trials`` and ``.best``): a frozen record of
``show --json``'s row, as Optuna hands ``FrozenTrial`` objects, with ``to_json`` for that row."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields
from typing import Any

from raysweep.words import TrialStatus


@dataclass(frozen=True)
class TrialResult:
    trial_id: str
    status: TrialStatus
    config: dict[str, Any]
    metric: Any  # the metric's last value (None: the sweep has none, or the trial never logged it)
    iterations: int
    num_workers: int
    wall_s: float | None
    cost_hours: float
    created: float | None  # pending since (epoch seconds); start, end: when it ran
    start: float | None
    end: float | None
    reserved_at: float | None = None  # when the admission first reserved slots for it
    late: float | None = None  # how much later than that it started
    backfilled: bool = False  # it started behind another trial's reservation
    objectives: dict[str, float | None] | None = None  # under several objectives: its value of each
    pareto: bool = False  # on the Pareto front of those
    metric_logged: bool = True  # False: a W&B-style trial that never logged the metric
    preemptions: int = 0  # the times it left a draining or lost node and went on from its checkpoint
    error: str | None = None

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> TrialResult:
        """The record of a ``show --json`` row."""
        return cls(
            **{f.name: row[f.name] for f in fields(cls) if f.name in row} | {"status": TrialStatus(row["status"])}
        )

    def to_json(self) -> dict[str, Any]:
        """``show --json``'s row of the trial: the optional keys only where they say something."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["status"] = str(self.status)
        for key, shown in (
            ("reserved_at", self.reserved_at is not None),
            ("late", self.reserved_at is not None),
            ("backfilled", self.backfilled),
            ("objectives", self.objectives is not None),
            ("pareto", self.objectives is not None),
            ("metric_logged", not self.metric_logged),
            ("preemptions", bool(self.preemptions)),
            ("error", bool(self.error)),
        ):
            if not shown:
                del out[key]
        return out

    # The dict reading users' code did before the records (``t["metric"]``, ``t.get``, ``"error" in t``,
    # ``t.keys()``, ``dict(t)``) keeps working, each with a DeprecationWarning naming what to write.
    def _as_dict(self, reading: str) -> dict[str, Any]:
        warnings.warn(
            f"SweepResult trials are records: {reading} reads the dict they were; use the attributes "
            "(t.metric, t.config) or t.to_json() for the dict",
            DeprecationWarning,
            stacklevel=3,
        )
        return self.to_json()

    def __getitem__(self, key: str) -> Any:
        row = self._as_dict(f"t[{key!r}]")
        if key not in row:
            raise KeyError(key)
        return row[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._as_dict(f"t.get({key!r})").get(key, default)

    def keys(self) -> Any:
        return self._as_dict("t.keys()").keys()

    def items(self) -> Any:
        return self._as_dict("t.items()").items()

    def values(self) -> Any:
        return self._as_dict("t.values()").values()

    def __contains__(self, key: object) -> bool:
        return key in self._as_dict(f"{key!r} in t")
