"""``run_sweep`` and ``resume_sweep``: a spec becomes a Ray Tune experiment in a run dir, and a
later ``run`` of the same sweep joins it (``driver/agents.py``). ``experiment.py`` starts the
experiment, ``outcome.py`` says how it ended.

The run dir (``<storage>/<name>``) holds everything a sweep needs to be read or resumed:
``spec.json`` (the resolved spec), ``run.json`` (the command's settings), Tune's experiment
state and per-trial results, checkpoints, ``trials.jsonl``, the Optuna journal, the W&B
offline runs (inside the trial dirs) and ``driver.log``.
"""

from __future__ import annotations

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

from raysweep import hints, wandb_sweep
from raysweep.driver import experiment, interrupt, outcome
from raysweep.driver.agents import driver_lock, plan_join
from raysweep.driver.home import sweep_home
from raysweep.driver.mirror import Mirror, experiment_path
from raysweep.driver.request import RunRequest, check_budget, trials_to_run
from raysweep.errors import UserError
from raysweep.runs import storage
from raysweep.runs.files import (
    OPTUNA_JOURNAL,
    SPEC_FILE,
    TRIALS_FILE,
    read_spec,
    write_json,
)
from raysweep.runs.rows import read_rows
from raysweep.runs.run_settings import RunSettings, check_format, read_settings, write_settings
from raysweep.runs.show import resolve_run_dir
from raysweep.search.wandb_optimizer import checked
from raysweep.spec import SweepSpec
from raysweep.spec.model import draw_seed
from raysweep.trial.entries import kind_of
from raysweep.trial.pool import end_pool
from raysweep.values import safe_name

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
    """The run dir ``run_sweep`` uses for ``spec`` under ``name`` (None: the spec's) in ``storage``
    (on a URI storage, its local copy)."""
    return sweep_home(storage, _sweep_name(spec, name), check=False).run_dir


def _check_entry_point(spec: SweepSpec) -> SweepSpec:
    """A typo in the loop or script name is the user's, and should not cost a cluster start; so is
    what W&B's sweep scheduler refuses at start (``wandb_engine.checked``), with W&B's warnings said.
    Returns the spec with a define-by-run space's sizes sampled."""
    spec, said = checked(spec)
    for line in said:
        print(f"warning: W&B's sweep scheduler: {line}", file=sys.stderr)
    kind_of(spec).check(spec)
    return spec


def _setup_logging(run_dir: Path) -> None:
    handler = logging.FileHandler(run_dir / "driver.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    for name in ("ray", "ray.tune", "ray.train", "raysweep"):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.propagate = False
    logging.getLogger("raysweep").setLevel(logging.INFO)


def _open_wandb(
    spec: SweepSpec, settings: RunSettings, run_dir: Path
) -> tuple[wandb_sweep.WandbSweep | None, RunSettings]:
    """The W&B sweep an online sweep's runs join; W&B unreachable, the runs are written offline
    instead (each would wait on W&B, and be lost to it), and the settings say so."""
    if settings.wandb != "online":
        return None, settings
    ran = [row.trial_id for row in read_rows(run_dir) if row.start is not None]
    try:
        return wandb_sweep.open_for_run(spec, run_dir, settings.name, ran), settings
    except wandb_sweep.WandbUnreachable as e:
        settings = replace(settings, wandb="offline")
        write_settings(run_dir, settings)
        print(
            f"W&B: {e}; the runs are written offline instead (to put them on W&B later: "
            f"{hints.command('publish', run_dir)})",
            file=sys.stderr,
        )
        return None, settings


def _run(
    spec: SweepSpec,
    settings: RunSettings,
    run_dir: Path,
    restore: bool,
    function: Callable | None,
    tried: list[dict[str, Any]] | None = None,
) -> int:
    """Run (or restore) the sweep's Tune experiment in the run dir; ``tried``: the configurations
    an earlier driver ran (a joining one's grid goes on with the rest). On a URI storage the run
    dir is pushed to it as the sweep goes (``mirror.py``)."""
    with Mirror(run_dir, settings):
        return _run_mirrored(spec, settings, run_dir, restore, function, tried)


def _run_mirrored(
    spec: SweepSpec,
    settings: RunSettings,
    run_dir: Path,
    restore: bool,
    function: Callable | None,
    tried: list[dict[str, Any]] | None,
) -> int:
    # from here on, a Ctrl-C leaves the sweep resumable
    with interrupt.handled(run_dir, settings.exit_at_once) as signals:
        _setup_logging(run_dir)
        on_wandb, settings = _open_wandb(spec, settings, run_dir)
        run = experiment.start(
            spec, settings, run_dir, restore=restore, signals=signals, function=function, on_wandb=on_wandb, tried=tried
        )
        monitor, stoppers, output, settings = run.monitor, run.stoppers, run.output, run.settings
        started = time.time()
        try:
            results = run.tuner.fit()
            # the last lines of the trials that ran to their end here, still on their way to this console
            output.wait({k for k, r in monitor.rows.items() if r.finished} - monitor.finished_before)
        finally:
            if run.pool is not None:  # its workers' scripts end before this driver does
                end_pool(run.pool)
            output.close()
    budget = next((s for s in stoppers if getattr(s, "fired", False)), None)  # it interrupted the sweep itself
    if budget is not None and not signals.received:
        return outcome.budget_spent(settings, run_dir, monitor, budget.reason, on_wandb)
    stopper = outcome.stopped_by(stoppers)  # a stop, not an interrupt
    stopped = stopper.reason if stopper else None
    search_end = getattr(run.search, "end", None)  # the search proposed no more: a used-up grid, a terminator
    segment = settings.segment_budget or settings.budget  # this Tune experiment's trials
    unfinished = outcome.left_unfinished(results, monitor, stoppers, segment, search_end)
    if signals.received or (stopped is None and unfinished):
        pending = monitor.interrupted()
        if on_wandb:
            wandb_sweep.set_state(on_wandb, wandb_sweep.PAUSED)
        print(
            f"\nsweep {settings.name} interrupted; its state is saved. {outcome.pending_text(pending, settings.budget)}"
            f"Continue it with: {hints.command('resume', run_dir)}",
            file=sys.stderr,
        )
        return 130
    if stopped:
        monitor.sweep_stopped()
    write_settings(run_dir, replace(settings, stopped=stopped))
    if on_wandb:
        wandb_sweep.set_state(on_wandb, wandb_sweep.FINISHED)
    return outcome.finish(
        spec,
        settings,
        run_dir,
        monitor,
        wall_s=time.time() - started,
        on_wandb=on_wandb,
        stopped=stopped,
        search_end=search_end,
    )


def run_sweep(spec: SweepSpec, request: RunRequest, function: Callable | None = None) -> int:
    """Run a validated spec as ``request`` asks; returns the process exit code (0 ok, 1 every
    trial failed, 130 interrupted). ``function``: raysweep.run's (``spec.function`` says its style).
    """
    spec = _check_entry_point(spec)  # a define-by-run space's sizes sampled now, kept in spec.json
    if request.seed is not None:
        spec = replace(spec, seed=request.seed)
    seed_drawn = spec.seed is None
    if seed_drawn:  # kept in spec.json: resume draws on from it
        spec = replace(spec, seed=draw_seed())
    budget = trials_to_run(spec, request.count)
    name = _sweep_name(spec, request.name)
    home = sweep_home(request.storage, name)
    if home.exists():
        return _existing(spec, request, function, home.fetch())
    _say_run_cap(spec, request.count)
    run_dir = home.new_run_dir()
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
        warm_start=tuple(str(resolve_run_dir(d)) for d in request.warm_start),
        storage=home.uri,
    )
    created = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    run_dir.chmod(0o700)
    write_json(run_dir / SPEC_FILE, spec.to_json())
    write_settings(run_dir, settings)
    try:
        with driver_lock(run_dir):
            return _run(spec, settings, run_dir, restore=False, function=function)
    except UserError:
        if created and not (run_dir / TRIALS_FILE).exists():  # nothing ran: leave no dir to block the retry
            shutil.rmtree(run_dir, ignore_errors=True)
            if home.remote is not None:
                storage.remove(home.remote)
        raise
    finally:
        if ray.is_initialized():
            ray.shutdown()


def _existing(spec: SweepSpec, request: RunRequest, function: Callable | None, run_dir: Path) -> int:
    """``run`` of a sweep whose run dir exists: with ``resume_existing``, continue it (a requeued
    SLURM job: its ``--count`` must be the sweep's); else join it, as a second ``wandb.agent`` of
    the sweep, adding ``--count`` trials (or what is left of its budget)."""
    stored = read_spec(run_dir)
    settings = read_settings(run_dir)
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
            print(f"sweep {run_dir.name} has run its {plan.ran} trials; {_to_add_more(stored, run_dir)}")
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
        write_settings(run_dir, settings)
        try:
            return _run(replace(stored, seed=plan.seed), settings, run_dir, False, function, plan.tried)
        finally:
            if ray.is_initialized():
                ray.shutdown()


def _say_run_cap(spec: SweepSpec, count: int | None) -> None:
    if count is not None and spec.run_cap is not None and count > spec.run_cap:
        print(f"--count {count} is above the file's run_cap: {spec.run_cap} trials, as W&B ends a sweep at run_cap")


def _to_add_more(stored: SweepSpec, run_dir: Path) -> str:
    if stored.run_cap is not None:  # W&B's server ends a sweep at run_cap too, whatever an agent's --count
        return (
            f"that is its run_cap ({stored.run_cap}), which bounds every driver's --count, as W&B's does; "
            f"to search on, start a new sweep from it: --warm-start {run_dir}"
        )
    return "--count N (count=N) adds N more"


def resume_sweep(
    run: str | os.PathLike,
    *,
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
    settings = read_settings(run_dir)
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
    restore = any(row.start is not None for row in read_rows(run_dir)) and tune.Tuner.can_restore(
        experiment_path(run_dir, settings)
    )
    if not restore:
        print(f"sweep {settings.name}: no trial had started; starting it")
        (run_dir / OPTUNA_JOURNAL).unlink(missing_ok=True)  # its study, if any, holds no finished trial
        (run_dir / TRIALS_FILE).unlink(missing_ok=True)  # trials Tune made that never started: it makes them anew
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
