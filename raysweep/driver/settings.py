"""A sweep's settings, as asked and as kept: ``RunRequest`` is what ``raysweep run`` (its flags)
and ``raysweep.run`` (its keywords) ask for, built once by each and passed whole;
``RunSettings`` is what the driver made of it, kept in the run dir for ``resume``. No Ray here:
the command line builds and checks a request before anything starts.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from raysweep.errors import UserError
from raysweep.runs.files import RUN_DIR_FORMAT
from raysweep.spec.model import WANDB_MODES


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

    def check(self) -> None:
        """What the command line's parser checks, for a request from Python."""
        for name, low in (("count", 1), ("max_concurrent", 1), ("seed", 0)):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
                raise UserError(f"{name} must be a whole number >= {low}, got {value!r}")
        check_budget(self.budget_gpu_hours)
        if self.wandb is not None and self.wandb not in WANDB_MODES:
            raise UserError(f"wandb must be one of {', '.join(WANDB_MODES)}, got {self.wandb!r}")


def check_budget(hours: float | None) -> None:
    if hours is not None and (isinstance(hours, bool) or not isinstance(hours, (int, float)) or not hours > 0):
        raise UserError(f"--budget-gpu-hours must be a number of hours > 0, got {hours!r}")


@dataclass(frozen=True)
class RunSettings:
    """How this sweep was started (``run.json``): what ``resume`` needs besides the spec."""

    name: str
    budget: int  # the sweep's trials, every driver's
    wandb: str  # offline, online or disabled
    address: str | None = None
    max_concurrent: int | None = None
    quiet: bool = False
    gpus: str | None = None  # --gpus of the embedded Ray
    dashboard_host: str | None = None
    workdir: str = field(default_factory=os.getcwd)  # where program: scripts are resolved and run
    # WANDB_DIR of scripts and W&B-style functions: the user's, else the working directory, as
    # wandb.agent sets it (their runs are linked into the trial dirs)
    wandb_dir: str = field(default_factory=lambda: os.environ.get("WANDB_DIR") or os.getcwd())
    function: str | None = None  # the name of raysweep.run's function: resume needs it passed again
    seed_drawn: bool = False  # the spec's seed was drawn for this sweep (neither the file nor --seed fixed one)
    stopped: str | None = None  # why a stopper ended the sweep (W&B's words for the first failures), if one did
    agents: int = 1  # drivers that added trials to it (a second raysweep.run of its name joins it)
    budget_gpu_hours: float | None = None  # what it may spend (GPU-hours; worker-hours on CPUs); None: no limit
    plan: dict | None = None  # search/plan.py's Plan of its latest driver, beside what it spent (show, report)
    segment_budget: int | None = None  # the trials of the latest driver's Tune experiment (None: budget)
    retry_failed: bool = False  # resume --retry-failed (not saved)
    exit_at_once: bool = True  # a second Ctrl-C ends the process (the CLI) or raises KeyboardInterrupt (not saved)

    def to_json(self) -> dict[str, Any]:
        saved = {k: v for k, v in asdict(self).items() if k not in ("retry_failed", "exit_at_once")}
        return {"format": RUN_DIR_FORMAT, **saved}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSettings:
        return cls(**{k: v for k, v in data.items() if k in {f.name for f in fields(cls)}})
