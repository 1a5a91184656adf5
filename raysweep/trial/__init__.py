"""What a train loop sees of its trial (``raysweep.report`` and friends), and what runs per trial.

A loop calls the same three functions however it runs: on every rank of its trial's warm DDP
workers, on every worker of a Ray Train ``TorchTrainer``, in the Tune trial's own process
(1 worker), inside a ``program:`` script that raysweep launched, or in plain Python with no Ray
(``run_local``). The rank's entry point installs the right backend (``backends.py``) first.

The rest of this package is the per-trial and per-rank runtime, in the order a trial runs:
``tune_trial.py`` (the Tune trainable), ``job_builder.py`` (builds the ``TrialJob``, with the runner the driver
chose for its size), ``job.py`` (the job, plain data), ``entries.py`` (what it runs: a loop, a function or a script), ``holdings.py`` (the sweep's record of what each trial holds),
``pool.py`` (the warm workers' pool, which is that record too), ``lease.py`` (a trial borrowing them), ``gang.py``
(a trial's side of its warm ranks) and ``warm_rank.py`` (a warm rank's side), ``rank.py`` (where
each rank runs), ``metrics.py`` (what a report must hold, the mean over ranks), ``program.py``
and ``supervise.py`` (a ``program:`` script), ``watchdog.py``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from raysweep.env import METRICS_FILE
from raysweep.trial.backends import Backend, LocalBackend, ProgramBackend, TrialContext
from raysweep.trial.metrics import MetricError, check_metric

__all__ = ["MetricError", "TrialContext", "backend", "get_checkpoint", "get_context", "report", "run_local"]

_current: Backend = ProgramBackend() if os.environ.get(METRICS_FILE) else LocalBackend()


def use(backend_: Backend) -> None:
    """Called by a rank's entry point before it runs a loop; loops never call it."""
    global _current
    _current = backend_


def backend() -> str:
    """Where the loop runs: one of ``words.Runner`` ("in_process", "warm", "torchtrainer"),
    "local" (``run_local``, no Ray) or "program" (inside a ``program:`` script)."""
    return _current.name


def current() -> Backend:
    """The backend the loop reports through (``ddp.py`` asks it what differs between runners)."""
    return _current


def get_context() -> TrialContext:
    """Rank, world size and device of the calling process."""
    return _current.context()


def report(metrics: Mapping[str, Any], checkpoint: str | os.PathLike | None = None) -> None:
    """Report one iteration's metrics (every rank, the same number of times).

    Args:
        metrics: Numbers (Python or NumPy scalars, not tensors). With several workers the
            scheduler sees the mean over ranks of every numeric metric.
        checkpoint: A directory holding this iteration's checkpoint, usually passed by the
            main rank only. Its contents are copied into the trial's storage before this
            returns, so a temporary directory is fine.
    """
    metrics = dict(metrics)
    check_metric(metrics, _current.metric)
    _current.report(metrics, os.fspath(checkpoint) if checkpoint else None)
    if _current.watchdog is not None:
        _current.watchdog.beat()


def report_without_metric(metrics: Mapping[str, Any]) -> None:
    """The one report of a W&B-style function or script that never logged the sweep's metric:
    what it did log, as its W&B run's summary holds it (every rank, rank 0's values)."""
    _current.report(dict(metrics), None)
    if _current.watchdog is not None:
        _current.watchdog.beat()


def get_checkpoint() -> Any:
    """The trial's latest checkpoint (a ``ray.train.Checkpoint``), or None on a fresh start.

    Use ``with get_checkpoint().as_directory() as d:`` to read it.
    """
    return _current.checkpoint()


def run_local(train_fn: Callable[[dict], Any], config: dict, resume: bool = False) -> list[dict[str, Any]]:
    """Run a loop in this process with no Ray and return what it reported.

    With ``resume=True`` the loop sees the last checkpoint reported by an earlier
    ``run_local`` call in this process, as a restarted trial would.
    """
    previous = _current.checkpoint_dir if resume and isinstance(_current, LocalBackend) else None
    local = LocalBackend(previous)
    use(local)
    train_fn(config)
    return list(local.reports)
