"""Reading a run dir back: ``raysweep show`` as a table, JSON or CSV. Needs no Ray."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any

from raysweep.errors import UserError
from raysweep.runs.files import SPEC_FILE, read_spec
from raysweep.runs.pareto import front, objective_values
from raysweep.runs.rows import LATE_GRACE, read_rows
from raysweep.runs.run_settings import read_settings
from raysweep.values import short


def resolve_run_dir(run: str | os.PathLike, storage: str | os.PathLike = "raysweep_runs") -> Path:
    """A run dir given as a path, or a sweep name under ``storage``."""
    for candidate in (Path(run), Path(storage) / str(run)):
        if (candidate / SPEC_FILE).exists():
            return candidate.resolve()
    raise UserError(
        f"no sweep found at {run!r} (looked for {run}/{SPEC_FILE} and {Path(storage) / str(run)}/{SPEC_FILE})"
    )


def load_results(run_dir: Path) -> dict[str, Any]:
    """The public ``show --json`` object: trials best first, and the best trial."""
    spec = read_spec(run_dir)
    metric = spec.metric.name if spec.metric else None
    goal = spec.metric.goal if spec.metric else "minimize"
    rows = read_rows(run_dir)
    several = spec.objectives
    points = [objective_values(r.metrics, r.world_size, several) for r in rows] if several else []
    on_front = front(points, several) if several else []
    trials = []
    for i, r in enumerate(rows):
        trials.append(
            {
                "trial_id": r.trial_id,
                "status": r.status,
                "config": r.config,
                "metric": r.metric(metric),
                "iterations": r.iterations or 0,
                "num_workers": r.world_size,
                "wall_s": r.wall_s,
                "cost_hours": round(r.cost_hours, 6),
                "created": r.created,  # pending since (epoch seconds); start, end: when it ran
                "start": r.start,
                "end": r.end,
                **({"reserved_at": r.reserved_at, "late": r.late} if r.reserved_at is not None else {}),
                **({"backfilled": True} if r.backfilled else {}),
                **(_objectives(several, points[i], on_front[i]) if several else {}),
                **({} if r.metric_logged else {"metric_logged": False}),
                **({"error": r.error} if r.error else {}),
            }
        )

    def rank(t: dict[str, Any]) -> tuple:
        if several:  # the front first, then by the first objective
            return (not t.get("pareto"), *several[0].best_first((t.get("objectives") or {}).get(several[0].name)))
        return spec.metric.best_first(t["metric"])

    trials.sort(key=rank)
    best = None if several else next((t for t in trials if rank(t)[0] is False), None)
    return {
        "name": run_dir.name,
        "metric": metric,
        "goal": goal,
        **({"objectives": [{"name": g.name, "goal": g.goal} for g in several]} if several else {}),
        "trials": trials,
        "best": best,
        "cost": _cost(run_dir, trials),
        "admission": {
            "reserved": sum(1 for t in trials if "reserved_at" in t),
            "late": sum(1 for t in trials if t.get("late")),
            "backfilled": sum(1 for t in trials if t.get("backfilled")),
        },
    }


def _objectives(goals: Any, values: tuple[float, ...] | None, on_front: bool) -> dict[str, Any]:
    """A trial's objectives (None where it lacks one: it is on no front) and its front membership."""
    return {
        "objectives": {g.name: (values[i] if values else None) for i, g in enumerate(goals)},
        "pareto": on_front,
    }


def _cost(run_dir: Path, trials: list[dict[str, Any]]) -> dict[str, Any]:
    """What the sweep spent (each trial's workers x the time it ran), beside its plan and budget."""
    try:
        settings = read_settings(run_dir)
    except (OSError, ValueError, TypeError):
        settings = None
    planned = settings.plan if settings else None
    return {
        "spent_hours": round(sum(t["cost_hours"] for t in trials), 6),
        "unit": planned.unit if planned else "GPU-hours",
        "plan_hours": planned.hours if planned else None,
        "budget_hours": settings.budget_gpu_hours if settings else None,
    }


def _columns(data: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    params = list(dict.fromkeys(k for t in data["trials"] for k in t["config"]))
    goals = [g["name"] for g in data.get("objectives", [])]
    header = [
        "trial_id",
        "status",
        *params,
        *(goals + ["pareto"] if goals else [data["metric"] or "metric"]),
        "iterations",
        "num_workers",
        "wall_s",
        "cost_h",
    ]
    rows = [
        [
            t["trial_id"],
            t["status"],
            *(short(t["config"].get(p)) for p in params),
            *(
                [short(t["objectives"][g]) for g in goals] + ["*" if t["pareto"] else ""]
                if goals
                else ["not logged" if t.get("metric_logged") is False else short(t["metric"])]
            ),
            short(t["iterations"]),
            short(t["num_workers"]),
            short(t["wall_s"]),
            short(t["cost_hours"]),
        ]
        for t in data["trials"]
    ]
    return header, rows


def render_table(data: dict[str, Any], of: int | None = None) -> str:
    """The trials as a text table; ``of``, the sweep's trial count when ``data`` holds only its best."""
    header, rows = _columns(data)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    count = f"top {len(rows)} of {of} trials" if of is not None and of > len(rows) else f"{len(rows)} trials"
    if data.get("objectives"):
        said = ", ".join(f"{g['name']} ({g['goal']})" for g in data["objectives"])
        on = sum(1 for t in data["trials"] if t.get("pareto"))
        lines = [f"sweep {data['name']}: {count}, objectives {said}; the Pareto front (*, {on} trials) first"]
    else:
        lines = [f"sweep {data['name']}: {count}, {data['metric']} ({data['goal']}), best first"]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    cost = data["cost"]
    spent = f"cost: {cost['spent_hours']:.4g} {cost['unit']} spent (cost_h: workers x the time each trial ran)"
    if cost["plan_hours"] is not None:
        spent += f"; planned {cost['plan_hours']:.4g}"
    if cost["budget_hours"]:
        spent += f"; budget {cost['budget_hours']:g}"
    lines.append(spent)
    admitted = data.get("admission") or {}
    if admitted.get("reserved") or admitted.get("backfilled"):
        lines.append(
            f"admission: {admitted['reserved']} trial(s) waited with a reservation, {admitted['late']} of them late "
            f"(started over {LATE_GRACE:g} s after it: a trial before them overran its estimate); "
            f"{admitted['backfilled']} backfilled behind one"
        )
    for t in data["trials"]:
        if t.get("error"):
            lines.append(f"\ntrial {t['trial_id']} failed:\n" + "\n".join("  " + ln for ln in t["error"].splitlines()))
    return "\n".join(lines)


def render_csv(data: dict[str, Any]) -> str:
    header, rows = _columns(data)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()
