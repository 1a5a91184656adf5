"""The Pareto front of a sweep of several objectives (W&B's ``metrics:``): the trials no other
trial beats on every objective at once. Pure, no Ray: ``show``, the DataFrame and the report
mark its members.

A trial's objectives are its last report's values, as W&B reads a run's summary
(``Objectives.values``: ``cost_hours`` measured); a trial without every objective is on no front.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from raysweep.spec.model import Metric


def dominates(a: Sequence[float], b: Sequence[float], goals: Sequence[Metric]) -> bool:
    """``a`` is at least as good as ``b`` on every objective, and better on one."""
    pairs = list(zip(a, b, strict=True))
    no_worse = all(not goal.better(y, x) for (x, y), goal in zip(pairs, goals, strict=True))
    return no_worse and any(goal.better(x, y) for (x, y), goal in zip(pairs, goals, strict=True))


def on_front(
    point: tuple[float, ...] | None, others: Iterable[tuple[float, ...] | None], goals: Sequence[Metric]
) -> bool:
    """Whether ``point`` (None: a trial without every objective) is beaten by none of ``others``."""
    return point is not None and not any(q is not None and dominates(q, point, goals) for q in others)


def front(points: Sequence[tuple[float, ...] | None], goals: Sequence[Metric]) -> list[bool]:
    """For each point (None: a trial without every objective), whether it is on the front."""
    return [on_front(p, points, goals) for p in points]


def hypervolume_2d(
    points: Sequence[tuple[float, float]], goals: Sequence[Metric], reference: tuple[float, float]
) -> float:
    """The area two objectives' front dominates, up to ``reference`` (a point worse on both): the
    larger, the better the front."""
    signs = [1.0 if g.goal == "minimize" else -1.0 for g in goals]
    ref = (reference[0] * signs[0], reference[1] * signs[1])
    flipped = sorted((x * signs[0], y * signs[1]) for x, y in points if x * signs[0] < ref[0] and y * signs[1] < ref[1])
    area, best_y = 0.0, ref[1]
    for x, y in flipped:  # by the first objective, best first
        if y < best_y:
            area += (ref[0] - x) * (best_y - y)
            best_y = y
    return area
