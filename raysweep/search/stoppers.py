"""Stoppers of a whole sweep: a metric target reached, or the first trials all failed; and the
driver's stoppers as the one Tune is given (``SweepStoppers``)."""

from __future__ import annotations

from collections.abc import Callable

from ray.tune.stopper import CombinedStopper, NoopStopper, Stopper

from raysweep.spec.model import Metric
from raysweep.values import finite_number


class TargetStopper(Stopper):
    """End the sweep once any trial reaches ``metric.target``."""

    def __init__(self, metric: Metric):
        self.metric = metric
        self.reached = False

    def __call__(self, trial_id: str, result: dict) -> bool:
        value = result.get(self.metric.name)
        if finite_number(value) and self.metric.reached_target(value):
            self.reached = True
        return False

    def stop_all(self) -> bool:
        return self.reached

    @property
    def reason(self) -> str:
        return f"a trial reached metric.target ({self.metric.target_text})"


class InitialFailureStopper(Stopper):
    """End the sweep when its first ``limit`` trials all failed: a script that fails on import
    would otherwise fail every trial of the budget (W&B's agent stops after 5)."""

    def __init__(self, all_failed: Callable[[], bool], limit: int = 5):
        self.all_failed = all_failed  # the driver's count of the first trials that failed
        self.limit = limit

    @property
    def reason(self) -> str:
        """W&B's agent's own words (wandb/agents/pyagent.py) for the same stop."""
        return f"Detected {self.limit} failed runs in a row at start, killing sweep."

    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        return self.all_failed()


class SweepStoppers(CombinedStopper):
    """This driver's stoppers, as the one Tune is given. Tune pickles its stopper into the
    experiment's state, and a resumed run puts the pickled one back over the one it was given
    (``TuneController.__setstate__``): a resumed sweep ran the first driver's stoppers, with a stale
    copy of its monitor, and a budget's that had fired already, so a resume whose budget ran out
    again waited forever. Unpickled, it is the stoppers of the driver that loads it."""

    current: SweepStoppers | None = None  # the driver's, made before Tune runs or restores

    def __init__(self, *stoppers: Stopper):
        super().__init__(*stoppers)
        self.stoppers = list(stoppers)
        SweepStoppers.current = self

    def __reduce__(self) -> tuple:
        return (this_drivers_stoppers, ())


def this_drivers_stoppers() -> Stopper:
    return SweepStoppers.current or NoopStopper()
