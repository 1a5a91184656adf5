"""A W&B-style function run as one rank of a trial, as ``wandb.agent(sweep_id, function=main)`` runs it.

``def main(): wandb.init(); lr = wandb.config.lr; ...; wandb.log({...})`` takes no argument: its
``wandb.init`` meets the variables ``wandb agent`` sets (``program.wandb_variables``), so
``wandb.config`` holds the trial's values on every rank. While it runs, each ``wandb.log`` that
carries the sweep's metric is one report of the rank, with the latest value of every other key
logged, as a ``program:`` script's logs are. The environment and wandb's ``log`` are put back
when it returns: a warm worker runs other trials after it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

from raysweep import trial
from raysweep.trial import wandb_log
from raysweep.trial.job import TrialJob
from raysweep.trial.metrics import MetricError
from raysweep.trial.program import wandb_variables

# The run classes whose ``log`` a W&B-style function calls (disabled mode's NoopRun overrides Run.log).
_RUN_CLASSES = (("wandb.sdk.wandb_run", "Run"), ("wandb.sdk.lib.noop_run", "NoopRun"))


class _Reports:
    """``wandb.log`` calls turned into reports of this rank."""

    def __init__(self, metric: str | None):
        self.metric = metric
        self.latest: dict[str, Any] = {}
        self.count = 0

    def logged(self, data: Any) -> None:
        if not isinstance(data, dict):
            return
        numbers = wandb_log.numbers(data)
        self.latest |= numbers
        if numbers and (self.metric is None or self.metric in numbers):
            self.count += 1
            trial.report(dict(self.latest))


def call(function: Callable[[], Any], job: TrialJob, rank: int) -> None:
    """Run ``function`` as ``rank`` of the trial; its W&B run ends with it (exit code 1 if it raised,
    0 when it finished or the scheduler stopped it, as raysweep's own runs of a train loop end)."""
    import wandb

    reports = _Reports(job.metric)
    # wandb reads its environment once per process setup: a process that ran an earlier trial
    # (a warm worker, a reused Tune actor) tears it down, so this trial's wandb.init reads its own.
    wandb.teardown()
    with _environment(wandb_variables(job.wandb_function, job.trial_dir, job.trial_id, rank)), _teed(reports.logged):
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
    if job.metric and reports.count == 0:
        logged = ", ".join(sorted(reports.latest)) or "nothing"
        raise MetricError(
            f"the function finished without logging the sweep's metric {job.metric!r} (metric.name in the spec) "
            f"with wandb.log; it logged: {logged}"
        )


def _set(variables: dict[str, str | None]) -> None:
    for key, value in variables.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@contextlib.contextmanager
def _environment(variables: dict[str, str | None]) -> Iterator[None]:
    """``variables`` set (None: unset) while the function runs, then put back as they were."""
    before = {k: os.environ.get(k) for k in variables}
    _set(variables)
    try:
        yield
    finally:
        _set(before)


@contextlib.contextmanager
def _teed(on_log: Callable[[Any], None]) -> Iterator[None]:
    """wandb's ``Run.log`` (and ``NoopRun.log``) also hand each logged dict to ``on_log``."""
    import importlib

    patched = []
    for module_name, class_name in _RUN_CLASSES:
        run_class = getattr(importlib.import_module(module_name), class_name)
        original = run_class.__dict__["log"]

        def log(self: Any, data: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            result = _original(self, data, *args, **kwargs)
            on_log(data)
            return result

        run_class.log = log
        patched.append((run_class, original))
    try:
        yield
    finally:
        for run_class, original in patched:
            run_class.log = original
