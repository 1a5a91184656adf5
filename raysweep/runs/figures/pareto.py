"""The Pareto front of a sweep with several objectives."""

from __future__ import annotations

from typing import Any

from raysweep.runs.record import SweepRecord
from raysweep.values import short_config


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
