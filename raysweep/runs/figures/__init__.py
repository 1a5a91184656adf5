"""The report's figures (plotly), each built from a run dir's ``record.SweepRecord``: one module
per figure kind, ``FIGURES`` their order on the page, ``png.py`` their PNG export."""

from __future__ import annotations

from typing import Any

from raysweep.runs.figures.best_so_far import best_so_far_figure
from raysweep.runs.figures.curves import curves_figure
from raysweep.runs.figures.importance import importance_figure
from raysweep.runs.figures.parallel import parallel_figure
from raysweep.runs.figures.pareto import pareto_figure
from raysweep.runs.figures.png import write_pngs
from raysweep.runs.figures.throughput import throughput_figure
from raysweep.runs.figures.timeline import timeline_figure
from raysweep.runs.record import SweepRecord

__all__ = ["FIGURES", "figures", "write_pngs"]


FIGURES = (  # (name, section title, builder): the report's plots, in page order
    ("parallel", "Parameters against the metric", parallel_figure),
    ("importance", "Parameter importance", importance_figure),
    ("curves", "Learning curves", curves_figure),
    ("best_so_far", "Best so far against wall time", best_so_far_figure),
    ("throughput", "Throughput against workers", throughput_figure),
    ("pareto", "Pareto front of the objectives", pareto_figure),
    ("timeline", "Timeline: waits, runs and backfill", timeline_figure),
)


def figures(sweep: SweepRecord) -> list[tuple[str, str, Any, str]]:
    """(name, title, figure or None, note) for every section with a plot."""
    out = []
    for name, title, build in FIGURES:
        fig, note = build(sweep)
        if fig is not None:
            fig.update_layout(template="plotly_white", font={"size": 13}, margin={"t": 50, "r": 30})
        out.append((name, title, fig, note))
    return out
