"""A sweep's results in Python: what ``raysweep.run`` returns and ``raysweep.load`` reads.

The same rows as ``show --json``, from the run dir alone, so a finished, running or interrupted
sweep reads the same way; no Ray and no torch are imported (pandas only for ``dataframe()``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raysweep.runs.files import TUNE_KEYS, read_results
from raysweep.runs.rows import read_rows
from raysweep.runs.run_settings import read_settings
from raysweep.runs.show import resolve_run_dir
from raysweep.runs.sweep_results import load_results
from raysweep.runs.trial_result import TrialResult

if TYPE_CHECKING:
    import pandas


class SweepResult:
    """One sweep's run dir, read when asked (a running sweep's object shows its latest rows)."""

    def __init__(self, run_dir: str | os.PathLike):
        self.run_dir = Path(run_dir)

    def __repr__(self) -> str:
        results = load_results(self.run_dir)
        return f"SweepResult({results.name!r}: {len(results.trials)} trials, run dir {str(self.run_dir)!r})"

    @property
    def name(self) -> str:
        return self.run_dir.name

    @property
    def trials(self) -> list[TrialResult]:
        """Every trial, best first: the rows of ``show --json`` as frozen records."""
        return [TrialResult.from_json(t.to_json()) for t in load_results(self.run_dir).trials]

    @property
    def stopped(self) -> str | None:
        """Why the sweep was stopped before its budget, as ``wandb.agent`` stops (the first trials all
        failed: W&B's words), or a trial reached metric.target; None when it was not."""
        return read_settings(self.run_dir).stopped

    @property
    def best(self) -> TrialResult | None:
        """The best trial (``show --json``'s ``best``), None before any trial has a finite metric."""
        best = load_results(self.run_dir).best
        return TrialResult.from_json(best.to_json()) if best else None

    def dataframe(self) -> pandas.DataFrame:
        """One row per trial, best first: trial_id, status, the config's values, the last value of
        each metric reported, iterations, num_workers, wall_s, cost_hours, and created (pending
        since), start and end (epoch seconds). A column name that is both a
        parameter and a metric is the parameter's; the metric's gets ``metric.`` in front."""
        import pandas

        results = load_results(self.run_dir)
        metric = results.metric
        rows = []
        for t in results.trials:
            row: dict[str, Any] = {"trial_id": t.trial_id, "status": t.status, **t.config}
            for key, value in t.row.metrics.items():
                if key not in TUNE_KEYS and isinstance(value, (int, float)) and not isinstance(value, bool):
                    row[f"metric.{key}" if key in row else key] = value
            if metric:  # the column is there even for a trial that never logged it (NaN: not logged)
                row.setdefault(f"metric.{metric}" if metric in t.config else metric, float("nan"))
            row |= {
                "iterations": t.iterations,
                "num_workers": t.num_workers,
                "wall_s": t.row.wall_s,
                "cost_hours": t.cost_hours,
                **({"pareto": t.pareto} if t.objectives is not None else {}),
                "created": t.row.created,
                "start": t.row.start,
                "end": t.row.end,
            }
            rows.append(row)
        for column, shown in (("metric_logged", False), ("preemptions", True)):  # where some trial says one
            if any(bool(getattr(t.row, column)) is shown for t in results.trials):
                for row, t in zip(rows, results.trials, strict=True):
                    row[column] = getattr(t.row, column)
        return pandas.DataFrame(rows)

    def history(self, trial_id: str) -> list[dict[str, Any]]:
        """Every report of the trial, in order, as its ``result.json`` holds them."""
        row = next((r for r in read_rows(self.run_dir) if r.trial_id == trial_id), None)
        if row is None:
            raise KeyError(f"sweep {self.name} has no trial {trial_id!r}")
        return read_results(row.trial_dir, self.run_dir)


def load(run: str | os.PathLike, storage: str | os.PathLike = "raysweep_runs") -> SweepResult:
    """A sweep's results by name (under ``storage``) or run dir; raises ``UserError`` if there is none."""
    return SweepResult(resolve_run_dir(run, storage))
