"""Searchers and schedulers, chosen from the spec by name (Ray Tune's and Optuna's own objects)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, HyperBandScheduler, TrialScheduler
from ray.tune.search import ConcurrencyLimiter
from ray.tune.search.basic_variant import BasicVariantGenerator

from raysweep.spec import SweepSpec, grid_points, optuna_space, tune_param_space

OPTUNA_JOURNAL = "optuna.journal"


# Tune ignores TuneConfig(max_concurrent_trials) for a BasicVariantGenerator it is handed (it
# only wraps Searchers in a ConcurrencyLimiter), so grid and random take the limit themselves.


def _grid(spec: SweepSpec, budget: int, run_dir: Path, max_concurrent: int | None) -> tuple[Any, dict]:
    # Our grid order, capped at the budget, fed through Tune's variant generator.
    points = grid_points(spec)[:budget]
    search = BasicVariantGenerator(points_to_evaluate=points, random_state=spec.seed, max_concurrent=max_concurrent or 0)
    return search, tune_param_space(spec)


def _random(spec: SweepSpec, budget: int, run_dir: Path, max_concurrent: int | None) -> tuple[Any, dict]:
    return BasicVariantGenerator(random_state=spec.seed, max_concurrent=max_concurrent or 0), tune_param_space(spec)


def _bayes(spec: SweepSpec, budget: int, run_dir: Path, max_concurrent: int | None) -> tuple[Any, dict]:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    from ray.tune.search.optuna import OptunaSearch

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(
        seed=spec.seed,
        n_startup_trials=spec.searcher.n_startup_trials,
        constant_liar=spec.searcher.constant_liar,  # parallel trials don't all pick the same point
    )
    storage = JournalStorage(JournalFileBackend(str(run_dir / OPTUNA_JOURNAL)))
    search = OptunaSearch(
        space=optuna_space(spec),
        metric=spec.metric.name,
        mode=spec.metric.mode,
        sampler=sampler,
        storage=storage,
        study_name=spec.name or "raysweep",
    )
    if max_concurrent:
        search = ConcurrencyLimiter(search, max_concurrent=max_concurrent)
    return search, {}


SEARCHERS = {"grid": _grid, "random": _random, "bayes": _bayes}


def build_search(spec: SweepSpec, budget: int, run_dir: Path, max_concurrent: int | None = None) -> tuple[Any, dict]:
    """The Tune search algorithm, limited to ``max_concurrent`` trials at once, and its param_space."""
    return SEARCHERS[spec.method](spec, budget, run_dir, max_concurrent)


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


SCHEDULERS = {
    "asha": lambda s: RecordingASHA(
        time_attr="training_iteration", grace_period=s.grace_period, max_t=s.max_t, reduction_factor=s.reduction_factor
    ),
    "hyperband": lambda s: RecordingHyperBand(
        time_attr="training_iteration", max_t=s.max_t, reduction_factor=s.reduction_factor
    ),
}


def build_scheduler(spec: SweepSpec) -> Any:
    """One report is one iteration; FIFO when the spec asks for no early stopping."""
    if spec.scheduler is None:
        return FIFOScheduler()
    return SCHEDULERS[spec.scheduler.type](spec.scheduler)
