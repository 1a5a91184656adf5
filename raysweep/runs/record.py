"""``SweepRecord``: a run dir as the report and its figures read it, one typed object."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raysweep.runs.files import read_results, read_spec
from raysweep.runs.rows import TrialRow, read_rows
from raysweep.runs.show import load_results
from raysweep.spec import SweepSpec


@dataclass(frozen=True)
class SweepRecord:
    run_dir: Path
    name: str  # the sweep's, its run dir's name
    spec: SweepSpec
    metric: str | None  # the spec's metric.name
    goal: str  # minimize or maximize
    trials: list[dict[str, Any]]  # ``show --json``'s trials, best first
    best: dict[str, Any] | None
    rows: dict[str, TrialRow]  # trial id -> its trials.jsonl row (start, end, trial_dir, ...)
    histories: dict[str, list[dict[str, Any]]]  # trial id -> its result.json lines
    cost: dict[str, Any]  # ``show --json``'s cost: spent, its unit, the plan's and the budget's hours

    @classmethod
    def read(cls, run_dir: Path) -> SweepRecord:
        data = load_results(run_dir)
        rows = {r.trial_id: r for r in read_rows(run_dir)}
        return cls(
            run_dir=run_dir,
            name=data["name"],
            spec=read_spec(run_dir),
            metric=data["metric"],
            goal=data["goal"],
            trials=data["trials"],
            best=data["best"],
            rows=rows,
            histories={tid: read_results(r.trial_dir) for tid, r in rows.items()},
            cost=data["cost"],
        )
