"""The Tune ``Tuner`` of a sweep: new, or restored from its run dir with this driver's callbacks,
stoppers, ledger and admission attached (``Tuner.restore`` keeps the first driver's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ray import tune
from ray.tune.search import Searcher, SearchGenerator

from raysweep.driver.admission import Admission
from raysweep.driver.admitted_search import AdmittedSearch
from raysweep.driver.budget import Ledger
from raysweep.driver.mirror import experiment_path
from raysweep.driver.trainable import kinds
from raysweep.private_api import restored_config
from raysweep.runs.run_settings import RunSettings
from raysweep.search.searchers import build_search
from raysweep.search.stoppers import SweepStoppers
from raysweep.spec import SweepSpec
from raysweep.trial.entries import kind_of
from raysweep.words import Runner

SYNC_PERIOD_S = 5.0


def reuse_actors(spec: SweepSpec, trial_runners: dict[int, Runner]) -> bool:
    """Run trials one after another in the same Tune actor (a trial on warm workers then starts
    no new Tune actor: docs/benchmarks.md), where every runner's stopped trial ends at its report.

    A stopped ``TorchTrainer.fit()`` and a script keep running in the old trial's thread until their
    process ends, so those sweeps get a fresh actor per trial.
    """
    if not spec.reuse_actors or kind_of(spec).runs_own_process:
        return False
    return all(kind.reuses_tune_actor for kind in kinds(trial_runners))


def restored_tuner(run_dir: Path, trainable: Any, settings: RunSettings) -> tune.Tuner:
    """Tune's Tuner from the run dir, with its original RunConfig, search and scheduler."""
    return tune.Tuner.restore(
        experiment_path(run_dir, settings),
        trainable=trainable,
        resume_unfinished=True,
        resume_errored=settings.retry_failed,
    )


def attach(
    tuner: tune.Tuner,
    *,
    callbacks: list[Any],
    stoppers: list[Any],
    ledger: Ledger | None = None,
    admission: Admission | None = None,
) -> tune.Tuner:
    """A restored Tuner with this driver's callbacks, stoppers, ledger and admission (``Tuner.restore``
    keeps the original RunConfig: an earlier driver's, which may have had neither)."""
    run_config, tune_config = restored_config(tuner)
    run_config.callbacks = callbacks
    run_config.stop = SweepStoppers(*stoppers)  # this driver's monitor and budget
    if ledger is not None or admission is not None:
        search = tune_config.search_alg
        if isinstance(search, AdmittedSearch):
            search.ledger, search.admission = ledger, admission
        else:
            tune_config.search_alg = admitted(search, ledger, admission)
    return tuner


def new_tuner(
    spec: SweepSpec,
    budget: int,
    run_dir: Path,
    *,
    scheduler: Any,
    limit: int | None,
    trainable: Any,
    callbacks: list[Any],
    stoppers: list[Any],
    trial_runners: dict[int, Runner],
    tried: list[dict[str, Any]] | None = None,
    ledger: Ledger | None = None,
    admission: Admission | None = None,
    told: list[Any] | None = None,
    storage_path: str | None = None,
) -> tune.Tuner:
    search, param_space = build_search(spec, budget, run_dir, limit, tried, told)
    if ledger is not None or admission is not None:
        search = admitted(search, ledger, admission)
    return tune.Tuner(
        trainable,
        param_space=param_space,
        tune_config=tune.TuneConfig(
            # Tune's own metric (its ResultGrid, a scheduler without one of its own): the one metric, if any
            metric=spec.objectives.single.name if spec.objectives.single else None,
            mode=spec.objectives.single.mode if spec.objectives.single else None,
            search_alg=search,
            scheduler=scheduler,
            num_samples=budget,
            reuse_actors=reuse_actors(spec, trial_runners),
        ),
        run_config=tune.RunConfig(
            name=run_dir.name,
            storage_path=storage_path or str(run_dir.parent),
            callbacks=callbacks,
            stop=SweepStoppers(*stoppers),
            verbose=0,
            failure_config=tune.FailureConfig(max_failures=spec.max_failures),
            # Tune deletes a trial's third-newest checkpoint as it saves a new one, and saves its own
            # state every 2 of them (docs/guarantees.md: the moment between the two)
            checkpoint_config=tune.CheckpointConfig(num_to_keep=spec.checkpoints.keep_per_trial),
            # Tune's results and state reach the storage this often (its default, 300 s, would leave a
            # killed driver's URI storage minutes behind its checkpoints)
            sync_config=tune.SyncConfig(sync_period=SYNC_PERIOD_S),
        ),
    )


def admitted(search: Any, ledger: Ledger | None, admission: Admission | None) -> AdmittedSearch:
    """The search algorithm, its trials made while the queue has room and admitted as they fit the budget."""
    return AdmittedSearch(SearchGenerator(search) if isinstance(search, Searcher) else search, ledger, admission)
