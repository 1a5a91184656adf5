"""A sweep's settings, as asked and as kept: ``RunRequest`` is what ``raysweep run`` (its flags)
and ``raysweep.run`` (its keywords) ask for, built once by each and passed whole;
``runs.settings.RunSettings`` is what the driver made of it, kept in the run dir for ``resume``. No Ray here:
the command line builds and checks a request before anything starts.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from raysweep.errors import UserError
from raysweep.spec.model import WANDB_MODES, SweepSpec


@dataclass(frozen=True)
class RunRequest:
    """``raysweep run``'s flags (``raysweep.run``'s keywords), as given: None is "the default"."""

    count: int | None = None
    name: str | None = None
    storage: str | os.PathLike = "raysweep_runs"
    address: str | None = None
    max_concurrent: int | None = None
    wandb: str | None = None  # None: the spec's raysweep.wandb.mode, else online with a key, else offline
    seed: int | None = None
    budget_gpu_hours: float | None = None  # None: the spec's raysweep.budget.gpu_hours, if any
    quiet: bool = False
    gpus: str | None = None  # the embedded Ray's GPUs, e.g. "0,1"
    dashboard_host: str | None = None
    resume_existing: bool = False  # a run dir that already holds this sweep is resumed (a requeued SLURM job)
    set: Iterable[str] = ()  # --set PATH=VALUE overrides of the file
    strict: bool = False
    exit_at_once: bool = True  # a second Ctrl-C ends the process (the CLI), else raises KeyboardInterrupt
    warm_start: tuple[str | os.PathLike, ...] = ()  # earlier sweeps' run dirs: their finished trials are told first

    def check(self) -> None:
        """What the command line's parser checks, for a request from Python."""
        for name, low in (("count", 1), ("max_concurrent", 1), ("seed", 0)):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
                raise UserError(f"{name} must be a whole number >= {low}, got {value!r}")
        check_budget(self.budget_gpu_hours)
        if self.wandb is not None and self.wandb not in WANDB_MODES:
            raise UserError(f"wandb must be one of {', '.join(WANDB_MODES)}, got {self.wandb!r}")


def trials_to_run(spec: SweepSpec, count: int | None, purpose: str = "") -> int:
    """The trials ``spec`` runs with ``--count`` ``count`` (None: its run_cap, else its grid's
    size; a grid runs each point once at most); a search that never ends by itself needs a count
    or a run_cap (``purpose``: what it is for)."""
    trials = spec.trial_budget(count)
    if trials is None:
        raise UserError(
            f"{spec.method} search needs a trial budget{purpose}: set run_cap in the spec or pass --count N"
        )
    return spec.capped(trials)


def check_budget(hours: float | None) -> None:
    if hours is not None and (isinstance(hours, bool) or not isinstance(hours, (int, float)) or not hours > 0):
        raise UserError(f"--budget-gpu-hours must be a number of hours > 0, got {hours!r}")
