"""The Tune experiment of a sweep, started: Ray and its capacity, the admission checks, the plan
and the banner, the warm workers' pool, the monitor and stoppers, and the Tuner (new, or restored
from the run dir) with the sweep's scheduler and search (``start``)."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ray import tune
from ray.tune.search import Searcher, SearchGenerator

from raysweep import ray_settings, wandb_sweep
from raysweep.driver import interrupt
from raysweep.driver.admission import Admission, Board, mixes_sizes
from raysweep.driver.admitted_search import AdmittedSearch
from raysweep.driver.budget import BudgetStopper, Ledger
from raysweep.driver.checkpoints import StoredCheckpoints
from raysweep.driver.cluster import start_or_connect
from raysweep.driver.estimates import Estimates
from raysweep.driver.monitor import SweepMonitor, journal_rows
from raysweep.driver.result_log import ResultLog
from raysweep.driver.trainable import make_trainable, runners
from raysweep.driver.trial_ends import ReleaseHoldings
from raysweep.driver.trial_output import TrialOutput, show_trial_output
from raysweep.driver.wandb_logging import WandbRuns
from raysweep.env import BACKFILL, START_AHEAD, warm_imports
from raysweep.errors import UserError
from raysweep.placement import GIB, Capacity, concurrency_limit, never_placed, warm_workers
from raysweep.private_api import restored_config
from raysweep.runs.rows import read_rows
from raysweep.runs.run_settings import RunSettings, write_settings
from raysweep.search.plan import Plan, cheapest_trial_hours, plan
from raysweep.search.schedulers import build_scheduler
from raysweep.search.searchers import build_search, innermost
from raysweep.search.stoppers import InitialFailureStopper, SweepStoppers, TargetStopper
from raysweep.search.wandb_engine import EngineSearch, ended_rows
from raysweep.search.warm_start import start_from
from raysweep.spec import SweepSpec
from raysweep.spec.engine import searches
from raysweep.trial.entries import kind_of
from raysweep.trial.holdings import start_holdings
from raysweep.trial.job import Sweep
from raysweep.trial.pool import start_pool
from raysweep.words import Runner

log = logging.getLogger("raysweep")


def _check_feasible(sizes: set[int], capacity: Capacity) -> None:
    """Refuse a sweep none of whose trials can ever be placed; name the sizes that never will."""
    never = never_placed(sizes, capacity)
    if never and len(never) == len(sizes):
        raise UserError(f"{never[min(never)]} (every trial of this sweep asks at least num_gpus={min(sizes)})")
    if never:
        print(f"note: trials with num_gpus in {sorted(never)} will fail at once: {never[min(never)]}")
    if capacity.grows:
        late = sorted(s for s in sizes if s > capacity.largest_node)
        if late:
            print(
                f"note: trials with num_gpus in {late} do not fit the cluster as it is now ({capacity.describe()}), "
                f"but {capacity.grows}: they wait for nodes"
            )


def _reuse_actors(spec: SweepSpec, sizes: set[int]) -> bool:
    """Run trials one after another in the same Tune actor (a trial on warm workers then starts
    no new Tune actor: docs/benchmarks.md), where a stopped trial ends at its report.

    A stopped ``TorchTrainer.fit()`` (``ddp_workers: torchtrainer``) and a script keep running
    in the old trial's thread until their process ends, so those sweeps get a fresh actor per trial.
    """
    if not spec.reuse_actors or kind_of(spec).runs_own_process:
        return False
    return spec.ddp_workers == Runner.WARM or sizes == {1}


def _callbacks(
    spec: SweepSpec, settings: RunSettings, resuming: bool, on_wandb: wandb_sweep.WandbSweep | None
) -> list[Any]:
    # a script (a W&B-style function) logs its own W&B run
    if settings.wandb == "disabled" or kind_of(spec).calls_wandb_init:
        return []
    group = spec.wandb.group or settings.name
    sweep_id = on_wandb.id if on_wandb else None
    return [
        WandbRuns(
            spec.wandb.project_name,
            entity=spec.wandb.entity,
            group=group,
            mode=settings.wandb,
            resuming=resuming,
            sweep_id=sweep_id,
            goals=spec.objectives,
            world_size=spec.world_size,
        )
    ]


@dataclass(frozen=True)
class Experiment:
    """A started sweep: its Tuner, the monitor of its trials, what may stop it, its trials' output
    on the console, its settings with the plan, and its warm workers' pool (None without one)."""

    tuner: tune.Tuner
    monitor: SweepMonitor
    stoppers: list[Any]
    output: TrialOutput
    settings: RunSettings
    pool: Any = None
    search: Any = None  # the searcher (its ``end``: why it proposed fewer trials than the budget)


def start(
    spec: SweepSpec,
    settings: RunSettings,
    run_dir: Path,
    *,
    restore: bool,
    signals: interrupt.Signals,
    function: Callable | None,
    on_wandb: wandb_sweep.WandbSweep | None,
    tried: list[dict[str, Any]] | None = None,
) -> Experiment:
    """Ray, the worker pool and the Tuner (restored from the run dir with ``restore``); ``function``:
    raysweep.run's, bound into every trial; ``on_wandb``: the W&B sweep every trial's run joins."""
    capacity, dashboard = start_or_connect(
        settings.address,
        spec.resources.use_gpu,
        spec.resources.cpus_per_worker,
        gpus=settings.gpus,
        dashboard_host=settings.dashboard_host,
        gpus_per_worker=spec.resources.gpus_per_worker,
        memory_per_worker=spec.resources.memory_per_worker_gb * GIB,
    )
    output = show_trial_output(settings.quiet)
    interrupt.ray_is_up(signals)
    settings, limit, planned = _admit(spec, settings, capacity, restore)
    write_settings(run_dir, settings)
    _print_banner(spec, settings, run_dir, capacity, dashboard=dashboard, limit=limit, on_wandb=on_wandb)
    told = ended_rows(read_rows(run_dir)) if tried is not None and searches(spec.engine) else None  # a joiner
    if settings.warm_start and not restore:
        warm, priors, tried = start_from(spec, settings.warm_start, tried)
        told = (told or []) + (priors or []) if priors is not None or told is not None else None
        if not settings.quiet:
            print(warm.sentence())
    if not settings.quiet and (settings.budget_gpu_hours or spec.budget.epoch_seconds):
        print("\n".join(planned.lines(capacity.total)))

    wandb_sweep_id = on_wandb.id if on_wandb else None
    pool = _start_pool(spec, capacity, trials_at_once(settings, limit))
    trial_runners = runners(spec, pooled=pool is not None)
    holdings = pool if pool is not None else start_holdings()  # the pool is the sweep's record too
    sweep = Sweep(
        spec=spec,
        capacity=capacity,
        run_dir=str(run_dir),
        name=settings.name,
        workdir=settings.workdir,
        wandb_mode=settings.wandb,
        function=function,
        wandb_sweep_id=wandb_sweep_id,
        wandb_dir=settings.wandb_dir,
        runners=trial_runners,
        holdings=holdings,
    )
    trainable = make_trainable(sweep, pool)
    board = Board()
    rows = journal_rows(run_dir)
    estimates = Estimates(spec, rows, planned.rungs)
    ledger = Ledger(estimates, settings.budget_gpu_hours, capacity.use_gpu) if settings.budget_gpu_hours else None
    admission = _admission(
        spec, capacity, estimates, holdings=holdings, board=board, trial_runners=trial_runners, ledger=ledger
    )
    ray_settings.pending_trials(_pending_trials(spec, capacity, ledger, admission))
    restored = _restored_tuner(run_dir, trainable, settings) if restore else None
    scheduler = restored_config(restored)[1].scheduler if restored else build_scheduler(spec)
    if hasattr(scheduler, "watch"):  # a run dir from before the guard has a scheduler without it
        scheduler.watch(spec, capacity, admission)
    monitor = SweepMonitor(
        spec,
        run_dir,
        settings.budget,
        quiet=settings.quiet,
        board=board,
        rows=rows,
        ledger=ledger,
        stopped_by_scheduler=getattr(scheduler, "stopped", set()),
        never_placed=getattr(scheduler, "never_placed", {}),
    )
    stoppers = _stoppers(spec, monitor, ledger)
    callbacks = [interrupt.TuneListens(signals), monitor, ResultLog()] + _callbacks(spec, settings, restore, on_wandb)
    if (
        restore
    ):  # each trial goes on from the newest checkpoint on storage (a killed driver's state may name a gone one)
        callbacks.insert(0, StoredCheckpoints())
    callbacks.append(ReleaseHoldings(holdings))
    admits = {"ledger": ledger, "admission": admission}
    if restored is not None:
        tuner = _attach(restored, callbacks=callbacks, stoppers=stoppers, **admits)
    else:
        segment = settings.segment_budget or settings.budget
        tuner = _new_tuner(
            spec,
            segment,
            run_dir,
            scheduler=scheduler,
            limit=limit,
            trainable=trainable,
            callbacks=callbacks,
            stoppers=stoppers,
            tried=tried,
            told=told,
            **admits,
        )
    search = innermost(restored_config(tuner)[1].search_alg)
    if isinstance(search, EngineSearch) and hasattr(scheduler, "watch_engine"):  # its pruner stops trials via Tune
        scheduler.watch_engine(search)
    return Experiment(
        tuner=tuner, monitor=monitor, stoppers=stoppers, output=output, settings=settings, pool=pool, search=search
    )


def _admission(
    spec: SweepSpec,
    capacity: Capacity,
    estimates: Estimates,
    *,
    holdings: Any,
    board: Board,
    trial_runners: dict[int, Runner],
    ledger: Ledger | None = None,
) -> Admission | None:
    """Reservations and backfill (``admission.py``) for a sweep of mixed sizes on a cluster that
    does not grow; None otherwise (one size: nothing to reserve for; an autoscaler: no fixed slots).
    Trials on warm workers place their own slots and the reserved one starts ahead of them
    (``trial/slots.py``), unless ``RAYSWEEP_START_AHEAD=0``."""
    if not mixes_sizes(spec) or capacity.grows or not capacity.managed_slots or os.environ.get(BACKFILL) == "0":
        return None
    if spec.scheduler is not None and spec.scheduler.type == "hyperband":  # Ray's HyperBand pauses trials itself
        return None
    warm = {size for size, runner in trial_runners.items() if runner == Runner.WARM}
    ahead = frozenset(warm if os.environ.get(START_AHEAD) != "0" else ())
    return Admission(
        spec,
        capacity,
        estimates,
        holdings=holdings,
        board=board,
        queue=max(4, capacity.total + 1),
        ahead=ahead,
        ledger=ledger,
    )


def _pending_trials(
    spec: SweepSpec, capacity: Capacity, ledger: Ledger | None, admission: Admission | None
) -> int | None:
    """How many trials Tune keeps pending (``ray_settings.pending_trials``; None: Tune's own rule).

    * A budget admits trials one at a time, as they fit: 1.
    * The admission holds every waiting trial but those it chose (PAUSED, not pending): its queue.
      A limit of 1 kept Tune from making the next trial while the chosen one started, so starts
      went one after another (docs/benchmarks.md, issue 50).
    * Without one, a trial that spans nodes needs them empty at once: with many trials pending
      (Tune's default for random search) later 1-node trials kept taking the slots and every
      2-node trial ran last (docs/benchmarks.md). One pending trial at a time, as grid and bayes
      run, reserves the nodes for it in turn: 1.
    """
    if ledger is not None:
        return 1
    if admission is not None:
        return admission.queue
    today = replace(capacity, grows=None)  # the nodes there are now
    spans = any(size > capacity.largest_node and size not in never_placed({size}, today) for size in spec.world_sizes)
    return 1 if spans else None


def _admit(
    spec: SweepSpec, settings: RunSettings, capacity: Capacity, restore: bool
) -> tuple[RunSettings, int | None, Plan]:
    """Refuse what can never run and plan the sweep; returns the settings with the plan, how many
    trials may run at once, and the plan."""
    _check_feasible(spec.world_sizes, capacity)
    limit = concurrency_limit(capacity, min(max(spec.world_sizes), capacity.largest_node), settings.max_concurrent)
    planned = plan(spec, settings.segment_budget or settings.budget, spec.budget.epoch_seconds, capacity.use_gpu)
    _check_budget_fits(spec, settings, restore)
    return replace(settings, plan=planned), limit, planned


def _stoppers(spec: SweepSpec, monitor: SweepMonitor, ledger: Ledger | None) -> list[Any]:
    """What ends the whole sweep: its first trials all failing, a trial reaching the target, the budget."""
    stoppers: list[Any] = [
        InitialFailureStopper(
            functools.partial(monitor.initial_failures, spec.max_initial_failures), spec.max_initial_failures
        )
    ]
    if spec.objectives.target is not None:
        stoppers.append(TargetStopper(spec.objectives.target))
    if ledger is not None:
        stoppers.append(BudgetStopper(ledger))
    return stoppers


def _print_banner(
    spec: SweepSpec,
    settings: RunSettings,
    run_dir: Path,
    capacity: Capacity,
    *,
    dashboard: str | None,
    limit: int | None,
    on_wandb: wandb_sweep.WandbSweep | None,
) -> None:
    if not settings.quiet:
        url = dashboard if not settings.address else None
        seed = f"seed {spec.seed}" + (
            f", drawn for it (--seed {spec.seed} repeats its draws)" if settings.seed_drawn else ""
        )
        print(f"sweep {settings.name}: {settings.budget} trials, {spec.method} search, {seed}, run dir {run_dir}")
        print(f"cluster: {capacity.describe()}" + (f"; Ray dashboard {url}" if url else ""))
    if on_wandb:
        print(f"W&B sweep: {on_wandb.url}")
    if not settings.quiet:
        if not capacity.use_gpu:
            print("no GPUs: each trial's num_gpus becomes that many CPU workers, DDP over gloo")
        if spec.defines_by_run:
            sizes = ", ".join(map(str, sorted(spec.world_sizes)))
            print(
                f"trial sizes {sizes}: from {len(spec.sampled_sizes)} draws of {spec.engine.search_space}() "
                "(the space is a function: admission, budgets and the plan can only sample its sizes)"
            )
        if not capacity.managed_slots:
            print(f"note: the cluster's nodes don't advertise raysweep_slot; running at most {limit} trials at once")
    if max(spec.world_sizes) > 1 and spec.ddp_workers == Runner.TORCHTRAINER and not dashboard:
        print(
            "warning: this Ray cluster runs no dashboard. Ray Train frees the workers of a 2+-worker trial "
            "that the scheduler stops through the dashboard's State API; without it their CPUs/GPUs stay "
            "reserved. Start the cluster with its dashboard (the default of `ray start`)."
        )


def _start_pool(spec: SweepSpec, capacity: Capacity, trials: int) -> Any:
    """The warm workers' pool, started now so that its workers import torch while Tune starts
    (as many as ``trials`` trials at once can use). None for TorchTrainer runs, and for a program:
    sweep of 1-worker trials (each runs its script from the Tune trial process)."""
    if spec.ddp_workers == Runner.WARM and (max(spec.world_sizes) > 1 or not kind_of(spec).runs_own_process):
        return start_pool(warm_workers(capacity, spec.world_sizes, trials), warm_imports())
    return None


def trials_at_once(settings: RunSettings, limit: int | None) -> int:
    """The most trials this driver runs at once: its trials, and the concurrency limit."""
    return min(x for x in (settings.segment_budget or settings.budget, limit) if x)


def _restored_tuner(run_dir: Path, trainable: Any, settings: RunSettings) -> tune.Tuner:
    """Tune's Tuner from the run dir, with its original RunConfig, search and scheduler."""
    return tune.Tuner.restore(
        str(run_dir), trainable=trainable, resume_unfinished=True, resume_errored=settings.retry_failed
    )


def _attach(
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


def _new_tuner(
    spec: SweepSpec,
    budget: int,
    run_dir: Path,
    *,
    scheduler: Any,
    limit: int | None,
    trainable: Any,
    callbacks: list[Any],
    stoppers: list[Any],
    tried: list[dict[str, Any]] | None = None,
    ledger: Ledger | None = None,
    admission: Admission | None = None,
    told: list[Any] | None = None,
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
            reuse_actors=_reuse_actors(spec, spec.world_sizes),
        ),
        run_config=tune.RunConfig(
            name=run_dir.name,
            storage_path=str(run_dir.parent),
            callbacks=callbacks,
            stop=SweepStoppers(*stoppers),
            verbose=0,
            failure_config=tune.FailureConfig(max_failures=spec.max_failures),
            # Tune deletes a trial's third-newest checkpoint as it saves a new one, and saves its own
            # state every 2 of them (docs/guarantees.md: the moment between the two)
            checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
        ),
    )


def admitted(search: Any, ledger: Ledger | None, admission: Admission | None) -> AdmittedSearch:
    """The search algorithm, its trials made while the queue has room and admitted as they fit the budget."""
    return AdmittedSearch(SearchGenerator(search) if isinstance(search, Searcher) else search, ledger, admission)


def _check_budget_fits(spec: SweepSpec, settings: RunSettings, restore: bool) -> None:
    """A budget below the cheapest trial's cost (as the spec's epoch_seconds estimate says) is the
    user's mistake, said before any trial runs."""
    hours, epoch_s = settings.budget_gpu_hours, spec.budget.epoch_seconds
    cheapest = cheapest_trial_hours(spec, epoch_s) if hours and epoch_s and not restore else None
    if cheapest is not None and cheapest > hours:
        raise UserError(
            f"budget {hours:g} GPU-hours is below one trial's cost: the cheapest trial (num_gpus="
            f"{min(spec.world_sizes)}, to its first rung at {epoch_s:g} s a report) costs {cheapest:.4g}"
        )
