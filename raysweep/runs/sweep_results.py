"""A sweep's results as every reader of a run dir sees them, typed: the trials ranked best first
(``RankedTrial``), the best, the cost and the admission's counts (``SweepResults``).

``show`` (table, CSV, JSON), ``raysweep.load`` and the report read these records; the public
JSON of ``show --json`` is made once, by ``SweepResults.to_json``. Needs no Ray.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from raysweep.runs.files import read_spec
from raysweep.runs.pareto import front
from raysweep.runs.rows import TrialRow, read_rows
from raysweep.runs.run_settings import read_settings
from raysweep.spec.objectives import Objectives
from raysweep.values import finite_number


@dataclass(frozen=True)
class RankedTrial:
    """A trial's row with its metric's last value, and under several objectives its value of
    each (None where it lacks one: it is on no front) and whether it is on the Pareto front."""

    row: TrialRow
    metric: Any = None
    objectives: dict[str, float | None] | None = None
    pareto: bool = False

    @property
    def trial_id(self) -> str:
        return self.row.trial_id

    @property
    def status(self) -> str:
        return self.row.status

    @property
    def status_text(self) -> str:
        """The status as readers print it: with the times it was preempted and went on."""
        return f"{self.status} (preempted {self.row.preemptions}x)" if self.row.preemptions else str(self.status)

    @property
    def config(self) -> dict[str, Any]:
        return self.row.config

    @property
    def iterations(self) -> int:
        return self.row.iterations or 0

    @property
    def num_workers(self) -> int:
        return self.row.world_size

    @property
    def cost_hours(self) -> float:
        return round(self.row.cost_hours, 6)

    def to_json(self) -> dict[str, Any]:
        """The trial as ``show --json`` writes it."""
        r = self.row
        return {
            "trial_id": r.trial_id,
            "status": r.status,
            "config": r.config,
            "metric": self.metric,
            "iterations": self.iterations,
            "num_workers": r.world_size,
            "wall_s": r.wall_s,
            "cost_hours": self.cost_hours,
            "created": r.created,  # pending since (epoch seconds); start, end: when it ran
            "start": r.start,
            "end": r.end,
            **({"reserved_at": r.reserved_at, "late": r.late} if r.reserved_at is not None else {}),
            **({"backfilled": True} if r.backfilled else {}),
            **({"objectives": self.objectives, "pareto": self.pareto} if self.objectives is not None else {}),
            **({} if r.metric_logged else {"metric_logged": False}),
            **({"preemptions": r.preemptions} if r.preemptions else {}),
            **({"error": r.error} if r.error else {}),
        }


@dataclass(frozen=True)
class Cost:
    """What the sweep spent (each trial's workers x the time it ran), beside its plan and budget."""

    spent_hours: float
    unit: str = "GPU-hours"
    plan_hours: float | None = None
    budget_hours: float | None = None


@dataclass(frozen=True)
class Admitted:
    """How many trials waited with a reservation, started late after one, and were backfilled."""

    reserved: int = 0
    late: int = 0
    backfilled: int = 0


@dataclass(frozen=True)
class SweepResults:
    name: str  # the run dir's
    metric: str | None  # the one metric's name (None under several objectives, or none)
    goal: str
    objectives: Objectives  # several (W&B's ``metrics:``); () for one metric or none
    described: str  # the objectives in words, where a metric is named (``Objectives.describe``)
    trials: tuple[RankedTrial, ...]  # best first (under several objectives: the front first; none: creation order)
    best: RankedTrial | None  # the best trial with a finite metric (none under several objectives, or none)
    cost: Cost
    admitted: Admitted

    def top(self, count: int) -> SweepResults:
        """The same results with only the ``count`` best trials."""
        return replace(self, trials=self.trials[:count])

    def to_json(self) -> dict[str, Any]:
        """The public ``show --json`` object."""
        return {
            "name": self.name,
            "metric": self.metric,
            "goal": self.goal,
            **({"objectives": [{"name": g.name, "goal": g.goal} for g in self.objectives]} if self.objectives else {}),
            "trials": [t.to_json() for t in self.trials],
            "best": self.best.to_json() if self.best else None,
            "cost": asdict(self.cost),
            "admission": asdict(self.admitted),
        }


def load_results(run_dir: Path) -> SweepResults:
    """The run dir's results: its trials ranked by the sweep's objectives (``Objectives.sort_key``:
    by its one metric, the Pareto front first, or in creation order without one), and the best."""
    objectives = read_spec(run_dir).objectives
    rows = read_rows(run_dir)
    points = [objectives.values(r.metrics, r.world_size) for r in rows]
    fronts = front(points, objectives) if objectives.several else [False] * len(rows)
    single = objectives.single
    trials = [
        RankedTrial(
            r,
            r.metric(single.name) if single else None,
            _by_name(objectives, values) if objectives.several else None,
            on,
        )
        for r, values, on in zip(rows, points, fronts, strict=True)
    ]

    def first(t: RankedTrial) -> Any:
        return t.metric if single else (t.objectives or {}).get(objectives[0].name) if objectives else None

    trials.sort(key=lambda t: objectives.sort_key(first(t), t.pareto, t.row.created))
    return SweepResults(
        name=run_dir.name,
        metric=single.name if single else None,
        goal=single.goal if single else "minimize",
        objectives=objectives if objectives.several else Objectives(),
        described=objectives.describe(),
        trials=tuple(trials),
        best=next((t for t in trials if finite_number(t.metric)), None) if single else None,
        cost=_cost(run_dir, trials),
        admitted=Admitted(
            reserved=sum(1 for t in trials if t.row.reserved_at is not None),
            late=sum(1 for t in trials if t.row.late),
            backfilled=sum(1 for t in trials if t.row.backfilled),
        ),
    )


def _by_name(goals: Objectives, values: tuple[float, ...] | None) -> dict[str, float | None]:
    return {g.name: (values[i] if values else None) for i, g in enumerate(goals)}


def _cost(run_dir: Path, trials: list[RankedTrial]) -> Cost:
    try:
        settings = read_settings(run_dir)
    except (OSError, ValueError, TypeError):
        settings = None
    planned = settings.plan if settings else None
    return Cost(
        spent_hours=round(sum(t.cost_hours for t in trials), 6),
        unit=planned.unit if planned else "GPU-hours",
        plan_hours=planned.hours if planned else None,
        budget_hours=settings.budget_gpu_hours if settings else None,
    )
