"""``run_sweep`` and ``resume_sweep``: a spec becomes a Ray Tune experiment in a run dir.

The run dir (``<storage>/<name>``) holds everything a sweep needs to be read or resumed:
``spec.json`` (the resolved spec), ``run.json`` (the command's settings), Tune's experiment
state and per-trial results, checkpoints, ``trials.jsonl``, the Optuna journal, the W&B
offline runs (inside the trial dirs) and ``driver.log``.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import ray
from ray import tune
from ray.tune.search import Searcher, SearchGenerator
from ray.tune.stopper import CombinedStopper

from raysweep import hints, wandb_sweep
from raysweep.driver import interrupt
from raysweep.driver.agents import driver_lock, plan_join
from raysweep.driver.budget import BudgetedSearch, BudgetStopper, Ledger
from raysweep.driver.cluster import dashboard_url, start_or_connect
from raysweep.driver.console import TrialOutput, show_trial_output
from raysweep.driver.monitor import SweepMonitor
from raysweep.driver.result_log import ResultLog
from raysweep.driver.settings import RunRequest, RunSettings, check_budget
from raysweep.driver.trainable import make_trainable
from raysweep.driver.wandb_logging import WandbRuns
from raysweep.errors import UserError
from raysweep.placement import GIB, Capacity, concurrency_limit, never_placed
from raysweep.private_api import restored_config
from raysweep.runs.files import (
    OPTUNA_JOURNAL,
    SETTINGS_FILE,
    SPEC_FILE,
    TRIALS_FILE,
    check_format,
    read_settings,
    read_spec,
    read_trials,
    write_json,
)
from raysweep.runs.show import resolve_run_dir
from raysweep.search.plan import cheapest_trial_hours, plan
from raysweep.search.schedulers import build_scheduler
from raysweep.search.searchers import build_search
from raysweep.search.stoppers import InitialFailureStopper, TargetStopper
from raysweep.spec import SweepSpec
from raysweep.spec.model import draw_seed
from raysweep.trial.job import Sweep
from raysweep.trial.pool import start_pool
from raysweep.trial.rank import import_loop
from raysweep.values import safe_name, short_config
from raysweep.words import FINISHED, Runner, TrialStatus

log = logging.getLogger("raysweep")


def _sweep_name(spec: SweepSpec, name: str | None) -> str:
    raw = name or spec.name or Path(spec.source or "sweep").stem
    clean = safe_name(raw)
    if clean.strip("."):
        return clean
    if name is not None:  # "." and ".." would put the run dir beside or above --storage
        raise UserError(
            f"--name {name!r}: a sweep's name is a directory under --storage; use letters, digits, '-', '_' or '.'"
        )
    return "sweep"


def run_dir_for(spec: SweepSpec, name: str | None, storage: str | os.PathLike) -> Path:
    """The run dir ``run_sweep`` uses for ``spec`` under ``name`` (None: the spec's) in ``storage``."""
    return Path(storage).resolve() / _sweep_name(spec, name)


def new_run_dir(storage: str | os.PathLike, name: str) -> Path:
    """``<storage>/<name>`` (it holds no sweep yet), checked before anything is written; created user-only (``resume``
    unpickles Tune's state from it, so whoever can write it can run code as the sweep's user)."""
    root = Path(storage).resolve()
    if root.exists() and not root.is_dir():
        raise UserError(f"--storage {storage}: is a file; it must be a directory (it is created if missing)")
    run_dir = root / name
    if run_dir.parent != root:
        raise UserError(f"--name {name!r} would leave --storage {storage}; pick a plain name")
    return run_dir


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
    if not spec.reuse_actors or spec.runs_program:
        return False
    return spec.ddp_workers == Runner.WARM or sizes == {1}


def _check_entry_point(spec: SweepSpec) -> None:
    """A typo in the loop or script name is the user's, and should not cost a cluster start."""
    if spec.function is not None:
        return
    if spec.runs_program:
        if spec.program is not None and spec.command_uses_program and not Path(spec.program).is_file():
            raise UserError(
                f"program: {spec.program!r} is not a file (it is resolved from {os.getcwd()}, as wandb agent does)"
            )
        return
    try:
        import_loop(spec.train_loop)
    except ImportError as e:
        raise UserError(str(e)) from None


def _setup_logging(run_dir: Path) -> None:
    handler = logging.FileHandler(run_dir / "driver.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    for name in ("ray", "ray.tune", "ray.train", "raysweep"):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.propagate = False
    logging.getLogger("raysweep").setLevel(logging.INFO)


def _callbacks(
    spec: SweepSpec, settings: RunSettings, resuming: bool, on_wandb: wandb_sweep.WandbSweep | None
) -> list[Any]:
    if settings.wandb == "disabled" or spec.calls_wandb_init:  # a script (a W&B-style function) logs its own W&B run
        return []
    group = spec.wandb.group or settings.name
    sweep_id = on_wandb.id if on_wandb else None
    return [WandbRuns(spec.wandb.project_name, spec.wandb.entity, group, settings.wandb, resuming, sweep_id)]


def _run(
    spec: SweepSpec,
    settings: RunSettings,
    run_dir: Path,
    restore: bool,
    function: Callable | None,
    tried: list[dict[str, Any]] | None = None,
) -> int:
    """Run (or restore) the sweep's Tune experiment in the run dir; ``tried``: the configurations
    an earlier driver ran (a joining one's grid goes on with the rest)."""
    # from here on, a Ctrl-C leaves the sweep resumable
    with interrupt.handled(run_dir, settings.exit_at_once) as signals:
        _setup_logging(run_dir)
        on_wandb = None
        if settings.wandb == "online":
            ran = [row["trial_id"] for row in read_trials(run_dir / TRIALS_FILE)]
            try:
                on_wandb = wandb_sweep.open_for_run(spec, run_dir, settings.name, ran)
            except wandb_sweep.WandbUnreachable as e:  # each run would wait on W&B, and be lost to it
                settings = replace(settings, wandb="offline")
                write_json(run_dir / SETTINGS_FILE, settings.to_json())
                print(
                    f"W&B: {e}; the runs are written offline instead (to put them on W&B later: "
                    f"{hints.command('publish', run_dir)})",
                    file=sys.stderr,
                )
        tuner, monitor, stoppers, output, settings = _start(
            spec, settings, run_dir, restore, signals, function, on_wandb, tried
        )
        started = time.time()
        results = tuner.fit()
        # the last lines of the trials that ran to their end here, still on their way to this console
        output.wait({k for k, r in monitor.rows.items() if r.get("status") in FINISHED} - monitor.finished_before)
    budget = next((s for s in stoppers if getattr(s, "fired", False)), None)  # it interrupted the sweep itself
    if budget is not None and not signals.received:
        return _budget_spent(settings, run_dir, monitor, budget.reason, on_wandb)
    stopper = next((s for s in stoppers if s.stop_all()), None)  # a stop, not an interrupt
    stopped = stopper.reason if stopper else None
    segment = settings.segment_budget or settings.budget  # this Tune experiment's trials
    if signals.received or (stopped is None and _left_unfinished(results, monitor, stoppers, segment)):
        pending = monitor.interrupted()
        if on_wandb:
            wandb_sweep.set_state(on_wandb, wandb_sweep.PAUSED)
        print(
            f"\nsweep {settings.name} interrupted; its state is saved. {_pending_text(pending, settings.budget)}"
            f"Continue it with: {hints.command('resume', run_dir)}",
            file=sys.stderr,
        )
        return 130
    if stopped:
        monitor.sweep_stopped()
    write_json(run_dir / SETTINGS_FILE, replace(settings, stopped=stopped).to_json())
    if on_wandb:
        wandb_sweep.set_state(on_wandb, wandb_sweep.FINISHED)
    return _finish(spec, settings, run_dir, monitor, time.time() - started, on_wandb, stopped)


def _start(
    spec: SweepSpec,
    settings: RunSettings,
    run_dir: Path,
    restore: bool,
    signals: interrupt.Signals,
    function: Callable | None,
    on_wandb: wandb_sweep.WandbSweep | None,
    tried: list[dict[str, Any]] | None = None,
) -> tuple[tune.Tuner, SweepMonitor, list[Any], TrialOutput, RunSettings]:
    """Ray, the worker pool and the Tuner (restored from the run dir with ``restore``); ``function``:
    raysweep.run's, bound into every trial; ``on_wandb``: the W&B sweep every trial's run joins."""
    # No Tune CSV and TensorBoard loggers: a second and third copy of result.json (ResultLog),
    # written by the driver on Tune's loop, and the TensorBoard one kept every ended trial's
    # writer in memory. Runs are read with `raysweep show/report` and W&B.
    os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"
    # A W&B-style function or script that never logs the metric ends with one report of what it
    # did log, as its W&B run does; Tune would stop the sweep at a result without the metric.
    # raysweep checks a train loop's reports itself (trial/metrics.py).
    os.environ["TUNE_DISABLE_STRICT_METRIC_CHECKING"] = "1"
    capacity = start_or_connect(
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
    _check_feasible(spec.trial_sizes, capacity)
    today = replace(capacity, grows=None)  # the nodes there are now
    spans = [
        size for size in spec.trial_sizes if size > capacity.largest_node and size not in never_placed({size}, today)
    ]
    if spans:
        # A trial that spans nodes needs them empty at once: with many trials pending (Tune's
        # default for random search) later 1-node trials kept taking the slots and every 2-node
        # trial ran last (docs/benchmarks.md). One pending trial at a time, as grid and bayes run,
        # reserves the nodes for it in turn.
        os.environ.setdefault("TUNE_MAX_PENDING_TRIALS_PG", "1")  # a user's own choice stands
    limit = concurrency_limit(capacity, min(max(spec.trial_sizes), capacity.largest_node), settings.max_concurrent)
    planned = plan(spec, settings.segment_budget or settings.budget, spec.budget.epoch_seconds, capacity.use_gpu)
    _check_budget_fits(spec, settings, restore)
    settings = replace(settings, plan=planned.to_json())
    write_json(run_dir / SETTINGS_FILE, settings.to_json())
    _print_banner(spec, settings, run_dir, capacity, limit, on_wandb)
    if not settings.quiet and (settings.budget_gpu_hours or spec.budget.epoch_seconds):
        print("\n".join(planned.lines(capacity.total)))

    wandb_sweep_id = on_wandb.id if on_wandb else None
    sweep = Sweep(
        spec,
        capacity,
        str(run_dir),
        settings.name,
        settings.workdir,
        settings.wandb,
        function,
        wandb_sweep_id,
        settings.wandb_dir,
    )
    trainable = make_trainable(sweep, _start_pool(spec, capacity))
    monitor = SweepMonitor(spec, run_dir, settings.budget, quiet=settings.quiet)
    ledger = None
    if settings.budget_gpu_hours:
        ledger = Ledger(spec, monitor, settings.budget_gpu_hours, capacity.use_gpu)
        monitor.ledger = ledger
        os.environ.setdefault("TUNE_MAX_PENDING_TRIALS_PG", "1")  # trials are admitted one at a time, as they fit
    stoppers = [
        InitialFailureStopper(
            functools.partial(monitor.initial_failures, spec.max_initial_failures), spec.max_initial_failures
        )
    ]
    if spec.metric and spec.metric.target is not None:
        stoppers.append(TargetStopper(spec.metric.name, spec.metric.goal, spec.metric.target))
    if ledger is not None:
        stoppers.append(BudgetStopper(ledger))
    callbacks = [interrupt.TuneListens(signals), monitor, ResultLog()] + _callbacks(spec, settings, restore, on_wandb)
    if restore:
        tuner, scheduler = _restored_tuner(run_dir, trainable, settings, callbacks, stoppers, ledger)
    else:
        segment = settings.segment_budget or settings.budget
        tuner, scheduler = _new_tuner(spec, segment, run_dir, limit, trainable, callbacks, stoppers, tried, ledger)
    monitor.stopped_by_scheduler = getattr(scheduler, "stopped", set())
    if hasattr(scheduler, "watch"):  # a run dir from before the guard has a scheduler without it
        scheduler.watch(spec, capacity)
        monitor.never_placed = scheduler.never_placed
    return tuner, monitor, stoppers, output, settings


def _print_banner(
    spec: SweepSpec,
    settings: RunSettings,
    run_dir: Path,
    capacity: Capacity,
    limit: int | None,
    on_wandb: wandb_sweep.WandbSweep | None,
) -> None:
    if not settings.quiet:
        url = dashboard_url() if not settings.address else None
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
        if not capacity.managed_slots:
            print(f"note: the cluster's nodes don't advertise raysweep_slot; running at most {limit} trials at once")
    if max(spec.trial_sizes) > 1 and spec.ddp_workers == Runner.TORCHTRAINER and not dashboard_url():
        print(
            "warning: this Ray cluster runs no dashboard. Ray Train frees the workers of a 2+-worker trial "
            "that the scheduler stops through the dashboard's State API; without it their CPUs/GPUs stay "
            "reserved. Start the cluster with its dashboard (the default of `ray start`)."
        )


def _start_pool(spec: SweepSpec, capacity: Capacity) -> Any:
    """The warm workers' pool, started now so that its workers import torch while Tune starts.
    None for TorchTrainer runs, and for a program: sweep of 1-worker trials (each runs its script
    from the Tune trial process)."""
    if spec.ddp_workers == Runner.WARM and (max(spec.trial_sizes) > 1 or not spec.runs_program):
        return start_pool({node.id: capacity.hosts(node) for node in capacity.nodes})
    return None


def _restored_tuner(
    run_dir: Path,
    trainable: Any,
    settings: RunSettings,
    callbacks: list[Any],
    stoppers: list[Any],
    ledger: Ledger | None = None,
) -> tuple[tune.Tuner, Any]:
    """Tune's Tuner from the run dir. ``Tuner.restore`` keeps the original RunConfig and
    scheduler: this driver's callbacks and stoppers are attached, and stops read from the
    restored scheduler."""
    tuner = tune.Tuner.restore(
        str(run_dir), trainable=trainable, resume_unfinished=True, resume_errored=settings.retry_failed
    )
    run_config, tune_config = restored_config(tuner)
    run_config.callbacks = callbacks
    run_config.stop = CombinedStopper(*stoppers)  # this driver's monitor
    if ledger is not None:  # this driver's budget, which an earlier one may not have had
        search = tune_config.search_alg
        if isinstance(search, BudgetedSearch):
            search.ledger = ledger
        else:
            tune_config.search_alg = budgeted(search, ledger)
    return tuner, tune_config.scheduler


def _new_tuner(
    spec: SweepSpec,
    budget: int,
    run_dir: Path,
    limit: int | None,
    trainable: Any,
    callbacks: list[Any],
    stoppers: list[Any],
    tried: list[dict[str, Any]] | None = None,
    ledger: Ledger | None = None,
) -> tuple[tune.Tuner, Any]:
    scheduler = build_scheduler(spec)
    search, param_space = build_search(spec, budget, run_dir, limit, tried)
    if ledger is not None:
        search = budgeted(search, ledger)
    tuner = tune.Tuner(
        trainable,
        param_space=param_space,
        tune_config=tune.TuneConfig(
            metric=spec.metric.name if spec.metric else None,
            mode=spec.metric.mode if spec.metric else None,
            search_alg=search,
            scheduler=scheduler,
            num_samples=budget,
            reuse_actors=_reuse_actors(spec, spec.trial_sizes),
        ),
        run_config=tune.RunConfig(
            name=run_dir.name,
            storage_path=str(run_dir.parent),
            callbacks=callbacks,
            stop=CombinedStopper(*stoppers),
            verbose=0,
            failure_config=tune.FailureConfig(max_failures=spec.max_failures),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
        ),
    )
    return tuner, scheduler


def _pending_text(pending: list[dict[str, Any]], budget: int) -> str:
    """The trials ``resume`` will run, in words (a few named)."""
    if not pending:
        return ""
    shown = ", ".join(f"{r['trial_id']} ({short_config(r.get('config') or {})})" for r in pending[:5])
    more = f" and {len(pending) - 5} more" if len(pending) > 5 else ""
    return f"{len(pending)} of its {budget} trials are pending: {shown}{more}.\n"


def budgeted(search: Any, ledger: Ledger) -> BudgetedSearch:
    """The search algorithm, its trials admitted as they fit the budget."""
    return BudgetedSearch(SearchGenerator(search) if isinstance(search, Searcher) else search, ledger)


def _check_budget_fits(spec: SweepSpec, settings: RunSettings, restore: bool) -> None:
    """A budget below the cheapest trial's cost (as the spec's epoch_seconds estimate says) is the
    user's mistake, said before any trial runs."""
    hours, epoch_s = settings.budget_gpu_hours, spec.budget.epoch_seconds
    cheapest = cheapest_trial_hours(spec, epoch_s) if hours and epoch_s and not restore else None
    if cheapest is not None and cheapest > hours:
        raise UserError(
            f"budget {hours:g} GPU-hours is below one trial's cost: the cheapest trial (num_gpus="
            f"{min(spec.trial_sizes)}, to its first rung at {epoch_s:g} s a report) costs {cheapest:.4g}"
        )


def _left_unfinished(results: Any, monitor: SweepMonitor, stoppers: list[Any], budget: int) -> bool:
    """Tune's first Ctrl-C ends ``fit()`` quietly, leaving trials for ``resume``: some are not
    ended, or fewer than the budget were started without a stopper ending the sweep."""
    if len(results) > results.num_terminated + results.num_errors:
        return True
    if any(r.get("status") in (TrialStatus.RUNNING, TrialStatus.PENDING) for r in monitor.rows.values()):
        return True
    return len(results) < budget and not any(s.stop_all() for s in stoppers)


def _budget_spent(settings: RunSettings, run_dir: Path, monitor: SweepMonitor, sentence: str, on_wandb: Any) -> int:
    """The budget ended the sweep: what it did not finish stays, for ``resume`` with a larger one."""
    pending = monitor.interrupted()
    write_json(run_dir / SETTINGS_FILE, replace(settings, stopped=sentence).to_json())
    if on_wandb:
        wandb_sweep.set_state(on_wandb, wandb_sweep.PAUSED)
    more = hints.command("resume", run_dir, "--budget-gpu-hours", "H")
    print(
        f"\nsweep {settings.name}: {sentence}. {_pending_text(pending, settings.budget)}To go on with a larger budget: {more}"
    )
    print(f"results: {hints.command('show', run_dir)}")
    return 0


def _finish(
    spec: SweepSpec,
    settings: RunSettings,
    run_dir: Path,
    monitor: SweepMonitor,
    wall_s: float,
    on_wandb: wandb_sweep.WandbSweep | None,
    stopped: str | None = None,
) -> int:
    rows = list(monitor.rows.values())
    failed = [r for r in rows if r.get("status") == TrialStatus.FAILED]
    ok = [r for r in rows if r.get("status") in FINISHED]
    if not settings.quiet:
        print()
    ended = f"stopped ({stopped})" if stopped else "finished"
    print(f"sweep {settings.name} {ended} in {wall_s:.0f} s: {len(ok)} finished, {len(failed)} failed")
    best = monitor.best()
    if best:
        print(
            f"best {spec.metric.name} = {best['metrics'][spec.metric.name]:.6g} from trial {best['trial_id']}: {best['config']}"
        )
    print(f"results: {hints.command('show', run_dir)}")
    if on_wandb:
        print(f"W&B sweep: {on_wandb.url}")
    if settings.wandb == "offline":
        print(
            f"W&B offline runs: wandb sync {run_dir}/*/wandb/offline-run-*, or as a W&B sweep: "
            f"{hints.command('publish', run_dir)}"
        )
    if monitor.initial_failures(spec.max_initial_failures):
        print(
            f"the sweep's first {spec.max_initial_failures} trials all failed (raysweep.max_initial_failures; "
            f"W&B's agent stops the same way); the first error:\n{monitor.first_error}"
        )
        return 1
    if rows and not ok:
        print(f"every trial failed; the first error:\n{monitor.first_error or 'unknown'}")
        return 1
    return 0


def run_sweep(spec: SweepSpec, request: RunRequest, function: Callable | None = None) -> int:
    """Run a validated spec as ``request`` asks; returns the process exit code (0 ok, 1 every
    trial failed, 130 interrupted). ``function``: raysweep.run's (``spec.function`` says its style).
    """
    _check_entry_point(spec)
    if request.seed is not None:
        spec = replace(spec, seed=request.seed)
    seed_drawn = spec.seed is None
    if seed_drawn:  # kept in spec.json: resume draws on from it
        spec = replace(spec, seed=draw_seed())
    budget = spec.trial_budget(request.count)
    if budget is None:
        raise UserError(f"{spec.method} search needs a trial budget: set run_cap in the spec or pass --count N")
    if spec.method == "grid":
        budget = min(budget, spec.grid_size)
    name = _sweep_name(spec, request.name)
    storage = request.storage
    if (Path(storage).resolve() / name / SPEC_FILE).exists():
        return _existing(spec, request, function, Path(storage).resolve() / name)
    run_dir = new_run_dir(storage, name)
    mode = request.wandb or spec.wandb.mode or ("online" if wandb_sweep.key_configured() else "offline")
    settings = RunSettings(
        name=name,
        budget=budget,
        wandb=mode,
        address=request.address,
        max_concurrent=request.max_concurrent or spec.max_concurrent,
        quiet=request.quiet,
        gpus=request.gpus,
        dashboard_host=request.dashboard_host,
        function=function_name(function),
        exit_at_once=request.exit_at_once,
        seed_drawn=seed_drawn,
        budget_gpu_hours=request.budget_gpu_hours or spec.budget.gpu_hours,
    )
    created = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    run_dir.chmod(0o700)
    write_json(run_dir / SPEC_FILE, spec.to_json())
    write_json(run_dir / SETTINGS_FILE, settings.to_json())
    try:
        with driver_lock(run_dir):
            return _run(spec, settings, run_dir, restore=False, function=function)
    except UserError:
        if created and not (run_dir / TRIALS_FILE).exists():  # nothing ran: leave no dir to block the retry
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    finally:
        if ray.is_initialized():
            ray.shutdown()


def _existing(spec: SweepSpec, request: RunRequest, function: Callable | None, run_dir: Path) -> int:
    """``run`` of a sweep whose run dir exists: with ``resume_existing``, continue it (a requeued
    SLURM job: its ``--count`` must be the sweep's); else join it, as a second ``wandb.agent`` of
    the sweep, adding ``--count`` trials (or what is left of its budget)."""
    stored = read_spec(run_dir)
    settings = RunSettings.from_json(read_settings(run_dir))
    if request.resume_existing:
        if request.count is not None and request.count != settings.budget:
            raise UserError(
                f"--count {request.count}: sweep {run_dir.name} has {settings.budget} trials; --resume-existing "
                f"continues them (leave --count out, or give {settings.budget}); to add trials, run it without "
                "--resume-existing"
            )
        print(f"sweep {run_dir.name}: its run dir exists; continuing it (raysweep resume)")
        return resume_sweep(
            run_dir,
            address=request.address,
            quiet=request.quiet,
            function=function,
            exit_at_once=request.exit_at_once,
        )
    _check_function_given(stored, settings, function, run_dir)
    if stored.function and spec.function and stored.function != spec.function:
        shapes = {"raysweep": "train(config)", "wandb": "main(), reading wandb.config"}
        raise UserError(
            f"sweep {run_dir.name} ran a {shapes[stored.function]} function; this one is {shapes[spec.function]}"
        )
    with driver_lock(run_dir):
        plan = plan_join(stored, spec, run_dir, request.count, settings.agents)
        if plan.count == 0:
            print(f"sweep {run_dir.name} has run its {plan.ran} trials; --count N (count=N) adds N more")
            return 0
        print(f"sweep {run_dir.name}: its run dir exists; adding {plan.count} trial(s) to its {plan.ran}")
        settings = replace(
            settings,
            budget=plan.ran + plan.count,
            segment_budget=plan.count,
            agents=settings.agents + 1,
            address=request.address,
            quiet=request.quiet,
            max_concurrent=request.max_concurrent or settings.max_concurrent,
            function=function_name(function),
            exit_at_once=request.exit_at_once,
            stopped=None,
            budget_gpu_hours=request.budget_gpu_hours or settings.budget_gpu_hours,
        )
        write_json(run_dir / SETTINGS_FILE, settings.to_json())
        try:
            return _run(replace(stored, seed=plan.seed), settings, run_dir, False, function, plan.tried)
        finally:
            if ray.is_initialized():
                ray.shutdown()


def resume_sweep(
    run: str | os.PathLike,
    storage: str | os.PathLike = "raysweep_runs",
    address: str | None = None,
    quiet: bool = False,
    retry_failed: bool = False,
    function: Callable | None = None,
    exit_at_once: bool = True,
    budget_gpu_hours: float | None = None,
) -> int:
    """Continue an interrupted sweep (``budget_gpu_hours``: its budget from now on, what it spent
    counted): finished and failed trials stay, unfinished ones continue
    (``retry_failed``: failed ones run again too, from their last checkpoint). A sweep of a
    Python function needs it again: a run dir stores no code."""
    run_dir = resolve_run_dir(run, storage)
    check_format(run_dir)
    spec = read_spec(run_dir)
    settings = RunSettings.from_json(read_settings(run_dir))
    settings = replace(settings, quiet=quiet, retry_failed=retry_failed, exit_at_once=exit_at_once, stopped=None)
    if budget_gpu_hours is not None:
        check_budget(budget_gpu_hours)
        settings = replace(settings, budget_gpu_hours=budget_gpu_hours)
    _check_function_given(spec, settings, function, run_dir)
    if address:  # another cluster: the embedded Ray's --gpus / --dashboard-host don't apply
        settings = replace(settings, address=address, gpus=None, dashboard_host=None)
    # A sweep stopped before its first trial started (Ctrl-C while Ray started, a kill) has
    # nothing to resume: it starts afresh. Tune may have no state yet (it writes it when the
    # Tuner is built), and Ray 2.60 cannot restore a state of no trials (an IndexError in
    # TuneController._restore_trials, after which it ran one trial of the budget and ended).
    restore = bool(read_trials(run_dir / TRIALS_FILE)) and tune.Tuner.can_restore(run_dir)
    if not restore:
        print(f"sweep {settings.name}: no trial had started; starting it")
        (run_dir / OPTUNA_JOURNAL).unlink(missing_ok=True)  # its study, if any, holds no finished trial
    try:
        with driver_lock(run_dir):
            return _run(spec, settings, run_dir, restore=restore, function=function)
    finally:
        if ray.is_initialized():
            ray.shutdown()


def function_name(function: Callable | None) -> str | None:
    """How messages name raysweep.run's function (``module.qualname``)."""
    if function is None:
        return None
    return f"{getattr(function, '__module__', None) or '?'}.{getattr(function, '__qualname__', repr(function))}"


def _check_function_given(spec: SweepSpec, settings: RunSettings, function: Callable | None, run_dir: Path) -> None:
    if spec.function is not None and function is None:
        raise UserError(
            f"sweep {settings.name} runs the Python function {settings.function}, and a run dir stores no code: "
            f"pass it again, raysweep.resume({str(run_dir)!r}, function=...)"
        )
    if spec.function is None and function is not None:
        runs = spec.train_loop or spec.program or "its command"
        raise UserError(f"sweep {settings.name} runs {runs}, not a Python function: resume it without function=")
