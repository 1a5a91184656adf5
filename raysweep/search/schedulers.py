"""Schedulers (early stopping), chosen from the spec's ``scheduler`` / ``early_terminate``; every
one also fails a pending trial that the cluster, having lost nodes, can no longer place."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import ray
from ray.tune.experiment import Trial
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, HyperBandScheduler, TrialScheduler

from raysweep.placement import Capacity, NeverPlaced, nodes_from, shape
from raysweep.search.hyperband import WandbHyperband
from raysweep.spec import SweepSpec
from raysweep.spec.model import Scheduler

LIVE_NODES_EVERY_S = 2.0


class PlacementGuard:
    """Mixed into every scheduler: a pending trial (a retry after its node died, or one queued
    when a node left) whose size the nodes still alive can never place fails at once with a
    sentence, instead of waiting for a node that is gone. Tune lets a scheduler stop a pending
    trial (``stop_trial``); ``never_placed`` keeps why, for the driver's record.

    ``watch`` arms it with the sweep's spec and the cluster measured at its start: a size that
    never fit that cluster fails in its trial as before (``placement.NEVER_PLACED``), and a
    cluster that can grow makes every trial wait instead. With an ``admission`` (the driver's
    reservations and backfill, ``driver/admission.py``), it chooses which waiting trial runs next;
    the admission is this driver's, never pickled with the scheduler."""

    spec: SweepSpec | None = None
    capacity: Capacity | None = None
    admission: Any = None

    def watch(self, spec: SweepSpec, capacity: Capacity, admission: Any = None) -> None:
        self.spec, self.capacity, self.admission = spec, capacity, admission
        self.never_placed: dict[str, str] = getattr(self, "never_placed", {})
        self._checked = 0.0

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"admission": None}

    def choose_trial_to_run(self, tune_controller: Any) -> Any:
        if self.capacity is not None and not self.capacity.grows:
            self._fail_unplaceable(tune_controller)
        if self.admission is not None:
            return self.admission.choose(tune_controller)
        return super().choose_trial_to_run(tune_controller)

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        """The scheduler's decision; a trial it lets go on that the admission resizes (``raysweep.grow``,
        ``driver/promotions.py``: grown at a rung, filling idle slots or giving them back) pauses,
        to go on at its new size."""
        decision = super().on_trial_result(tune_controller, trial, result)
        if (
            decision == TrialScheduler.CONTINUE
            and self.admission is not None
            and self.admission.resizes(tune_controller, trial, result)
        ):
            return TrialScheduler.PAUSE
        return decision

    def _fail_unplaceable(self, tune_controller: Any) -> None:
        waiting = (Trial.PENDING, Trial.PAUSED)  # PAUSED: held back by the admission
        pending = [t for t in tune_controller.get_trials() if t.status in waiting]
        if not pending or time.monotonic() - self._checked < LIVE_NODES_EVERY_S:
            return
        self._checked = time.monotonic()
        start = self.capacity
        live = replace(
            start, nodes=nodes_from(ray.nodes(), start.use_gpu, start.cpus_per_worker, start.gpus_per_worker)
        )
        if live.nodes == start.nodes:
            return
        gone = [n.address for n in start.nodes if n.id not in {m.id for m in live.nodes}]
        for trial in pending:
            try:
                size = self.spec.world_size(trial.config)
                shape(size, start)
            except (ValueError, NeverPlaced):
                continue  # it fails in its own process, with its own sentence
            try:
                shape(size, live)
            except NeverPlaced as e:
                lost = f"the cluster lost node(s) {', '.join(gone)}" if gone else "the cluster changed"
                self.never_placed[trial.trial_id] = f"{lost} and can no longer place this trial: {e}"
                tune_controller.stop_trial(trial)


class StopRecorder:
    """Mixed into a Tune scheduler: remembers the trials it stopped, so ``show`` can tell
    a trial stopped early from one that ran to its end (Tune marks both TERMINATED)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.stopped: set[str] = set()
        self.max_t = kwargs["max_t"]

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        if self._metric not in result:  # a W&B-style trial that never logged it: never stopped for a value it lacks
            return TrialScheduler.CONTINUE
        decision = super().on_trial_result(tune_controller, trial, result)
        # At max_t the scheduler says STOP too: that trial ran its course.
        if decision == TrialScheduler.STOP and result.get("training_iteration", 0) < self.max_t:
            self.stopped.add(trial.trial_id)
        return decision


class RecordingASHA(PlacementGuard, StopRecorder, ASHAScheduler):
    pass


class RecordingHyperBand(PlacementGuard, StopRecorder, HyperBandScheduler):
    pass


class GuardedFIFO(PlacementGuard, FIFOScheduler):
    """No early stopping of its own; a sweep searched by W&B's optimizer (engine optuna or ax) is
    stopped where that optimizer prunes (a user's study with a pruner, an Ax client with an
    early-stopping strategy), as ``wandb sweep-scheduler`` asks it at each poll."""

    engine: Any = None  # search/wandb_engine.EngineSearch, this driver's (never pickled: watch_engine again)

    def watch(self, spec: SweepSpec, capacity: Capacity, admission: Any = None) -> None:
        super().watch(spec, capacity, admission)
        self.stopped: set[str] = getattr(self, "stopped", set())  # the trials the engine pruned (show: stopped)

    def watch_engine(self, engine: Any) -> None:
        self.engine = engine

    def __getstate__(self) -> dict[str, Any]:
        return super().__getstate__() | {"engine": None}

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        if self.engine is not None and self.engine.prune(trial.trial_id, result):
            self.stopped.add(trial.trial_id)
            return TrialScheduler.STOP
        return super().on_trial_result(tune_controller, trial, result)


class GuardedWandbHyperband(PlacementGuard, WandbHyperband):
    pass


def asha(s: Scheduler) -> RecordingASHA:
    return RecordingASHA(
        time_attr="training_iteration", grace_period=s.grace_period, max_t=s.max_t, reduction_factor=s.reduction_factor
    )


def hyperband(s: Scheduler) -> RecordingHyperBand:
    return RecordingHyperBand(time_attr="training_iteration", max_t=s.max_t, reduction_factor=s.reduction_factor)


def wandb_hyperband(s: Scheduler) -> GuardedWandbHyperband:
    return GuardedWandbHyperband(bands=s.bands, eta=s.reduction_factor, strict=s.strict)


BUILDERS = {"asha": asha, "hyperband": hyperband, "wandb_hyperband": wandb_hyperband}  # spec.model.SCHEDULER_KINDS


def build_scheduler(spec: SweepSpec) -> Any:
    """One report is one iteration; FIFO when the spec asks for no early stopping."""
    if spec.scheduler is None:
        return GuardedFIFO()
    return BUILDERS[spec.scheduler.type](spec.scheduler)
