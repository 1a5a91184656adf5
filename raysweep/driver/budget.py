"""A GPU-hour budget (``raysweep.budget.gpu_hours``, ``--budget-gpu-hours``): a sweep never
spends more than it, and a trial starts only if it fits.

A trial costs its workers x the time it held them, start-up included (worker-hours on CPUs).
``Ledger`` reads what was spent from the driver's record (``SweepMonitor``: every driver's, so
``resume`` counts on), and what a trial will cost from the trials that ran: the seconds a report
took per size, times the reports the scheduler lets a trial make at most. ``BudgetedSearch``
hands Tune a new trial only when the spend, what the running trials will still use and the new
trial's own cost fit the budget, and otherwise holds it until trials end; ``BudgetStopper`` ends
the sweep when the budget is spent, or when the trial held cannot fit with nothing running. The
running trials then stop at their report and wait, resumable, like the held one: ``resume
--budget-gpu-hours`` with a larger budget goes on.
"""

from __future__ import annotations

import os
import signal
import statistics
import threading
from typing import Any

from ray.tune.search import SearchAlgorithm
from ray.tune.stopper import Stopper

from raysweep.runs.rows import TrialRow
from raysweep.spec import SweepSpec
from raysweep.words import TrialStatus

HOUR = 3600.0


def unit(use_gpu: bool) -> str:
    return "GPU-hours" if use_gpu else "worker-hours"


class Ledger:
    """What a sweep spent and will spend, in worker-seconds, from the driver's rows."""

    def __init__(self, spec: SweepSpec, monitor: Any, limit_hours: float, use_gpu: bool):
        self.spec, self.monitor = spec, monitor
        self.limit_s = limit_hours * HOUR
        self.unit = unit(use_gpu)
        self.exhausted = False  # a trial that cannot fit even alone is waiting: the budget is spent for it

    def spent_s(self) -> float:
        return self.monitor.worker_seconds()

    def running(self) -> list[TrialRow]:
        return [r for r in self.monitor.rows.values() if r.status == TrialStatus.RUNNING]

    def report_seconds(self, size: int) -> float | None:
        """The seconds one report of a trial of ``size`` took, start-up shared out: the median over
        its trials that reported; the slowest size's where this size has none yet."""
        by_size: dict[int, list[float]] = {}
        for row in self.monitor.rows.values():
            if (row.iterations or 0) > 0 and row.run_s:
                by_size.setdefault(row.world_size, []).append(row.run_s / row.iterations)
        if size in by_size:
            return statistics.median(by_size[size])
        return max((statistics.median(v) for v in by_size.values()), default=None)

    def reports(self, config: dict[str, Any]) -> int | None:
        """The reports a trial makes at most: the scheduler's ``max_t``, else the config's
        ``epochs``, else the most any trial made so far."""
        most = expected_reports(self.spec, config)
        if most is None:
            return max((r.iterations or 0 for r in self.monitor.rows.values()), default=0) or None
        return most

    def cost_s(self, config: dict[str, Any]) -> float:
        """A new trial's expected worker-seconds (0 while nothing tells: the first trials run)."""
        per, most = self.report_seconds(self.spec.world_size(config)), self.reports(config)
        return self.spec.world_size(config) * per * most if per and most else 0.0

    def committed_s(self) -> float:
        """Spent, plus what the running trials will still use."""
        left = 0.0
        for row in self.running():
            per, most = self.report_seconds(row.world_size), self.reports(row.config)
            if per and most:
                left += row.world_size * max(0.0, per * (most - (row.iterations or 0)))
        return self.spent_s() + left

    def fits(self, config: dict[str, Any]) -> bool:
        return self.committed_s() + self.cost_s(config) <= self.limit_s

    def sentence(self) -> str:
        return f"budget spent: {self.spent_s() / HOUR:.4g} of {self.limit_s / HOUR:g} {self.unit}"


def expected_reports(spec: SweepSpec, config: dict[str, Any]) -> int | None:
    """The reports a trial of ``config`` makes at most, as far as the spec says: the scheduler's
    ``max_t``, else an ``epochs`` in the trial's values or ``base_config``."""
    if spec.scheduler is not None and spec.scheduler.max_t:
        return int(spec.scheduler.max_t)
    for source in (config, spec.base_config):
        value = source.get("epochs") if isinstance(source, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 1:
            return int(value)
    return None


class BudgetStopper(Stopper):
    """Ends the sweep once its budget is spent (the running trials stop at their report and stay
    resumable), or once a held trial cannot fit even with nothing running.

    Tune ends every trial of a sweep that a stopper stops, and its searcher with it: nothing
    would be left to resume. Tune's own interrupt (SIGINT, which it catches) leaves them as they
    are, so the stopper interrupts the sweep that way, once, and ``fired`` says it did. Run from
    a thread, where Tune catches no signal, it stops the sweep as other stoppers do.
    """

    resumable = True  # what it leaves unfinished, resume runs

    def __init__(self, ledger: Ledger):
        self.ledger = ledger
        self.fired = False

    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        if self.fired or not (self.ledger.exhausted or self.ledger.spent_s() >= self.ledger.limit_s):
            return False
        self.fired = True
        if threading.current_thread() is not threading.main_thread():
            return True
        os.kill(os.getpid(), signal.SIGINT)
        return False

    @property
    def reason(self) -> str:
        return self.ledger.sentence()


class BudgetedSearch(SearchAlgorithm):
    """Tune's search algorithm, whose next trial waits until it fits the budget."""

    def __init__(self, inner: SearchAlgorithm, ledger: Ledger):
        super().__init__()
        self.inner, self.ledger = inner, ledger
        self.held: Any = None  # the next trial, made by the inner search, not yet handed to Tune
        self.searcher = getattr(inner, "searcher", None)  # Tune looks for a ConcurrencyLimiter here

    def next_trial(self) -> Any:
        if self.held is None:
            self.held = self.inner.next_trial()
            if self.held is None:
                return None
        if not self.ledger.fits(self.held.config):
            if self.ledger.running():
                return None  # it may fit once they end (the scheduler can stop them early)
            self.ledger.exhausted = True  # it cannot fit even alone: handed to Tune, it waits for resume
        trial, self.held = self.held, None
        return trial

    # everything else is the inner search's
    @property
    def metric(self) -> Any:
        return self.inner.metric

    def set_search_properties(self, metric: Any, mode: Any, config: dict, **spec: Any) -> bool:
        return self.inner.set_search_properties(metric, mode, config, **spec)

    @property
    def total_samples(self) -> int:
        return self.inner.total_samples

    def add_configurations(self, experiments: Any) -> None:
        self.inner.add_configurations(experiments)

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        self.inner.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        self.inner.on_trial_complete(trial_id, result=result, error=error)

    def is_finished(self) -> bool:
        return self.held is None and self.inner.is_finished()

    def set_finished(self) -> None:
        self.inner.set_finished()

    def has_checkpoint(self, dirpath: str) -> bool:
        return self.inner.has_checkpoint(dirpath)

    def save_to_dir(self, dirpath: str, **kwargs: Any) -> None:
        self.inner.save_to_dir(dirpath, **kwargs)

    def restore_from_dir(self, dirpath: str) -> None:
        self.inner.restore_from_dir(dirpath)
