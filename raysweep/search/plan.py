"""A sweep's cost before it runs (``validate --plan``, the run banner): trials, their sizes,
the reports each makes under the sweep's early stopping, and so the worker-reports it will
spend; in GPU-hours (worker-hours on CPUs) with one report's seconds (``--epoch-seconds``), and
in wall time on the cluster's slots.

Early stopping is not a formula: ASHA compares a trial with those that reached its rung before
it. So the plan runs the sweep's own scheduler (Ray's ASHA, W&B's hyperband) on trials of
random quality, one after another, and counts where they stop (mean of ``SIMULATIONS`` runs).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from ray.tune.schedulers import TrialScheduler

from raysweep.runs.run_settings import Plan
from raysweep.search.schedulers import build_scheduler
from raysweep.spec import SweepSpec, grid_points
from raysweep.spec.model import SIZE
from raysweep.values import HOUR

SIMULATIONS = 20


def size_shares(spec: SweepSpec, trials: int) -> dict[int, float]:
    """Each trial size's share: counted over the grid's first ``trials`` points, else from the
    ``num_gpus`` parameter's law (categorical with its probabilities, or uniform)."""
    param = spec.param(SIZE)
    if param is None:
        return {spec.num_gpus or 1: 1.0}
    if spec.search_method.enumerates:
        counts = Counter(int(p[SIZE]) for p in grid_points(spec, trials))
        return {size: n / sum(counts.values()) for size, n in counts.items()}
    if param.distribution == "int_uniform":
        sizes = list(range(int(param.min), int(param.max) + 1))
        return dict.fromkeys(sizes, 1 / len(sizes))
    values = [int(v) for v in param.grid_values()]
    weights = list(param.probabilities) if param.probabilities else [1.0] * len(values)
    total = sum(weights)
    shares: dict[int, float] = {}
    for value, weight in zip(values, weights, strict=True):
        shares[value] = shares.get(value, 0.0) + weight / total
    return shares


def max_reports(spec: SweepSpec) -> int | None:
    """A trial's reports when nothing stops it: the scheduler's ``max_t``, else ``epochs`` (the
    mean of an ``epochs`` parameter's values, else ``base_config.epochs``)."""
    if spec.scheduler is not None and spec.scheduler.max_t:
        return int(spec.scheduler.max_t)
    param = spec.param("epochs")
    if param is not None and param.distribution in ("constant", "categorical", "int_uniform"):
        values = (
            [float(v) for v in param.grid_values()] if param.distribution != "int_uniform" else [param.min, param.max]
        )
        return max(1, round(sum(values) / len(values)))
    value = spec.base_config.get("epochs")
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 1 else None


def early_stopping(spec: SweepSpec, trials: int, most: int) -> tuple[float, list[tuple[int, float]]]:
    """Mean reports per trial, and the share reaching each rung, under the sweep's scheduler
    run on ``trials`` trials of random quality in turn."""
    if spec.scheduler is None or spec.scheduler.kind.pauses_trials:  # Ray's HyperBand: brackets of its own
        if spec.scheduler is None:
            return float(most), []
        return _geometric(spec, most)
    reached: Counter = Counter()
    total = 0
    rungs = [r for r in spec.scheduler.rungs if r <= most]
    rng = np.random.default_rng(0)
    for _ in range(SIMULATIONS):
        scheduler = build_scheduler(spec)
        scheduler.set_search_properties("loss", "min")
        for i in range(trials):
            trial = _Trial(f"t{i}")
            scheduler.on_trial_add(None, trial)
            quality = rng.random()
            for report in range(1, most + 1):
                decision = scheduler.on_trial_result(
                    None, trial, {"training_iteration": report, "loss": quality + 1 / report}
                )
                if report in rungs:
                    reached[report] += 1
                if decision == TrialScheduler.STOP or report == most:
                    total += report
                    break
    runs = SIMULATIONS * trials
    return total / runs, [(rung, reached[rung] / runs) for rung in rungs]


def _geometric(spec: SweepSpec, most: int) -> tuple[float, list[tuple[int, float]]]:
    """Successive halving's share: 1/eta of the trials go past each rung."""
    eta, rungs = spec.scheduler.reduction_factor, [r for r in spec.scheduler.rungs if r <= most]
    reports, share, last, out = 0.0, 1.0, 0, []
    for rung in rungs:
        reports += share * (rung - last)
        out.append((rung, share))
        share, last = share / eta, rung
    return reports + share * (most - last), out


@dataclass(eq=False)
class _Trial:
    """What a scheduler reads of a trial, for the simulation."""

    trial_id: str
    status: str = "RUNNING"
    config: dict = None  # type: ignore[assignment]
    evaluated_params: dict = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        self.config, self.evaluated_params = self.config or {}, self.evaluated_params or {}


def cost_unit(use_gpu: bool) -> str:
    """What a sweep's cost is counted in: GPU-hours, or worker-hours on CPUs."""
    return "GPU-hours" if use_gpu else "worker-hours"


def plan(spec: SweepSpec, trials: int, epoch_seconds: float | None, use_gpu: bool = True) -> Plan:
    sizes = size_shares(spec, trials)
    most = max_reports(spec)
    unit = cost_unit(use_gpu)
    if most is None:
        return Plan(trials, sizes, None, None, [], None, epoch_seconds, None, unit)
    per_trial, rungs = early_stopping(spec, trials, most)
    if spec.grow is not None:
        sizes = grown_report_shares(spec, rungs, most)
    mean_size = sum(size * share for size, share in sizes.items())
    worker_reports = trials * mean_size * per_trial
    hours = worker_reports * epoch_seconds / HOUR if epoch_seconds else None
    return Plan(
        trials, sizes, most, per_trial, rungs, worker_reports, epoch_seconds, hours, unit, spec.grow is not None
    )


def grown_report_shares(spec: SweepSpec, rungs: list[tuple[int, float]], most: int) -> dict[int, float]:
    """A growing sweep's reports (``raysweep.grow``), each at the size its trial runs at then (one
    size more past each rung it is promoted at): the share of the expected reports at each size."""
    sizes, eta = spec.grow.sizes, spec.scheduler.reduction_factor
    beyond = rungs[-1][1] / eta if rungs else 1.0
    at: dict[int, float] = {}
    for report in range(1, most + 1):
        reach = next((share for rung, share in rungs if report <= rung), beyond)
        passed = sum(1 for rung, _ in rungs if rung < report)
        size = sizes[min(passed, len(sizes) - 1)]
        at[size] = at.get(size, 0.0) + reach
    total = sum(at.values())
    return {size: count / total for size, count in at.items()}


def cheapest_trial_hours(spec: SweepSpec, epoch_seconds: float) -> float | None:
    """The least one trial can cost (its smallest size, stopped at its first rung), in hours."""
    most = max_reports(spec)
    if most is None:
        return None
    first = min((r for r in spec.scheduler.rungs if r <= most), default=most) if spec.scheduler else most
    return min(spec.world_sizes) * first * epoch_seconds / HOUR
