"""W&B's hyperband early stopping (``early_terminate: hyperband``), as a Ray Tune scheduler.

The rule is W&B's engine's (PyPI ``sweeps``, ``hyperband_stop_runs``), tested against it on
hand-fed metric streams (tests/search/test_wandb_oracle.py):

* bands are iterations (``Scheduler.bands``: ``min_iter * eta^k``, or ``max_iter / eta^k``);
* a band's threshold is the value at the ``1/eta`` quantile of every run's metric at that band
  (runs of any state that reached it), ``sorted(values)[int(len / eta)]``, lower is better;
* a running run past a band is stopped when its value at its last band (``strict``, W&B's
  default), or its best value so far (``strict: false``), is worse than that band's threshold;
* nothing stops a run for reaching an iteration count: it runs until its loop ends.

W&B's server applies the rule to every running run every so often; here it is applied to a
trial at each of its reports, which is when its own history changes. Each band keeps its
values sorted, so a decision costs O(log n) plus the insert.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Any

from ray.tune.schedulers import FIFOScheduler, TrialScheduler


def should_stop(
    history: Sequence[float], bands: Sequence[int], band_values: Sequence[Sequence[float]], eta: float, strict: bool
) -> bool:
    """W&B's decision for one running run; ``history`` and ``band_values`` are lower-is-better,
    ``band_values[i]`` holds every run's value at ``bands[i]``, sorted."""
    closest = -1
    for i, band in enumerate(bands):
        if band > len(history):
            break
        closest = i
    if closest < 0:
        return False
    values = band_values[closest]
    threshold = values[int(len(values) / eta)] if values else math.inf
    value = history[bands[closest] - 1] if strict else min(history)
    return value > threshold


class WandbHyperband(FIFOScheduler):
    """Stops trials by W&B's hyperband rule; ``stopped`` names them (``show`` says "stopped")."""

    def __init__(
        self, bands: Sequence[int], eta: float, strict: bool = True, metric: str | None = None, mode: str | None = None
    ):
        super().__init__()
        self.bands, self.eta, self.strict = tuple(bands), eta, strict
        self._metric, self._mode = metric, mode
        self._band_index = {band: i for i, band in enumerate(self.bands)}
        self.histories: dict[str, list[float]] = {}
        self.band_values: list[list[float]] = [[] for _ in self.bands]
        self.stopped: set[str] = set()

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        self._metric = self._metric or metric
        self._mode = self._mode or mode
        return True

    def record(self, trial_id: str, value: float) -> list[float]:
        """Add one report's metric to the trial's history (negated when higher is better)."""
        history = self.histories.setdefault(trial_id, [])
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            history.append(-value if self._mode == "max" else float(value))  # W&B drops invalid values
            i = self._band_index.get(len(history))
            if i is not None:
                bisect.insort(self.band_values[i], history[-1])
        return history

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        history = self.record(trial.trial_id, result.get(self._metric))
        if should_stop(history, self.bands, self.band_values, self.eta, self.strict):
            self.stopped.add(trial.trial_id)
            return TrialScheduler.STOP
        return TrialScheduler.CONTINUE

    def debug_string(self) -> str:
        return f"W&B hyperband: bands {list(self.bands[:6])}, eta {self.eta:g}, strict {self.strict}"
