"""``SweepRecord``: a run dir as the report and its figures read it, one typed object."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raysweep.runs.files import read_results, read_spec
from raysweep.runs.rows import TrialRow
from raysweep.runs.sweep_results import Cost, RankedTrial, load_results
from raysweep.spec import SweepSpec


@dataclass(frozen=True)
class SweepRecord:
    run_dir: Path
    name: str  # the sweep's, its run dir's name
    spec: SweepSpec
    metric: str | None  # the one metric's name (None for several, or none)
    goal: str  # minimize or maximize
    described: str  # the objectives in words, where a metric is named
    trials: tuple[RankedTrial, ...]  # best first
    best: RankedTrial | None
    rows: dict[str, TrialRow]  # trial id -> its trials.jsonl row (start, end, trial_dir, ...)
    histories: dict[str, list[dict[str, Any]]]  # trial id -> its result.json lines
    cost: Cost  # spent, its unit, the plan's and the budget's hours

    @classmethod
    def read(cls, run_dir: Path) -> SweepRecord:
        results = load_results(run_dir)
        rows = {t.trial_id: t.row for t in results.trials}
        return cls(
            run_dir=run_dir,
            name=results.name,
            spec=read_spec(run_dir),
            metric=results.metric,
            goal=results.goal,
            described=results.described,
            trials=results.trials,
            best=results.best,
            rows=rows,
            histories={tid: read_results(r.trial_dir, run_dir) for tid, r in rows.items()},
            cost=results.cost,
        )
