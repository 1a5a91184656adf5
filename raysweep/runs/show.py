"""``raysweep show``: a run dir found by name or path, and its results (``sweep_results.py``) as a
table or CSV. Needs no Ray."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from raysweep.errors import UserError
from raysweep.runs.files import SPEC_FILE
from raysweep.runs.rows import LATE_GRACE
from raysweep.runs.storage import fetch, remote_run
from raysweep.runs.sweep_results import SweepResults
from raysweep.values import short


def resolve_run_dir(run: str | os.PathLike, storage: str | os.PathLike = "raysweep_runs") -> Path:
    """A run dir given as a path, or a sweep name under ``storage``; one on a URI storage is pulled
    into its local copy first (``storage.py``)."""
    remote = remote_run(run, storage)
    if remote is not None:
        return fetch(remote)
    for candidate in (Path(run), Path(storage) / str(run)):
        if (candidate / SPEC_FILE).exists():
            return candidate.resolve()
    raise UserError(
        f"no sweep found at {run!r} (looked for {run}/{SPEC_FILE} and {Path(storage) / str(run)}/{SPEC_FILE})"
    )


def _columns(results: SweepResults) -> tuple[list[str], list[list[str]]]:
    params = list(dict.fromkeys(k for t in results.trials for k in t.config))
    goals = [g.name for g in results.objectives]
    metric = [results.metric] if results.metric else []  # a sweep with no metric has no metric column
    header = [
        "trial_id",
        "status",
        *params,
        *(goals + ["pareto"] if goals else metric),
        "iterations",
        "num_workers",
        "wall_s",
        "cost_h",
    ]
    rows = [
        [
            t.trial_id,
            t.status_text,
            *(short(t.config.get(p)) for p in params),
            *(
                [short((t.objectives or {}).get(g)) for g in goals] + ["*" if t.pareto else ""]
                if goals
                else ["not logged" if not t.row.metric_logged else short(t.metric)]
                if metric
                else []
            ),
            short(t.iterations),
            short(t.num_workers),
            short(t.row.wall_s),
            short(t.cost_hours),
        ]
        for t in results.trials
    ]
    return header, rows


def render_table(results: SweepResults, of: int | None = None) -> str:
    """The trials as a text table; ``of``, the sweep's trial count when ``results`` holds only its best."""
    header, rows = _columns(results)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    count = f"top {len(rows)} of {of} trials" if of is not None and of > len(rows) else f"{len(rows)} trials"
    if results.objectives:
        said = ", ".join(f"{g.name} ({g.goal})" for g in results.objectives)
        on = sum(1 for t in results.trials if t.pareto)
        lines = [f"sweep {results.name}: {count}, objectives {said}; the Pareto front (*, {on} trials) first"]
    elif results.metric:
        lines = [f"sweep {results.name}: {count}, {results.described}, best first"]
    else:
        lines = [f"sweep {results.name}: {count}, {results.described}"]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    cost = results.cost
    spent = f"cost: {cost.spent_hours:.4g} {cost.unit} spent (cost_h: workers x the time each trial ran)"
    if cost.plan_hours is not None:
        spent += f"; planned {cost.plan_hours:.4g}"
    if cost.budget_hours:
        spent += f"; budget {cost.budget_hours:g}"
    lines.append(spent)
    admitted = results.admitted
    if admitted.reserved or admitted.backfilled:
        lines.append(
            f"admission: {admitted.reserved} trial(s) waited with a reservation, {admitted.late} of them late "
            f"(started over {LATE_GRACE:g} s after it: a trial before them overran its estimate); "
            f"{admitted.backfilled} backfilled behind one"
        )
    for t in results.trials:
        if t.row.error:
            lines.append(f"\ntrial {t.trial_id} failed:\n" + "\n".join("  " + ln for ln in t.row.error.splitlines()))
    return "\n".join(lines)


def render_csv(results: SweepResults) -> str:
    header, rows = _columns(results)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()
