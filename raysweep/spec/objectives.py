"""What a sweep optimizes: ``Objectives``, a typed tuple of ``Metric``s that holds none (a sweep
with no ``metric:``, as W&B's own sweep-check grid), one (``metric:``) or several (``metrics:``,
``cost_hours`` among them).

Every reader ranks, names and values trials through it: the progress line, the last line, ``show``,
the DataFrame, the report, W&B's summary, the searchers and ``validate --sample``. None of them
asks whether there is a metric: a sweep without one ranks its trials in creation order and says so
where a metric would be named.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from raysweep.values import HOUR, finite_number

COST = "cost_hours"  # raysweep's measured cost, an objective a sweep may name (each trial's workers x hours held)
NO_METRIC = "no metric: trials in creation order"


def measured_cost(metrics: Mapping[str, Any], world_size: int) -> float | None:
    """``cost_hours`` of a trial's report: its workers x the seconds Tune counted it running
    (``time_total_s``, kept across restarts), in hours; None without that count."""
    seconds = metrics.get("time_total_s")
    return world_size * seconds / HOUR if finite_number(seconds) else None


@dataclass(frozen=True)
class Metric:
    name: str
    goal: str = "minimize"
    target: float | None = None

    @property
    def mode(self) -> str:
        """Ray Tune's and Optuna's word for the goal."""
        return "min" if self.goal == "minimize" else "max"

    def better(self, value: float, than: float) -> bool:
        return value > than if self.goal == "maximize" else value < than

    def best_first(self, value: Any) -> tuple[bool, float]:
        """The sort key that puts the best value first and values that are no finite number last."""
        scored = finite_number(value)
        return (not scored, self.rank(value) if scored else 0.0)

    def rank(self, value: float) -> float:
        """A sort key, best first: the value, negated when the goal is to maximize."""
        return -value if self.goal == "maximize" else value

    def reached_target(self, value: float) -> bool:
        return self.target is not None and (value == self.target or self.better(value, self.target))

    @property
    def target_text(self) -> str:
        return f"{self.name} {'>=' if self.goal == 'maximize' else '<='} {self.target:g}"

    def text(self) -> str:
        return f"{self.name} ({self.goal})"


class Objectives(tuple):
    """The sweep's metrics, in the file's order: ``()``, ``(metric,)`` or ``(m1, m2, ...)``."""

    def __new__(cls, metrics: Iterable[Metric] = ()) -> Objectives:
        return super().__new__(cls, tuple(metrics))

    def __repr__(self) -> str:
        return f"Objectives({list(self)!r})"

    @property
    def several(self) -> bool:
        """A Pareto front, not a best: two objectives or more."""
        return len(self) > 1

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self)

    @property
    def single(self) -> Metric | None:
        """The one metric of a sweep that has exactly one (what Tune's schedulers and bayes compare on)."""
        return self[0] if len(self) == 1 else None

    @property
    def reported(self) -> str | None:
        """The metric every report of a trial must hold (``trial/metrics.check_metric``): the one
        metric; none under several objectives (a report may carry some of them; the last report's
        are the trial's) or none at all."""
        return self.single.name if self.single else None

    @property
    def target(self) -> Metric | None:
        """The one metric, when it has a ``target`` that ends the sweep once a trial reaches it."""
        single = self.single
        return single if single is not None and single.target is not None else None

    def tune(self) -> tuple[Any, Any]:
        """Ray Tune's ``metric`` and ``mode``: a name and a word for one, lists for several, None for none."""
        if not self:
            return None, None
        if self.single:
            return self.single.name, self.single.mode
        return list(self.names), [m.mode for m in self]

    def values(self, metrics: Mapping[str, Any], world_size: int) -> tuple[float, ...] | None:
        """Each objective's value in a trial's last report (``cost_hours`` measured: its workers x
        the seconds Tune counted it running), or None if one is missing; ``()`` for none."""
        out = []
        for goal in self:
            value = metrics.get(goal.name)
            if goal.name == COST and value is None:
                value = measured_cost(metrics, world_size)
            if not finite_number(value):
                return None
            out.append(float(value))
        return tuple(out)

    def missing(self, metrics: Mapping[str, Any]) -> tuple[str, ...]:
        """The objectives a report lacks (``cost_hours`` is measured, never missing)."""
        return tuple(name for name in self.names if name != COST and name not in metrics)

    def sort_key(self, first: Any, on_front: bool, created: float | None) -> tuple:
        """A trial's place, best first, from its value of the first objective: by its one metric (a
        value that is no finite number last); the Pareto front first, then by the first objective;
        or in creation order without a metric."""
        if not self:
            return (created if created is not None else float("inf"),)
        key = self[0].best_first(first)
        return (not on_front, *key) if self.several else key

    def describe(self) -> str:
        """Where a metric would be named: ``val/loss (minimize)``, each of several, or that there is none."""
        if not self:
            return NO_METRIC
        return ", ".join(m.text() for m in self)

    def without_best(self) -> str:
        """Why a table of the best trials is empty, in a sentence."""
        if self.single:
            return f"No trial has reported {self.single.name} yet."
        if self.several:
            return f"The sweep has several objectives ({self.describe()}): the Pareto front ranks its trials."
        return f"The sweep has {NO_METRIC}."

    def to_json(self) -> list[dict[str, Any]]:
        return [{"name": m.name, "goal": m.goal, "target": m.target} for m in self]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Objectives:
        """A run dir's record: ``objectives`` (a list), or a record from before them: ``metric``
        (one, or None) beside ``objectives`` (several)."""
        listed = [Metric(**m) for m in data.get("objectives") or ()]
        if not listed and data.get("metric"):
            listed = [Metric(**data["metric"])]
        return cls(listed)
