"""Learning curves: each trial's metric per report, a stopped trial marked where the scheduler stopped it."""

from __future__ import annotations

import html
from typing import Any

from raysweep.runs.figures.common import STOP_MARK
from raysweep.runs.record import SweepRecord
from raysweep.values import finite_number, short_config
from raysweep.words import TrialStatus


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
        fig.add_trace(_stop_marks(stopped_x, stopped_y, stopped_text))
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


def _stop_marks(x: list[Any], y: list[Any], text: list[str]) -> Any:
    """A red X at the last report of each trial the scheduler stopped."""
    import plotly.graph_objects as go

    return go.Scatter(
        x=x,
        y=y,
        text=text,
        mode="markers",
        name=STOP_MARK,
        marker={"symbol": "x", "size": 13, "color": "#d62728", "line": {"width": 1, "color": "#7f0000"}},
        hovertemplate="%{text} stopped at iteration %{x}<extra></extra>",
    )
