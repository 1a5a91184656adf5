"""How a sweep's run ended, said and recorded: interrupted (what is pending, the resume
command), its budget spent (resumable), stopped, or finished (``finish``)."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from raysweep import hints, wandb_sweep
from raysweep.driver.budget import BudgetStopper
from raysweep.driver.monitor import SweepMonitor
from raysweep.runs.rows import TrialRow
from raysweep.runs.run_settings import RunSettings, write_settings
from raysweep.spec import SweepSpec
from raysweep.values import short_config
from raysweep.words import TrialStatus

log = logging.getLogger("raysweep")


def pending_text(pending: list[TrialRow], budget: int) -> str:
    """The trials ``resume`` will run, in words (a few named)."""
    if not pending:
        return ""
    shown = ", ".join(f"{r.trial_id} ({short_config(r.config)})" for r in pending[:5])
    more = f" and {len(pending) - 5} more" if len(pending) > 5 else ""
    return f"{len(pending)} of its {budget} trials are pending: {shown}{more}.\n"


def left_unfinished(
    results: Any, monitor: SweepMonitor, stoppers: list[Any], budget: int, search_end: str | None = None
) -> bool:
    """Tune's first Ctrl-C ends ``fit()`` quietly, leaving trials for ``resume``: some are not
    ended, or fewer than the budget were started without a stopper, or the search itself (W&B's
    optimizer: its terminator, a space it has used up), ending the sweep."""
    if len(results) > results.num_terminated + results.num_errors:
        return True
    if any(not r.ended for r in monitor.rows.values()):
        return True
    return len(results) < budget and stopped_by(stoppers) is None and search_end is None


def stopped_by(stoppers: list[Any]) -> Any:
    """The stopper that ended the sweep, asked once ``fit()`` returned; None if none did. The
    budget's is left out: it said so while the sweep ran (``fired``), and asked again it would
    interrupt this process (a sweep whose last trial took the spend past the budget ended
    "interrupted", 130, instead of finished)."""
    return next((s for s in stoppers if not isinstance(s, BudgetStopper) and s.stop_all()), None)


def budget_spent(settings: RunSettings, run_dir: Path, monitor: SweepMonitor, sentence: str, on_wandb: Any) -> int:
    """The budget ended the sweep: what it did not finish stays, for ``resume`` with a larger one."""
    pending = monitor.interrupted()
    write_settings(run_dir, replace(settings, stopped=sentence))
    if on_wandb:
        wandb_sweep.set_state(on_wandb, wandb_sweep.PAUSED)
    more = hints.command("resume", run_dir, "--budget-gpu-hours", "H")
    print(
        f"\nsweep {settings.name}: {sentence}. {pending_text(pending, settings.budget)}To go on with a larger budget: {more}"
    )
    print(f"results: {hints.command('show', run_dir)}")
    return 0


def ended_counts(rows: list[TrialRow]) -> str:
    """The trials' ends in words. A trial a stopper ended before its first report is stopped with
    no result, never one of the finished (a sweep whose first trials all failed said "1 finished"
    of the trial that was starting when it stopped)."""
    unreported = sum(1 for r in rows if r.status == TrialStatus.STOPPED and not r.iterations)
    finished = sum(1 for r in rows if r.finished) - unreported
    failed = sum(1 for r in rows if r.status == TrialStatus.FAILED)
    words = f"{finished} finished, {failed} failed"
    if unreported:
        words += f", {unreported} stopped before {'its' if unreported == 1 else 'their'} first report"
    return words


def best_line(spec: SweepSpec, monitor: SweepMonitor, run_dir: Path) -> str | None:
    """What the sweep found, where a metric would be named: the best trial of one metric, where the
    Pareto front of several is shown, or that there is no metric."""
    objectives = spec.objectives
    best = monitor.best()
    if best is not None:
        name = objectives.single.name
        return f"best {name} = {best.metric(name):.6g} from trial {best.trial_id}: {best.config}"
    if objectives.several:
        return f"objectives {objectives.describe()}: {hints.command('show', run_dir)} marks the Pareto front"
    return None if objectives else objectives.describe()


def finish(
    spec: SweepSpec,
    settings: RunSettings,
    run_dir: Path,
    monitor: SweepMonitor,
    *,
    wall_s: float,
    on_wandb: wandb_sweep.WandbSweep | None,
    stopped: str | None = None,
    search_end: str | None = None,
) -> int:
    rows = list(monitor.rows.values())
    ok = [r for r in rows if r.finished]
    if not settings.quiet:
        print()
    ended = f"stopped ({stopped})" if stopped else f"finished ({search_end})" if search_end else "finished"
    print(f"sweep {settings.name} {ended} in {wall_s:.0f} s: {ended_counts(rows)}")
    found = best_line(spec, monitor, run_dir)
    if found:
        print(found)
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
