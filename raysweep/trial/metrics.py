"""What a report must hold, and one report from every rank's: the metric checks and the mean over
ranks that every runner applies, in one place."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any


class MetricError(ValueError):
    """A report the sweep cannot use: its metric is missing or not a finite number."""


def check_metric(metrics: Mapping[str, Any], metric: str | None) -> None:
    """The spec's metric must be in every report and finite.

    A missing metric would leave the scheduler blind (it never prunes, the searcher learns
    nothing); NaN or inf would rank a diverged trial. Either fails the trial with this
    sentence, and the searcher records the trial as failed.
    """
    if metric is None:
        return
    if metric not in metrics:
        raise MetricError(
            f"the sweep's metric {metric!r} (metric.name in the spec) is missing from this report; "
            f"it reported: {', '.join(sorted(metrics)) or 'nothing'}"
        )
    value = metrics[metric]
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise MetricError(f"the sweep's metric {metric!r} must be a number, got {value!r} ({type(value).__name__})")
    if not math.isfinite(value):
        raise MetricError(
            f"the sweep's metric {metric!r} is {value} (the trial diverged); the trial is failed so that "
            "the searcher records it as failed instead of ranking it"
        )


def mean_over_ranks(metrics: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One report from every rank's: numeric metrics averaged, the rest from rank 0.

    Both multi-rank runners (warm workers and TorchTrainer) turn their ranks' reports into the
    one Tune sees here, and nowhere else."""
    keys = [sorted(m) for m in metrics]
    if any(k != keys[0] for k in keys):
        detail = "; ".join(f"rank {r}: {', '.join(k)}" for r, k in enumerate(keys))
        raise ValueError(f"ranks reported different metric names in the same report ({detail})")
    merged = dict(metrics[0])
    for key in merged:
        if all(isinstance(m[key], numbers.Real) and not isinstance(m[key], bool) for m in metrics):
            merged[key] = math.fsum(float(m[key]) for m in metrics) / len(metrics)
    return merged
