"""The report's figures (plotly), each built from a run dir's ``record.SweepRecord``."""

from __future__ import annotations

import contextlib
import html
import json
from pathlib import Path
from typing import Any

from raysweep.errors import UserError
from raysweep.runs.files import OPTUNA_JOURNAL
from raysweep.runs.record import SweepRecord
from raysweep.runs.sweep_results import RankedTrial
from raysweep.spec import SweepSpec
from raysweep.values import finite_number, short_config
from raysweep.words import FINISHED, TrialStatus

STOP_MARK = "stopped by the scheduler"


def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _varying_params(sweep: SweepRecord, trials: list[RankedTrial]) -> list[str]:
    """The swept parameters that take more than one value among ``trials``, in spec order."""
    names = [p.name for p in sweep.spec.parameters]
    names += [k for t in trials for k in t.config if k not in names]
    return [n for n in dict.fromkeys(names) if len({_label(t.config.get(n)) for t in trials}) > 1]


def figures(sweep: SweepRecord) -> list[tuple[str, str, Any, str]]:
    """(name, title, figure or None, note) for every section with a plot."""
    out = []
    for name, title, build in FIGURES:
        fig, note = build(sweep)
        if fig is not None:
            fig.update_layout(template="plotly_white", font={"size": 13}, margin={"t": 50, "r": 30})
        out.append((name, title, fig, note))
    return out


def parallel_figure(sweep: SweepRecord) -> tuple[Any, str]:
    import plotly.graph_objects as go

    metric = sweep.metric
    scored = [t for t in sweep.trials if finite_number(t.metric)]
    if not metric or not scored:
        return None, "No trial has reported the metric yet."
    params = _varying_params(sweep, scored) or list(scored[0].config)
    dims = []
    for name in params:
        values = [t.config.get(name) for t in scored]
        if all(finite_number(v) for v in values):
            dims.append({"label": name, "values": values})
        else:  # categorical or bool: an index per choice, in the spec's order where it has one
            choices = _choices(sweep.spec, name, values)
            dims.append(
                {
                    "label": name,
                    "values": [choices.index(_label(v)) for v in values],
                    "tickvals": list(range(len(choices))),
                    "ticktext": choices,
                    "range": [0, max(len(choices) - 1, 1)],
                }
            )
    values = [t.metric for t in scored]
    dims.append({"label": metric, "values": values})
    line = {
        "color": values,
        "colorscale": "Viridis",
        "reversescale": sweep.goal == "minimize",
        "showscale": True,
        "colorbar": {"title": {"text": metric}},
    }
    fig = go.Figure(go.Parcoords(dimensions=dims, line=line, labelangle=-15 if len(dims) > 5 else 0))
    fig.update_layout(height=460, margin={"l": 80, "t": 90, "b": 40})
    note = f"{len(scored)} trials with a metric; brighter lines are better ({sweep.goal})."
    return fig, note


def _choices(spec: SweepSpec, name: str, values: list[Any]) -> list[str]:
    declared = [_label(v) for v in (spec.param(name).values or ())] if spec.param(name) is not None else []
    seen = {_label(v) for v in values}
    return [c for c in declared if c in seen] + sorted(seen - set(declared))


def importance_figure(sweep: SweepRecord) -> tuple[Any, str]:
    import optuna
    import plotly.graph_objects as go

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study, source = _study(sweep)
    if study is None:
        return None, source
    finished = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    params = [
        p
        for p in dict.fromkeys(k for t in finished for k in t.params)
        if len({repr(t.params.get(p)) for t in finished}) > 1
    ]
    if len(finished) < 2 or len(params) < 2:
        return (
            None,
            f"Skipped: needs 2+ finished trials and 2+ varying parameters (has {len(finished)} and {len(params)}).",
        )
    evaluator = optuna.importance.FanovaImportanceEvaluator(seed=0)
    try:
        importances = optuna.importance.get_param_importances(study, evaluator=evaluator, params=params)
    except RuntimeError as e:  # fANOVA on trials that all scored the same: "zero total variance"
        return None, f"Skipped: Optuna could not rank the parameters ({e})."
    names = list(importances)[::-1]  # most important on top
    values = [importances[n] for n in names]
    fig = go.Figure(
        go.Bar(
            x=values,
            y=names,
            orientation="h",
            marker_color="#4c78a8",
            text=[f"{v:.3f}" for v in values],
            textposition="outside",
            cliponaxis=False,
        )
    )
    fig.update_layout(
        height=140 + 40 * len(names),
        xaxis={"title": "importance (fANOVA, sums to 1)", "range": [0, 1.08]},
        yaxis={"ticksuffix": "  "},
        margin={"l": 160},
    )
    return fig, f"Optuna's get_param_importances over {len(finished)} finished trials, from {source}."


def _study(sweep: SweepRecord) -> tuple[Any, str]:
    """The sweep's Optuna study: its journal when there is one, else one built from finished trials."""
    import optuna

    journal = sweep.run_dir / OPTUNA_JOURNAL
    if journal.exists():
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        storage = JournalStorage(JournalFileBackend(str(journal)))
        names = optuna.get_all_study_names(storage)
        name = sweep.spec.name if sweep.spec.name in names else (names[0] if names else None)
        if name is not None:
            return optuna.load_study(study_name=name, storage=storage), f"the sweep's study ({OPTUNA_JOURNAL})"
    if not sweep.metric:
        return None, "Skipped: the sweep has no metric."
    finished = [t for t in sweep.trials if t.status in FINISHED and finite_number(t.metric)]
    params = _varying_params(sweep, finished)
    study = optuna.create_study(direction=sweep.goal)
    dists = {name: _distribution(sweep.spec, name, [t.config.get(name) for t in finished]) for name in params}
    for t in finished:
        values = {
            n: _label(t.config.get(n))
            if isinstance(d, optuna.distributions.CategoricalDistribution)
            else t.config.get(n)
            for n, d in dists.items()
        }
        study.add_trial(optuna.trial.create_trial(params=values, distributions=dists, value=t.metric))
    return study, "a study built from the finished trials"


def _distribution(spec: SweepSpec, name: str, values: list[Any]) -> Any:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    param = spec.param(name)
    kind = param.distribution if param is not None else ""
    if kind == "categorical" or not all(finite_number(v) for v in values):
        return CategoricalDistribution(_choices(spec, name, values))
    low, high = min(values), max(values)
    log = "log" in kind and low > 0
    if all(isinstance(v, int) for v in values):
        return IntDistribution(int(low), int(high), log=log)
    return FloatDistribution(float(low), float(high), log=log)


def curves_figure(sweep: SweepRecord) -> tuple[Any, str]:
    import plotly.graph_objects as go

    metric = sweep.metric
    fig = go.Figure()
    stopped_x, stopped_y, stopped_text = [], [], []
    for t in sweep.trials:
        points = [
            (r["training_iteration"], r[metric])
            for r in sweep.histories.get(t.trial_id, [])
            if metric and finite_number(r.get(metric)) and "training_iteration" in r
        ]
        if not points:
            continue
        config = short_config(t.config)
        fig.add_trace(
            go.Scatter(
                x=[p[0] for p in points],
                y=[p[1] for p in points],
                mode="lines+markers",
                marker={"size": 5},
                name=f"{t.trial_id} ({config})"[:60],
                legendgroup="trials",
                hovertemplate=f"{t.trial_id} [{t.status}]<br>{html.escape(config)}<br>iteration %{{x}}: %{{y:.4g}}<extra></extra>",
            )
        )
        if t.status == TrialStatus.STOPPED:
            stopped_x.append(points[-1][0])
            stopped_y.append(points[-1][1])
            stopped_text.append(t.trial_id)
    if not fig.data:
        return None, "No learning curves yet: no trial's result.json holds the metric."
    if stopped_x:
        fig.add_trace(
            go.Scatter(
                x=stopped_x,
                y=stopped_y,
                text=stopped_text,
                mode="markers",
                name=STOP_MARK,
                marker={"symbol": "x", "size": 13, "color": "#d62728", "line": {"width": 1, "color": "#7f0000"}},
                hovertemplate="%{text} stopped at iteration %{x}<extra></extra>",
            )
        )
    sched = sweep.spec.scheduler
    rungs = sched.rungs if sched is not None else []
    for r in rungs:
        fig.add_vline(
            x=r, line={"dash": "dot", "color": "#888"}, annotation_text=f"rung {r}", annotation_position="top"
        )
    many = len(fig.data) > 16
    fig.update_layout(
        height=480,
        xaxis_title="training_iteration",
        yaxis_title=metric,
        showlegend=not many,
        legend={"font": {"size": 11}},
        margin={"t": 60},
    )
    if many:  # keep the stop marker's meaning visible without a legend of every trial
        fig.update_traces(showlegend=False)
    note = f"Every trial's {metric} per report"
    note += f"; dotted lines are the {sched.type} rungs {rungs}" if rungs else ""
    note += (
        f"; a red X marks each of the {len(stopped_x)} trials {STOP_MARK} at its last iteration." if stopped_x else "."
    )
    return fig, note


def best_so_far_figure(sweep: SweepRecord) -> tuple[Any, str]:
    import plotly.graph_objects as go

    metric, goal = sweep.metric, sweep.spec.objectives.single
    starts = [r.start for r in sweep.rows.values() if finite_number(r.start)]
    if not metric or not starts:
        return None, "No trial has reported the metric yet."
    t0 = min(starts)
    events = []  # (seconds since the sweep started, value, trial)
    for tid, history in sweep.histories.items():
        start = sweep.rows[tid].start
        for r in history:
            if finite_number(r.get(metric)):
                at = (
                    start + r["time_total_s"]
                    if finite_number(start) and finite_number(r.get("time_total_s"))
                    else r.get("timestamp", t0)
                )
                events.append((at - t0, r[metric], tid))
    if not events:
        return None, "No trial has reported the metric yet."
    events.sort()
    best, xs, ys = None, [], []
    for at, value, _ in events:
        best = value if best is None or goal.better(value, best) else best
        xs.append(at)
        ys.append(best)
    fig = go.Figure(
        [
            go.Scatter(
                x=[e[0] for e in events],
                y=[e[1] for e in events],
                text=[e[2] for e in events],
                mode="markers",
                name="each report",
                marker={"size": 5, "color": "#bbb"},
                hovertemplate="%{text}: %{y:.4g} at %{x:.1f}s<extra></extra>",
            ),
            go.Scatter(
                x=xs, y=ys, mode="lines", line={"shape": "hv", "width": 3, "color": "#2ca02c"}, name="best so far"
            ),
        ]
    )
    fig.update_layout(height=420, xaxis_title="wall time since the sweep started (s)", yaxis_title=metric)
    return fig, f"The best {metric} reported by any trial so far ({sweep.goal}), against wall time."


def throughput_figure(sweep: SweepRecord) -> tuple[Any, str]:
    import plotly.graph_objects as go

    workers, speeds, ids = [], [], []
    for t in sweep.trials:
        values = sorted(
            r["samples_per_sec"] for r in sweep.histories.get(t.trial_id, []) if finite_number(r.get("samples_per_sec"))
        )
        if values:
            workers.append(int(t.num_workers or 1))
            speeds.append(values[len(values) // 2])  # the median report: robust to a slow first one
            ids.append(t.trial_id)
    if not speeds:
        return None, "Skipped: the train loop does not report samples_per_sec."
    fig = go.Figure(
        go.Box(
            x=workers,
            y=speeds,
            text=ids,
            boxpoints="all",
            jitter=0.3,
            pointpos=0,
            width=0.5,
            whiskerwidth=0.3,
            marker={"color": "#9467bd", "size": 7},
            fillcolor="rgba(148,103,189,0.15)",
            name="trials",
            hovertemplate="%{text}: %{y:.4g} samples/s<extra></extra>",
        )
    )
    spread = max(speeds) / max(min(speeds), 1e-12)
    fig.update_layout(
        height=400,
        xaxis={
            "title": "workers (DDP ranks)",
            "tickvals": sorted(set(workers)),
            "range": [min(workers) - 0.8, max(workers) + 0.8],
        },
        yaxis={"title": "samples/sec (median report)", "type": "log" if spread > 30 else "linear"},
        showlegend=False,
    )
    return fig, f"Each trial's median samples_per_sec against its number of DDP workers ({len(speeds)} trials)."


def pareto_figure(sweep: SweepRecord) -> tuple[Any, str]:
    """The first two objectives of a sweep of several, every trial a point, the front drawn."""
    import plotly.graph_objects as go

    goals = sweep.spec.objectives
    if not goals.several:
        return None, "Skipped: the sweep has one objective (metrics: lists several)."
    points = [t for t in sweep.trials if (t.objectives or {}).get(goals[0].name) is not None]
    points = [t for t in points if t.objectives.get(goals[1].name) is not None]
    if not points:
        return None, "Skipped: no trial has reported both objectives yet."
    x, y = goals[0].name, goals[1].name
    fig = go.Figure(
        go.Scatter(
            x=[t.objectives[x] for t in points],
            y=[t.objectives[y] for t in points],
            mode="markers",
            name="trials",
            text=[f"{t.trial_id} ({t.num_workers}w) {short_config(t.config)}" for t in points],
            marker={
                "size": 9,
                "color": [t.num_workers for t in points],
                "colorscale": "Viridis",
                "showscale": True,
                "colorbar": {"title": "workers"},
            },
            hovertemplate="%{text}<br>%{x:.4g}, %{y:.4g}<extra></extra>",
        )
    )
    on = sorted((t for t in points if t.pareto), key=lambda t: t.objectives[x])
    fig.add_trace(
        go.Scatter(
            x=[t.objectives[x] for t in on],
            y=[t.objectives[y] for t in on],
            mode="lines+markers",
            line={"shape": "hv" if goals[0].goal == goals[1].goal else "linear", "color": "#d62728"},
            marker={"size": 12, "symbol": "circle-open", "color": "#d62728"},
            name="Pareto front",
            hoverinfo="skip",
        )
    )
    fig.update_layout(height=460, xaxis_title=f"{x} ({goals[0].goal})", yaxis_title=f"{y} ({goals[1].goal})")
    note = f"Each trial's {x} against its {y}; in red the Pareto front ({len(on)} trials no other beats on both)."
    if len(goals) > 2:
        note += f" The front is over all {len(goals)} objectives; two are drawn."
    return fig, note


def timeline_figure(sweep: SweepRecord) -> tuple[Any, str]:
    """Each trial's wait (made, pending) and run (start to end) on the sweep's clock, one line per
    trial in the order Tune made them; a trial started behind another's reservation is marked."""
    import plotly.graph_objects as go

    rows = sorted((r for r in sweep.rows.values() if r.start is not None), key=lambda r: r.created or r.start)
    if not rows:
        return None, "Skipped: no trial has started."
    zero = min(r.created or r.start for r in rows)
    now = max(r.end or r.start for r in rows)
    labels = [f"{r.trial_id} ({r.world_size}w)" for r in rows]
    fig = go.Figure()
    waits = [r for r in rows if r.created is not None and r.start > r.created]
    fig.add_trace(
        go.Bar(
            y=[labels[rows.index(r)] for r in waits],
            x=[r.start - r.created for r in waits],
            base=[r.created - zero for r in waits],
            orientation="h",
            name="waiting",
            marker={"color": "rgba(160,160,160,0.35)"},
            hovertemplate="%{y}: waited %{x:.1f} s<extra></extra>",
        )
    )
    for backfilled, name, color in ((False, "running", "#1f77b4"), (True, "running, backfilled", "#ff7f0e")):
        ran = [r for r in rows if bool(r.backfilled) == backfilled]
        fig.add_trace(
            go.Bar(
                y=[labels[rows.index(r)] for r in ran],
                x=[(r.end or now) - r.start for r in ran],
                base=[r.start - zero for r in ran],
                orientation="h",
                name=name,
                marker={"color": color},
                hovertemplate="%{y}: ran %{x:.1f} s<extra></extra>",
            )
        )
    reserved = [r for r in rows if r.reserved_at is not None]
    if reserved:
        fig.add_trace(
            go.Scatter(
                y=[labels[rows.index(r)] for r in reserved],
                x=[r.reserved_at - zero for r in reserved],
                mode="markers",
                name="its reservation",
                marker={"symbol": "line-ns-open", "size": 14, "color": "#d62728"},
                hovertemplate="%{y}: reserved for %{x:.1f} s<extra></extra>",
            )
        )
    fig.update_layout(
        height=max(300, 22 * len(rows) + 120),
        barmode="overlay",
        xaxis_title="seconds since the first trial was made",
        yaxis={"autorange": "reversed", "type": "category"},
    )
    backfilled = sum(1 for r in rows if r.backfilled)
    note = (
        f"Each trial's wait (grey, from when Tune made it) and run. {len(reserved)} trial(s) waited with a "
        f"reservation (red mark: the start first expected), {backfilled} ran behind one (orange)."
    )
    return fig, note


FIGURES = (  # (name, section title, builder): the report's plots, in page order
    ("parallel", "Parameters against the metric", parallel_figure),
    ("importance", "Parameter importance", importance_figure),
    ("curves", "Learning curves", curves_figure),
    ("best_so_far", "Best so far against wall time", best_so_far_figure),
    ("throughput", "Throughput against workers", throughput_figure),
    ("pareto", "Pareto front of the objectives", pareto_figure),
    ("timeline", "Timeline: waits, runs and backfill", timeline_figure),
)


RENDER_TIMEOUT_S = 300  # a figure's render; kaleido's own 90 s was passed on a loaded 2-core CI machine


def write_pngs(figs: dict[str, Any], png_dir: Path) -> list[Path]:
    """Each figure as ``png_dir/<name>.png`` (kaleido, which needs Chrome or Chromium).

    kaleido itself, not plotly's ``write_images``: that one drops the errors kaleido returns, so a
    render that failed or timed out left no file and ``--png`` still succeeded. A figure that fails
    is rendered once more (the browser's tab may have crashed); one that fails again is an error
    naming it."""
    import kaleido

    png_dir.mkdir(parents=True, exist_ok=True)
    specs = {
        name: {
            "fig": fig,
            "path": png_dir / f"{name}.png",
            "opts": {"format": "png", "width": 1100, "height": fig.layout.height or 500},
        }
        for name, fig in figs.items()
    }
    errors: tuple[BaseException, ...] = ()
    todo = list(specs)
    for _ in range(2):
        try:
            errors = kaleido.write_fig_from_object_sync([specs[n] for n in todo], kopts={"timeout": RENDER_TIMEOUT_S})
        except Exception as e:  # kaleido raises its own types, and RuntimeError/OSError from the browser
            errors = (e,)
        todo = [n for n in todo if not _is_png(specs[n]["path"])]
        if not todo:
            return [spec["path"] for spec in specs.values()]
    why = f"{type(errors[0]).__name__}: {_first_line(errors[0])}" if errors else "no error reported"
    raise UserError(
        f"--png: could not export PNGs of {', '.join(todo)} with kaleido ({why}). "
        "kaleido drives a local Chrome or Chromium: install one (Debian: `apt-get install chromium`) "
        "or point BROWSER_PATH at it. The HTML report was written."
    )


def _is_png(path: Path) -> bool:
    with contextlib.suppress(OSError):
        with path.open("rb") as f:
            return f.read(8) == b"\x89PNG\r\n\x1a\n"
    return False


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else "no message"
