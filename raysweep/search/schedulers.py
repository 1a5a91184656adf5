"""Schedulers (early stopping), chosen from the spec's ``scheduler`` / ``early_terminate``."""

from __future__ import annotations

from typing import Any

from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, HyperBandScheduler, TrialScheduler

from raysweep.search.hyperband import WandbHyperband
from raysweep.spec import SweepSpec
from raysweep.spec.model import Scheduler


class StopRecorder:
    """Mixed into a Tune scheduler: remembers the trials it stopped, so ``show`` can tell
    a trial stopped early from one that ran to its end (Tune marks both TERMINATED)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.stopped: set[str] = set()
        self.max_t = kwargs["max_t"]

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        decision = super().on_trial_result(tune_controller, trial, result)
        # At max_t the scheduler says STOP too: that trial ran its course.
        if decision == TrialScheduler.STOP and result.get("training_iteration", 0) < self.max_t:
            self.stopped.add(trial.trial_id)
        return decision


class RecordingASHA(StopRecorder, ASHAScheduler):
    pass


class RecordingHyperBand(StopRecorder, HyperBandScheduler):
    pass


def asha(s: Scheduler) -> RecordingASHA:
    return RecordingASHA(
        time_attr="training_iteration", grace_period=s.grace_period, max_t=s.max_t, reduction_factor=s.reduction_factor
    )


def hyperband(s: Scheduler) -> RecordingHyperBand:
    return RecordingHyperBand(time_attr="training_iteration", max_t=s.max_t, reduction_factor=s.reduction_factor)


def wandb_hyperband(s: Scheduler) -> WandbHyperband:
    return WandbHyperband(bands=s.bands, eta=s.reduction_factor, strict=s.strict)


BUILDERS = {"asha": asha, "hyperband": hyperband, "wandb_hyperband": wandb_hyperband}  # spec.model.SCHEDULER_KINDS


def build_scheduler(spec: SweepSpec) -> Any:
    """One report is one iteration; FIFO when the spec asks for no early stopping."""
    if spec.scheduler is None:
        return FIFOScheduler()
    return BUILDERS[spec.scheduler.type](spec.scheduler)
