"""``method: custom`` with ``scheduler: {engine: optuna}``: W&B's new sweep format, run through
Ray Tune's ``OptunaSearch`` (Ray's searcher interface; every rank of a trial gets its config).

* The space: the user's ``search_space(trial)`` from ``source`` (define-by-run: its
  ``trial.suggest_*`` calls are the space, a branch can choose which parameters exist, and
  ``num_gpus`` may be among them), else the file's ``parameters:``. The function may return
  nothing (the suggested values are the config), a dict (merged in, as Ray's define-by-run
  allows), or an object with a ``config`` (W&B's ``RunSuggestion``).
* The optimizer: the user's ``optimizer()`` returns an Optuna study (its sampler searches; its
  directions must be the sweep's goals) or a sampler; else Optuna's TPE, seeded.
* Objectives: one ``metric``, or several (``metrics:``): a multi-objective study, each trial's
  objectives from its last report as W&B reads a run's summary; intermediate values are not
  reported (Optuna's pruners take one objective), and a trial that ends without every objective
  is failed for the optimizer, as W&B's scheduler fails it. ``cost_hours`` is measured here:
  the trial's workers x the seconds Tune counted it running.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Any

from ray.tune.search.optuna import OptunaSearch

from raysweep.errors import UserError
from raysweep.runs.pareto import objective_values
from raysweep.search.searchers import DistinctOptunaSearch
from raysweep.spec import SweepSpec
from raysweep.spec.model import SIZE

SIZE_DRAWS = 64  # draws of a define-by-run space that tell the driver its trial sizes


def load_source(path: str) -> Any:
    """The user's ``scheduler.source`` file as a module (loaded by path, once per process)."""
    name = "raysweep_engine_" + hashlib.sha1(path.encode()).hexdigest()[:10]
    import sys

    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"scheduler.source: {path} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the user's file
        del sys.modules[name]
        raise UserError(f"scheduler.source: {path} raised on import: {type(e).__name__}: {e}") from e
    return module


def user_function(source: str, name: str, key: str) -> Any:
    function = getattr(load_source(source), name, None)
    if not callable(function):
        raise UserError(f"scheduler.{key}: {Path(source).name} defines no function {name!r}")
    return function


class SpaceFunction:
    """The user's ``search_space(trial)``, as Ray's define-by-run ``space``: returns None or the
    dict of values to merge in. Picklable by its file and name (Tune saves the searcher)."""

    def __init__(self, source: str, name: str):
        self.source, self.name = source, name

    def __call__(self, trial: Any) -> dict[str, Any] | None:
        returned = user_function(self.source, self.name, "search_space")(trial)
        if returned is None or isinstance(returned, dict):
            return returned
        config = getattr(returned, "config", None)
        if isinstance(config, dict):
            return dict(config)
        raise UserError(
            f"scheduler.search_space: {self.name} returned a {type(returned).__name__}; it may return nothing (the "
            "suggested values are the config), a dict, or an object with a config dict (W&B's RunSuggestion)"
        )


def sampler_of(spec: SweepSpec) -> Any:
    """The engine's sampler: the user's ``optimizer()`` (a study's, or a sampler), else TPE."""
    import optuna

    engine = spec.engine
    if engine is None or not engine.optimizer:
        return optuna.samplers.TPESampler(seed=spec.seed)
    made = user_function(engine.source, engine.optimizer, "optimizer")()
    if isinstance(made, optuna.Study):
        wanted = [
            optuna.study.StudyDirection.MAXIMIZE if g.goal == "maximize" else optuna.study.StudyDirection.MINIMIZE
            for g in spec.goals
        ]
        if list(made.directions) != wanted:
            raise UserError(
                f"scheduler.optimizer: {engine.optimizer} returned a study of directions "
                f"{[d.name.lower() for d in made.directions]}, and the sweep's goals are "
                f"{[g.goal for g in spec.goals]} ({', '.join(g.name for g in spec.goals)}): make them agree"
            )
        return made.sampler
    if isinstance(made, optuna.samplers.BaseSampler):
        return made
    raise UserError(
        f"scheduler.optimizer: {engine.optimizer} returned a {type(made).__name__}; engine optuna takes an "
        "optuna.Study or an optuna sampler (optuna.samplers.*)"
    )


def space_of(spec: SweepSpec) -> Any:
    """The sweep's space as an Optuna define-by-run function: the engine's, else its parameters'."""
    from raysweep.spec import optuna_space

    return SpaceFunction(spec.engine.source, spec.engine.search_space) if spec.defines_by_run else optuna_space(spec)


def sample_sizes(spec: SweepSpec) -> tuple[int, ...]:
    """The trial sizes of ``SIZE_DRAWS`` random draws of a define-by-run space (its ``num_gpus``,
    suggested or returned; 1 where it gives none): what admission, budgets and the plan see."""
    import optuna

    space = SpaceFunction(spec.engine.source, spec.engine.search_space)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=spec.seed))
    sizes = []
    for _ in range(SIZE_DRAWS):
        trial = study.ask()
        returned = space(trial) or {}  # first: its suggest_* calls make the trial's params
        config = {**trial.params, **returned}
        try:
            sizes.append(spec.world_size({k: v for k, v in config.items() if k == SIZE} or {SIZE: spec.num_gpus or 1}))
        except ValueError as e:
            raise UserError(f"scheduler.search_space: {spec.engine.search_space} gave {e}") from None
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    return tuple(sizes)


def trial_objectives(spec: SweepSpec, result: dict) -> tuple[float, ...] | None:
    """A finished trial's objectives from its last report (``cost_hours`` measured from its size),
    or None when one is missing: what either engine tells its optimizer."""
    try:
        size = spec.world_size(result.get("config", {}))
    except ValueError:
        size = 1
    return objective_values(result, size, spec.goals)


class EngineOptunaSearch(DistinctOptunaSearch):
    """Ray's ``OptunaSearch`` (no repeats, as bayes runs it), for several objectives too: a trial
    without every objective is failed for the optimizer; ``cost_hours`` is measured."""

    def __init__(self, *args: Any, spec: SweepSpec, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.spec, self.goals = spec, spec.goals

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        if len(self.goals) == 1 and self.goals[0].name in result:
            super().on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if result is not None:
            values = trial_objectives(self.spec, result)
            if values is None:
                error = True
            else:
                result = {**result, **{g.name: v for g, v in zip(self.goals, values, strict=True)}}
        # Ray's own: told COMPLETE with the values, or FAIL (WandbOptunaSearch's check takes one metric)
        OptunaSearch.on_trial_complete(self, trial_id, result, error or result is None)


def build(
    spec: SweepSpec, budget: int, run_dir: Path, max_concurrent: int | None, told: list[Any] | None = None
) -> tuple[Any, dict]:
    """The engine's search on the sweep's Optuna journal (``resume`` goes on from its history)."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    from ray.tune.search import ConcurrencyLimiter

    from raysweep.runs.files import OPTUNA_JOURNAL

    if spec.engine.kind == "ax":
        from raysweep.search import ax_engine

        return ax_engine.build(spec, max_concurrent, told), {}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    several = len(spec.goals) > 1
    search = EngineOptunaSearch(
        space=space_of(spec),
        metric=[g.name for g in spec.goals] if several else spec.goals[0].name,
        mode=[g.mode for g in spec.goals] if several else spec.goals[0].mode,
        sampler=sampler_of(spec),
        storage=JournalStorage(JournalFileBackend(str(run_dir / OPTUNA_JOURNAL))),
        study_name=spec.name or "raysweep",
        seed=spec.seed,
        spec=spec,
        told=told,
    )
    return (ConcurrencyLimiter(search, max_concurrent=max_concurrent) if max_concurrent else search), {}
