"""Parameters against the metric: a parallel-coordinates plot of the finished trials."""

from __future__ import annotations

from typing import Any

from raysweep.runs.figures.common import choice_labels, label, varying_params
from raysweep.runs.record import SweepRecord
from raysweep.values import finite_number


def parallel_figure(sweep: SweepRecord) -> tuple[Any, str]:
    import plotly.graph_objects as go

    metric = sweep.metric
    scored = [t for t in sweep.trials if finite_number(t.metric)]
    if not metric or not scored:
        return None, "No trial has reported the metric yet."
    params = varying_params(sweep, scored) or list(scored[0].config)
    dims = []
    for name in params:
        values = [t.config.get(name) for t in scored]
        if all(finite_number(v) for v in values):
            dims.append({"label": name, "values": values})
        else:  # categorical or bool: an index per choice, in the spec's order where it has one
            choices = choice_labels(sweep.spec, name, values)
            dims.append(
                {
                    "label": name,
                    "values": [choices.index(label(v)) for v in values],
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
