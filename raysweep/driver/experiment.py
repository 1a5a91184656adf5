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

from raysweep import ray_settings, wandb_sweep
from raysweep.driver import interrupt
from raysweep.driver.admission import Admission, Board, mixes_sizes
from raysweep.driver.budget import BudgetStopper, Ledger
from raysweep.driver.checkpoint_policy import PruneCheckpoints
from raysweep.driver.checkpoints import StoredCheckpoints
from raysweep.driver.cluster import start_or_connect
from raysweep.driver.estimates import Estimates
from raysweep.driver.mirror import remote_of, tune_storage
from raysweep.driver.monitor import SweepMonitor, journal_rows
from raysweep.driver.result_log import ResultLog
from raysweep.driver.storage_check import check_seen_by_every_node
from raysweep.driver.sweep_checks import admit, print_banner
from raysweep.driver.trainable import kinds, make_trainable, runners
from raysweep.driver.trial_ends import ReleaseHoldings
from raysweep.driver.trial_output import TrialOutput, show_trial_output
from raysweep.driver.tuner import attach, new_tuner, restored_tuner
from raysweep.driver.wandb_logging import WandbRuns
from raysweep.env import BACKFILL, START_AHEAD, warm_imports
from raysweep.growth import sizes_taken
from raysweep.placement import GIB, Capacity, never_placed, warm_workers
from raysweep.private_api import restored_config
from raysweep.runs.rows import read_rows
from raysweep.runs.run_settings import RunSettings, write_settings
from raysweep.search.schedulers import build_scheduler
from raysweep.search.searchers import innermost
from raysweep.search.stoppers import InitialFailureStopper, TargetStopper
from raysweep.search.wandb_engine import EngineSearch, ended_rows
from raysweep.search.warm_start import start_from
from raysweep.spec import SweepSpec
from raysweep.spec.engine import searches
from raysweep.trial.entries import kind_of
from raysweep.trial.holdings import start_holdings
from raysweep.trial.job import Sweep, runner_of
from raysweep.trial.pool import start_pool
from raysweep.trial.runners import RUNNERS
from raysweep.words import Runner

log = logging.getLogger("raysweep")


def _callbacks(
    spec: SweepSpec,
    settings: RunSettings,
    resuming: bool,
    on_wandb: wandb_sweep.WandbSweep | None,
    run_dir: Path,
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
            run_dir=run_dir,
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
    capacity, dashboard = _start_ray(spec, settings, run_dir)
    output = show_trial_output(settings.quiet)
    interrupt.ray_is_up(signals)
    settings, limit, planned = admit(spec, settings, capacity, restore)
    write_settings(run_dir, settings)
    trial_runners = runners(spec)  # decided once: the banner, the pool, the admission and the Tuner read it
    print_banner(spec, settings, run_dir, capacity, trial_runners, dashboard=dashboard, limit=limit, on_wandb=on_wandb)
    told, tried = _told(spec, settings, run_dir, restore, tried)
    if not settings.quiet and (settings.budget_gpu_hours or spec.budget.epoch_seconds):
        print("\n".join(planned.lines(capacity.total)))
    pool = _start_pool(spec, capacity, trials_at_once(settings, limit), trial_runners)
    holdings = pool if pool is not None else start_holdings()  # the pool is the sweep's record too
    sweep = _sweep(spec, settings, capacity, run_dir, function, on_wandb, trial_runners, holdings)
    trainable = make_trainable(sweep, pool)
    board, rows = Board(), journal_rows(run_dir)
    estimates = Estimates(spec, rows, planned.rungs)
    ledger = Ledger(estimates, settings.budget_gpu_hours, capacity.use_gpu) if settings.budget_gpu_hours else None
    admission = _admission(spec, capacity, estimates, trial_runners, holdings=holdings, board=board, ledger=ledger)
    ray_settings.pending_trials(_pending_trials(spec, capacity, ledger, admission))
    restored = restored_tuner(run_dir, trainable, settings) if restore else None  # its own scheduler and search
    scheduler = restored_config(restored)[1].scheduler if restored else build_scheduler(spec)
    if hasattr(scheduler, "watch"):  # a run dir from before the guard has a scheduler without it
        scheduler.watch(spec, capacity, admission)
    monitor = _monitor(spec, settings, run_dir, (board, rows, ledger), scheduler)
    stoppers = _stoppers(spec, monitor, ledger)
    callbacks = _all_callbacks(spec, settings, (signals, monitor, holdings), restore, on_wandb)
    ours = {"callbacks": callbacks, "stoppers": stoppers, "ledger": ledger, "admission": admission}  # this driver's
    if restored is not None:
        tuner = attach(restored, **ours)
    else:
        tuner = new_tuner(
            spec,
            settings.segment_budget or settings.budget,
            run_dir,
            scheduler=scheduler,
            limit=limit,
            trainable=trainable,
            trial_runners=trial_runners,
            tried=tried,
            told=told,
            storage_path=tune_storage(run_dir, settings),
            **ours,
        )
    search = innermost(restored_config(tuner)[1].search_alg)
    if isinstance(search, EngineSearch) and hasattr(scheduler, "watch_engine"):  # its pruner stops trials via Tune
        scheduler.watch_engine(search)
    return Experiment(tuner, monitor, stoppers, output, settings, pool=pool, search=search)


def _sweep(
    spec: SweepSpec,
    settings: RunSettings,
    capacity: Capacity,
    run_dir: Path,
    function: Callable | None,
    on_wandb: wandb_sweep.WandbSweep | None,
    trial_runners: dict[int, Runner],
    holdings: Any,
) -> Sweep:
    """What every trial is handed (``trial/job.py``)."""
    return Sweep(
        spec=spec,
        capacity=capacity,
        run_dir=str(run_dir),
        name=settings.name,
        workdir=settings.workdir,
        wandb_mode=settings.wandb,
        function=function,
        wandb_sweep_id=on_wandb.id if on_wandb else None,
        wandb_dir=settings.wandb_dir,
        runners=trial_runners,
        holdings=holdings,
        storage=remote.uri if (remote := remote_of(run_dir, settings)) is not None else None,
    )


def _monitor(
    spec: SweepSpec, settings: RunSettings, run_dir: Path, parts: tuple[Board, Any, Ledger | None], scheduler: Any
) -> SweepMonitor:
    """The monitor of the sweep's trials (``parts``: the admission's board, the rows, the ledger),
    told which trials the scheduler stopped and which can never be placed."""
    board, rows, ledger = parts
    return SweepMonitor(
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


def _start_ray(spec: SweepSpec, settings: RunSettings, run_dir: Path) -> tuple[Capacity, str | None]:
    """Ray started or joined (``cluster.py``), a local run dir seen by every node of it
    (``storage_check.py``): its capacity for this sweep's workers, and its dashboard."""
    started = start_or_connect(
        settings.address,
        spec.resources.use_gpu,
        spec.resources.cpus_per_worker,
        gpus=settings.gpus,
        dashboard_host=settings.dashboard_host,
        gpus_per_worker=spec.resources.gpus_per_worker,
        memory_per_worker=spec.resources.memory_per_worker_gb * GIB,
    )
    if settings.storage is None:
        check_seen_by_every_node(run_dir)
    return started


def _told(
    spec: SweepSpec, settings: RunSettings, run_dir: Path, restore: bool, tried: list[dict[str, Any]] | None
) -> tuple[list[Any] | None, list[dict[str, Any]] | None]:
    """What the searcher is told before it proposes (a joining driver: the sweep's ended trials;
    ``--warm-start``: the earlier sweep's), and the configurations already tried."""
    told = ended_rows(read_rows(run_dir)) if tried is not None and searches(spec.engine) else None  # a joiner
    if settings.warm_start and not restore:
        warm, priors, tried = start_from(spec, settings.warm_start, tried)
        told = (told or []) + (priors or []) if priors is not None or told is not None else None
        if not settings.quiet:
            print(warm.sentence())
    return told, tried


def _all_callbacks(
    spec: SweepSpec,
    settings: RunSettings,
    parts: tuple[interrupt.Signals, SweepMonitor, Any],
    restore: bool,
    on_wandb: wandb_sweep.WandbSweep | None,
) -> list[Any]:
    """Tune's callbacks of this driver (``parts``: its signals, monitor and the trials' holdings):
    Ctrl-C, newest stored checkpoints on resume, the monitor, result.json, W&B, what trials hold."""
    signals, monitor, holdings = parts
    # resumed, each trial goes on from the newest checkpoint on storage (a killed driver's state may name a gone one)
    stored = [StoredCheckpoints()] if restore else []
    listens = [interrupt.TuneListens(signals), monitor, ResultLog()]
    run_dir = monitor.path.parent
    prune = PruneCheckpoints(spec, run_dir, monitor.stopped_by_scheduler)  # after the monitor: it reads its rows
    return (
        stored
        + listens
        + [prune]
        + _callbacks(spec, settings, restore, on_wandb, run_dir)
        + [ReleaseHoldings(holdings)]
    )


def _admission(
    spec: SweepSpec,
    capacity: Capacity,
    estimates: Estimates,
    trial_runners: dict[int, Runner],
    *,
    holdings: Any,
    board: Board,
    ledger: Ledger | None = None,
) -> Admission | None:
    """Reservations and backfill (``admission.py``) for a sweep of mixed sizes on a cluster that
    does not grow; None otherwise (one size: nothing to reserve for; an autoscaler: no fixed slots).
    Trials on warm workers place their own slots and the reserved one starts ahead of them
    (``trial/slots.py``), unless ``RAYSWEEP_START_AHEAD=0``."""
    if not mixes_sizes(spec) or capacity.grows or not capacity.managed_slots or os.environ.get(BACKFILL) == "0":
        return None
    if spec.scheduler is not None and spec.scheduler.kind.pauses_trials:
        return None
    sizes = sizes_taken(spec.grow, capacity.total) if spec.grow else set(trial_runners)  # a fill's too
    own = {size for size in sizes if RUNNERS[runner_of(trial_runners, size)].places_own_slots}
    ahead = frozenset(own if os.environ.get(START_AHEAD) != "0" else ())
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


def _start_pool(spec: SweepSpec, capacity: Capacity, trials: int, trial_runners: dict[int, Runner]) -> Any:
    """The warm workers' pool, started now so that its workers import torch while Tune starts
    (as many as ``trials`` trials at once can use); None where no runner of the sweep needs it."""
    if any(kind.needs_pool for kind in kinds(trial_runners)):
        return start_pool(warm_workers(capacity, spec.world_sizes, trials), warm_imports())
    return None


def trials_at_once(settings: RunSettings, limit: int | None) -> int:
    """The most trials this driver runs at once: its trials, and the concurrency limit."""
    return min(x for x in (settings.segment_budget or settings.budget, limit) if x)
