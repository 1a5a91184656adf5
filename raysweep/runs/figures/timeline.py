"""Timeline: each trial's wait and run, its reservation and whether it ran behind one (backfill)."""

from __future__ import annotations

from typing import Any

from raysweep.runs.record import SweepRecord


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
        fig.add_trace(_reservations(reserved, [labels[rows.index(r)] for r in reserved], zero))
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


def _reservations(reserved: list[Any], labels: list[str], zero: float) -> Any:
    """A red mark at the start each reserved trial was first expected to have."""
    import plotly.graph_objects as go

    return go.Scatter(
        y=labels,
        x=[r.reserved_at - zero for r in reserved],
        mode="markers",
        name="its reservation",
        marker={"symbol": "line-ns-open", "size": 14, "color": "#d62728"},
        hovertemplate="%{y}: reserved for %{x:.1f} s<extra></extra>",
    )
