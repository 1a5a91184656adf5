"""``raysweep report``: one self-contained HTML page about a sweep, readable offline.

It reads only the run dir (``spec.json``, ``trials.jsonl``, each trial's ``result.json`` and,
for bayes, ``optuna.journal``), so it works after the sweep, during it, and with no Ray.
plotly.js is inlined once in the page's head: the file opens with no network. ``png_dir``
also writes every figure as a PNG through kaleido, which drives a local Chrome/Chromium.
"""

from __future__ import annotations

import html
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from raysweep.runs.figures import figures, write_pngs
from raysweep.runs.record import SweepRecord
from raysweep.runs.storage import held
from raysweep.runs.sweep_results import Cost, RankedTrial
from raysweep.spec import SweepSpec
from raysweep.values import duration, finite_number, short, short_config
from raysweep.words import STATES

TOP = 10
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}


def build_report(run_dir: str | Path, out_html: str | Path, png_dir: str | Path | None = None) -> Path:
    """Write the report of the sweep in ``run_dir`` to ``out_html``; returns its path.

    With ``png_dir``, each figure is also written there as ``<name>.png``. A missing browser
    for that is a ``UserError`` (the HTML is written first either way).
    """
    import plotly.offline

    run_dir = Path(run_dir)
    sweep = SweepRecord.read(run_dir)
    sections = figures(sweep)
    body = [summary_html(sweep), table_html(sweep), rung_cost_html(sweep)]
    for name, title, fig, note in sections:
        body.append(f'<section id="{name}"><h2>{html.escape(title)}</h2>')
        if note:
            body.append(f'<p class="note">{html.escape(note)}</p>')
        if fig is not None:
            body.append(
                fig.to_html(full_html=False, include_plotlyjs=False, config=PLOTLY_CONFIG, div_id=f"fig-{name}")
            )
        body.append("</section>")
    page = PAGE.format(
        title=html.escape(f"raysweep report: {sweep.name}"),
        plotlyjs=plotly.offline.get_plotlyjs(),
        body="\n".join(body),
    )
    out = Path(out_html)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    if png_dir is not None:
        write_pngs({name: fig for name, _, fig, _ in sections if fig is not None}, Path(png_dir))
    return out


# --- reading the run dir -----------------------------------------------------------------


# --- HTML parts ----------------------------------------------------------------------------


def summary_html(sweep: SweepRecord) -> str:
    spec, trials, best = sweep.spec, sweep.trials, sweep.best
    counts = Counter(t.status for t in trials)
    status = ", ".join(f"{counts[s]} {s}" for s in STATES if counts[s]) or "no trials yet"
    starts = [r.start for r in sweep.rows.values() if finite_number(r.start)]
    ends = [r.end or r.start + (r.wall_s or 0) for r in sweep.rows.values() if finite_number(r.start)]
    items = [
        ("sweep", f"{sweep.name} ({spec.method})"),
        ("metric", sweep.described),
        ("trials", f"{len(trials)}: {status}" + _preempted(trials)),
        ("scheduler", _scheduler_text(spec)),
    ]
    if starts:
        items.append(("ran", f"{_when(min(starts))} for {duration(max(ends) - min(starts))}"))
    if best:
        config = short_config(best.config)
        items.append(("best", f"{sweep.metric} = {best.metric:.6g} (trial {best.trial_id}: {config})"))
    items.append(("cost", cost_text(sweep.cost)))
    items.append(("storage", held(sweep.run_dir).text()))
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in items)
    return f'<section id="summary"><h2>Summary</h2><table class="summary">{rows}</table></section>'


def _preempted(trials: Iterable[RankedTrial]) -> str:
    """How often the sweep's trials left a draining or lost node and went on from a checkpoint."""
    count = sum(t.row.preemptions for t in trials)
    return f"; {count} preemption(s), each gone on from a checkpoint" if count else ""


def cost_text(cost: Cost) -> str:
    """Spent, beside the plan and the budget (``show``'s ``cost:`` line says the same)."""
    text = f"{cost.spent_hours:.4g} {cost.unit} spent"
    if cost.plan_hours is not None:
        text += f", {cost.plan_hours:.4g} planned"
    if cost.budget_hours:
        text += f", budget {cost.budget_hours:g}"
    return text


def rung_cost_html(sweep: SweepRecord) -> str:
    """Where the GPU-hours went under early stopping: per rung, the trials that reached it and what
    the reports up to it cost (each trial's report costs its workers x its run time / its reports)."""
    rungs = sweep.spec.scheduler.rungs if sweep.spec.scheduler else []
    if not rungs:
        return ""
    unit = sweep.cost.unit
    bounds = [0, *rungs, max([rungs[-1], *(t.iterations for t in sweep.trials)])]
    lines = []
    for low, high in zip(bounds, bounds[1:], strict=False):
        if high <= low:
            continue
        reached, hours = 0, 0.0
        for t in sweep.trials:
            n = t.iterations
            if n <= 0:
                continue
            per_report = t.cost_hours / n
            hours += per_report * max(0, min(n, high) - low)
            reached += n > low
        span = f"reports {low + 1}-{high}" if high > low + 1 else f"report {high}"
        lines.append((span, reached, hours))
    head = f"<tr><th>reports</th><th>trials that made them</th><th>{html.escape(unit)}</th></tr>"
    body = "".join(f"<tr><td>{s}</td><td>{n}</td><td>{h:.4g}</td></tr>" for s, n, h in lines)
    return (
        '<section id="rung-cost"><h2>Cost by rung</h2><p class="note">What the reports between the '
        f"scheduler's rungs ({', '.join(map(str, rungs))}) cost, and how many trials made them.</p>"
        f'<table class="trials">{head}{body}</table></section>'
    )


def table_html(sweep: SweepRecord) -> str:
    top = [t for t in sweep.trials if finite_number(t.metric)][:TOP]
    if not top:
        why = sweep.spec.objectives.without_best()
        return f'<section id="best"><h2>Best trials</h2><p class="note">{html.escape(why)}</p></section>'
    params = list(dict.fromkeys(k for t in top for k in t.config))
    header = ["#", "trial", "status", *params, sweep.metric, "iterations", "workers", "wall s"]
    rows = []
    for i, t in enumerate(top, 1):
        cells = [
            i,
            t.trial_id,
            t.status_text,
            *(t.config.get(p, "") for p in params),
            t.metric,
            t.iterations,
            t.num_workers,
            t.row.wall_s,
        ]
        rows.append(
            "<tr>" + "".join(f"<td>{html.escape(short(c) if c is not None else '')}</td>" for c in cells) + "</tr>"
        )
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    title = f"Best trials (top {len(top)}, best first)"
    return f'<section id="best"><h2>{title}</h2><table class="trials"><tr>{head}</tr>{"".join(rows)}</table></section>'


def _scheduler_text(spec: SweepSpec) -> str:
    s = spec.scheduler
    if s is None:
        return "fifo (no early stopping)"
    return f"{s.type}: grace_period={s.grace_period}, max_t={s.max_t}, reduction_factor={s.reduction_factor}, rungs {s.rungs}"


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px auto; max-width: 1200px; color: #222; padding: 0 16px; }}
h1 {{ font-size: 1.6em; margin-bottom: 4px; }}
h2 {{ font-size: 1.2em; margin: 28px 0 6px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }}
table {{ border-collapse: collapse; font-size: 0.92em; }}
th, td {{ padding: 4px 10px; text-align: left; border-bottom: 1px solid #eee; vertical-align: top; }}
table.trials th {{ background: #f4f4f4; }}
table.trials td {{ font-variant-numeric: tabular-nums; }}
table.summary th {{ color: #555; font-weight: 600; }}
.note {{ color: #555; font-size: 0.92em; margin: 4px 0 8px; }}
</style>
<script type="text/javascript">{plotlyjs}</script>
</head>
<body>
<h1>{title}</h1>
{body}
</body>
</html>
"""
