"""Throughput against workers: how a trial's report time scales with its size."""

from __future__ import annotations

from typing import Any

from raysweep.runs.record import SweepRecord
from raysweep.values import finite_number


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
