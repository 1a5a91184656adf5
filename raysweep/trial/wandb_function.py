"""A W&B-style function run as one rank of a trial, as ``wandb.agent(sweep_id, function=main)`` runs it.

``def main(): wandb.init(); lr = wandb.config.lr; ...; wandb.log({...})`` takes no argument: its
``wandb.init`` meets the variables ``wandb agent`` sets (``program_wandb.wandb_variables``), so
``wandb.config`` holds the trial's values on every rank. While it runs, each ``wandb.log`` that
carries the sweep's metric is one report of the rank, with the latest value of every other key
logged, as a ``program:`` script's logs are. A function that never logs the metric ends done,
as its W&B run does, with one report of what it did log (the driver says so, once a sweep). The
environment and wandb's ``log`` are put back when it returns: a warm worker runs other trials after it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

from raysweep import private_api, trial
from raysweep.env import env_set
from raysweep.trial import wandb_log
from raysweep.trial.job import TrialJob, WandbSetup
from raysweep.trial.program_wandb import link_wandb_runs, wandb_variables


class _Reports(wandb_log.LoggedReports):
    """``wandb.log`` calls turned into reports of this rank, as they are made."""

    def __init__(self, metric: str | None):
        super().__init__(metric)
        self.run_dirs: set[str] = set()  # the W&B runs the function logged to (under WANDB_DIR)

    def logged(self, run: Any, data: Any) -> None:
        run_dir = os.path.dirname(getattr(run, "dir", "") or "")  # run.dir is <run dir>/files
        if run_dir:
            self.run_dirs.add(run_dir)
        report = self.add(wandb_log.numbers(data)) if isinstance(data, dict) else None
        if report is not None:
            trial.report(report)


def call(function: Callable[[], Any], launch: WandbSetup, job: TrialJob, rank: int) -> None:
    """Run ``function`` as ``rank`` of the trial; its W&B run ends with it (exit code 1 if it raised,
    0 when it finished or the scheduler stopped it, as raysweep's own runs of a train loop end)."""
    import wandb

    reports = _Reports(job.metric)
    # wandb reads its environment once per process setup: a process that ran an earlier trial
    # (a warm worker, a reused Tune actor) tears it down, so this trial's wandb.init reads its own.
    wandb.teardown()
    variables = wandb_variables(launch, job.trial_id, rank)
    with env_set(variables), _working_dir(launch.workdir), private_api.teed_wandb_log(reports.logged):
        failed = False
        try:
            function()
        except Exception:  # not a scheduler's stop (warm_rank.TrialStopped, a BaseException): that run ends with 0
            failed = True
            raise
        finally:
            if wandb.run is not None:
                wandb.finish(exit_code=1 if failed else 0)
            wandb.teardown()
            link_wandb_runs(job.trial_dir, launch.wandb_dir, {job.trial_id} if rank == 0 else set(), reports.run_dirs)
    if job.metric and reports.count == 0:  # as under wandb.agent, the run is done, without the metric
        trial.report_without_metric(trial.current().share(reports.latest))  # rank 0's values, on every rank


@contextlib.contextmanager
def _working_dir(path: str) -> Iterator[None]:
    """The function runs where raysweep.run was called, as wandb.agent runs it (``wandb/latest-run``
    and the like are found there); the process's own directory is put back after."""
    before = os.getcwd()
    try:
        os.chdir(path)
    except OSError:  # a node that lacks the caller's directory: the function runs where it is
        yield
        return
    try:
        yield
    finally:
        os.chdir(before)
