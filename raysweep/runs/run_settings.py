"""``run.json``, typed: how a sweep was started (``RunSettings``), what ``resume``, ``show``,
``publish`` and the report read back besides the spec."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from raysweep.env import WANDB_DIR
from raysweep.errors import UserError
from raysweep.runs.files import RUN_DIR_FORMAT, SETTINGS_FILE, write_json


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
    wandb_dir: str = field(default_factory=lambda: os.environ.get(WANDB_DIR) or os.getcwd())
    function: str | None = None  # the name of raysweep.run's function: resume needs it passed again
    seed_drawn: bool = False  # the spec's seed was drawn for this sweep (neither the file nor --seed fixed one)
    stopped: str | None = None  # why a stopper ended the sweep (W&B's words for the first failures), if one did
    agents: int = 1  # drivers that added trials to it (a second raysweep.run of its name joins it)
    budget_gpu_hours: float | None = None  # what it may spend (GPU-hours; worker-hours on CPUs); None: no limit
    plan: dict | None = None  # search/plan.py's Plan of its latest driver, beside what it spent (show, report)
    segment_budget: int | None = None  # the trials of the latest driver's Tune experiment (None: budget)
    warm_start: tuple[str, ...] = ()  # run dirs whose finished trials the search was told first (run --warm-start)
    retry_failed: bool = False  # resume --retry-failed (not saved)
    exit_at_once: bool = True  # a second Ctrl-C ends the process (the CLI) or raises KeyboardInterrupt (not saved)

    format: int = RUN_DIR_FORMAT  # of the run dir (files.RUN_DIR_FORMAT); a file without one: 0

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k not in ("retry_failed", "exit_at_once")}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSettings:
        known = {k: v for k, v in data.items() if k in {f.name for f in fields(cls)}}
        return cls(**known | {"format": data.get("format", 0)})


def write_settings(run_dir: Path | str, settings: RunSettings) -> None:
    """run.json, its one writer: the driver rewrites it as the sweep goes (its plan, W&B gone
    offline, how it stopped)."""
    write_json(Path(run_dir) / SETTINGS_FILE, settings.to_json())


def read_settings(run_dir: Path | str) -> RunSettings:
    return RunSettings.from_json(json.loads((Path(run_dir) / SETTINGS_FILE).read_text()))


def check_format(run_dir: Path) -> None:
    """Refuse, in one sentence, to resume a run dir another raysweep's format wrote."""
    found = read_settings(run_dir).format
    if found != RUN_DIR_FORMAT:
        raise UserError(
            f"{run_dir} holds a sweep in run-dir format {found}, and this raysweep resumes format {RUN_DIR_FORMAT}: "
            "resume it with the raysweep that started it (show and report still read it)"
        )
