"""Best so far against wall time: the best metric as trials ended."""

from __future__ import annotations

from typing import Any

from raysweep.runs.record import SweepRecord
from raysweep.values import finite_number


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
