"""Searchers, chosen from the spec's ``method`` (Ray Tune's and Optuna's own objects)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from optuna.samplers import RandomSampler
from optuna.trial import TrialState
from ray.tune.search import ConcurrencyLimiter, Searcher
from ray.tune.search.basic_variant import BasicVariantGenerator
from ray.tune.search.optuna import OptunaSearch

from raysweep.private_api import optuna_study, optuna_trials
from raysweep.runs.files import OPTUNA_JOURNAL
from raysweep.search import warm_start
from raysweep.spec import SweepSpec, optuna_space, tune_param_space
from raysweep.spec.space import grid_point
from raysweep.values import plain

TPE_REDRAWS = 3  # TPE's repeats in a row before a random configuration is drawn instead
MAX_REDRAWS = 20  # repeats in a row before one runs after all (the space is all but used up)


# Tune ignores TuneConfig(max_concurrent_trials) for a BasicVariantGenerator it is handed (it
# only wraps Searchers in a ConcurrencyLimiter), so every searcher here takes the limit itself.


class GridSearch(Searcher):
    """W&B's grid, point by point: the n-th trial gets grid point n (``spec.space.grid_point``),
    so ``run_cap`` and ``--count`` run the same first points as W&B, and no grid is ever built."""

    def __init__(self, spec: SweepSpec, budget: int, tried: list[dict] | None = None):
        super().__init__()
        self.spec, self.budget, self.next = spec, budget, 0
        self.given = 0
        self.tried = {_config_key(c) for c in tried or ()}  # an earlier driver's points (a joining agent)
        self.end: str | None = None  # why it gave fewer trials than its budget (the sweep is finished)

    def suggest(self, trial_id: str) -> dict | None:
        while self.given < self.budget and self.next < (self.spec.grid_size or 0):
            point = grid_point(self.spec, self.next)
            self.next += 1
            if _config_key(point) not in self.tried:
                self.given += 1
                return point
        if self.given < self.budget:  # the points left were run before (a joined sweep, a warm start)
            self.end = "the grid has no point left that an earlier run did not try"
        return Searcher.FINISHED

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        pass

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump({"next": self.next, "given": self.given, "end": self.end}, f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            state = pickle.load(f)
        self.next, self.given = state["next"], state.get("given", state["next"])  # a run dir from before joins
        self.end = state.get("end")


def _config_key(config: dict) -> str:
    return repr(sorted((k, plain(v)) for k, v in config.items()))


def _grid(
    spec: SweepSpec, budget: int, run_dir: Path, max_concurrent: int | None, tried: list[dict] | None = None
) -> tuple[Any, dict]:
    search: Any = GridSearch(spec, budget, tried)
    return (ConcurrencyLimiter(search, max_concurrent=max_concurrent) if max_concurrent else search), {}


def _random(
    spec: SweepSpec, budget: int, run_dir: Path, max_concurrent: int | None, tried: list[dict] | None = None
) -> tuple[Any, dict]:
    return BasicVariantGenerator(random_state=spec.seed, max_concurrent=max_concurrent or 0), tune_param_space(spec)


class WandbOptunaSearch(OptunaSearch):
    """Ray's ``OptunaSearch``, except that a trial that ended without the metric is left out of the
    model (told as failed), as W&B's bayes leaves out a run without it; Ray's would tell it as pruned.
    ``told``: earlier sweeps' trials (warm start, ``warm_start.py``), added to the study before the
    first new trial is asked for."""

    def __init__(self, *args: Any, told: list[Any] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.told = list(told or ())

    def suggest(self, trial_id: str) -> dict | None:
        if self.told:
            warm_start.tell(optuna_study(self), self.told)
            self.told = []
        return super().suggest(trial_id)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        super().on_trial_complete(trial_id, result, error or result is None or self.metric not in result)


class DistinctOptunaSearch(WandbOptunaSearch):
    """Ray's ``OptunaSearch``, except that it does not run a configuration twice.

    TPE closes in on its best points and, in a space of a few hundred configurations, proposes
    them again and again (docs/benchmarks.md counts them in a TPE run of stages_bayes.yaml).
    Loops are seeded, so a repeat reports what the first run did. A proposal
    equal to a finished or running trial's is dropped (told to Optuna as failed, which TPE leaves
    out of its model) and Optuna asked again. A converged TPE proposes the same point however
    often it is asked, so after ``TPE_REDRAWS`` repeats the next draws are random, as Ax falls
    back to Sobol points; after ``MAX_REDRAWS`` (a space all but used up) the repeat runs.
    Optuna's maintainers suggest the check (optuna/optuna#2021); Ray's ``BayesOptSearch`` has
    it as ``skip_duplicate``.
    """

    def __init__(self, *args: Any, seed: int | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._explorer = RandomSampler(seed=seed)

    def suggest(self, trial_id: str) -> dict | None:
        config = super().suggest(trial_id)
        for attempt in range(MAX_REDRAWS):
            ot_trial = optuna_trials(self)[trial_id]
            live = {t.number for t in optuna_trials(self).values()}  # RUNNING trials of this driver's Tune trials
            twin = _twin(optuna_study(self), ot_trial, live)
            if twin is None:
                break
            ot_trial.set_user_attr("raysweep_repeat_of", twin)
            optuna_study(self).tell(optuna_trials(self).pop(trial_id), state=TrialState.FAIL)
            config = self._redraw(trial_id, explore=attempt + 1 >= TPE_REDRAWS)
        return config

    def _redraw(self, trial_id: str, explore: bool) -> dict | None:
        if not explore:
            return super().suggest(trial_id)
        study = optuna_study(self)
        model, study.sampler = study.sampler, self._explorer
        try:
            return super().suggest(trial_id)
        finally:
            study.sampler = model


def _twin(study: Any, ot_trial: Any, live: set[int]) -> int | None:
    """The number of a finished or running trial of ``study`` with ``ot_trial``'s parameters.

    A trial the journal says is RUNNING counts only if it is ``live``: one a killed driver left
    RUNNING will never finish, and must not keep its configuration from being run.
    """
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING)):
        if t.state == TrialState.RUNNING and t.number not in live:
            continue
        if t.number != ot_trial.number and t.params == ot_trial.params:
            return t.number
    return None


def _bayes(
    spec: SweepSpec,
    budget: int,
    run_dir: Path,
    max_concurrent: int | None,
    tried: list[dict] | None = None,
    told: list[Any] | None = None,
) -> tuple[Any, dict]:
    """Optuna on the sweep's journal: a joining driver's searcher goes on from its history."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if spec.searcher.sampler == "gp":  # W&B's bayes is a Gaussian process
        sampler = optuna.samplers.GPSampler(seed=spec.seed, n_startup_trials=spec.searcher.n_startup_trials)
    else:
        sampler = optuna.samplers.TPESampler(
            seed=spec.seed,
            n_startup_trials=spec.searcher.n_startup_trials,
            constant_liar=spec.searcher.constant_liar,  # parallel trials don't all pick the same point
        )
    storage = JournalStorage(JournalFileBackend(str(run_dir / OPTUNA_JOURNAL)))
    common = {
        "space": optuna_space(spec),
        "metric": spec.objectives.single.name,  # bayes needs W&B's metric: (spec/parse.py)
        "mode": spec.objectives.single.mode,
        "sampler": sampler,
        "storage": storage,
        "study_name": spec.name or "raysweep",
        "told": told,
    }
    search = (
        DistinctOptunaSearch(seed=spec.seed, **common) if spec.searcher.skip_duplicates else WandbOptunaSearch(**common)
    )
    if max_concurrent:
        search = ConcurrencyLimiter(search, max_concurrent=max_concurrent)
    return search, {}


def _custom(
    spec: SweepSpec,
    budget: int,
    run_dir: Path,
    max_concurrent: int | None,
    tried: list[dict] | None = None,
    told: list[Any] | None = None,
) -> tuple[Any, dict]:
    from raysweep.search.wandb_engine import EngineSearch  # W&B's own optimizer (imports wandb's scheduler)

    search: Any = EngineSearch(spec, seed=spec.seed, told=told)
    return (ConcurrencyLimiter(search, max_concurrent=max_concurrent) if max_concurrent else search), {}


SEARCHERS = {"grid": _grid, "random": _random, "bayes": _bayes, "custom": _custom}


def build_search(
    spec: SweepSpec,
    budget: int,
    run_dir: Path,
    max_concurrent: int | None = None,
    tried: list[dict] | None = None,
    told: list[Any] | None = None,
) -> tuple[Any, dict]:
    """The Tune search algorithm, limited to ``max_concurrent`` trials at once, and its param_space;
    ``tried``: the configurations an earlier driver of the sweep (or a warm start) ran (grid skips
    them); ``told``: earlier sweeps' trials a learning search starts from (``warm_start.fitting``)."""
    if spec.search_method.learns:
        return SEARCHERS[spec.method](spec, budget, run_dir, max_concurrent, tried, told)
    return SEARCHERS[spec.method](spec, budget, run_dir, max_concurrent, tried)


def innermost(search: Any) -> Any:
    """The searcher inside Tune's search algorithm, behind its wrappers (the admission's, Tune's
    ``SearchGenerator``, a ``ConcurrencyLimiter``): its ``end`` says why it proposed fewer trials
    than the sweep's budget (a grid used up, W&B's optimizer terminated), if it did."""
    for _ in range(8):
        inner = getattr(search, "searcher", None) or getattr(search, "inner", None)
        if inner is None:
            return search
        search = inner
    return search
