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
from raysweep.values import HOUR


@dataclass(frozen=True)
class Plan:
    """A sweep's cost before it runs (``search/plan.py`` makes it), kept in run.json beside what
    the sweep spent."""

    trials: int
    sizes: dict[int, float]  # world size -> its share of the trials
    max_reports: int | None  # a trial's reports when nothing stops it (None: the spec does not say)
    reports_per_trial: float | None  # expected, under the sweep's early stopping
    rungs: list[tuple[int, float]]  # (rung, share of the trials that reach it)
    worker_reports: float | None  # trials x size x reports: what the sweep spends, in reports of one worker
    epoch_seconds: float | None  # one report's seconds, as estimated
    hours: float | None  # GPU-hours (worker-hours on CPUs)
    unit: str
    grows: bool = False  # raysweep.grow: ``sizes`` are the shares of its reports at each size

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["sizes"] = {str(k): v for k, v in self.sizes.items()}
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan | None:
        """The plan run.json holds; None for one an older raysweep wrote without every field."""
        names = {f.name for f in fields(cls)} - {"grows"}
        if not names <= set(data):
            return None
        names |= {"grows"} & set(data)
        sizes = {int(k): v for k, v in data["sizes"].items()}
        return cls(**{k: data[k] for k in names} | {"sizes": sizes, "rungs": [tuple(r) for r in data["rungs"]]})

    def lines(self, slots: int | None = None) -> list[str]:
        """The plan in words, one line each (the banner prints them, ``validate --plan`` too)."""
        sizes = ", ".join(f"{size} ({share:.0%})" for size, share in sorted(self.sizes.items()))
        out = [
            f"plan: {self.trials} trials growing at promotions, their reports at num_gpus {sizes} "
            "(each report charged its full seconds at every size: no speedup counted)"
            if self.grows
            else f"plan: {self.trials} trials of num_gpus {sizes}"
        ]
        if self.max_reports is None:
            out.append(
                "plan: a trial's reports are unknown: set raysweep.scheduler.max_t or an epochs value "
                "(base_config or a parameter) for its cost"
            )
            return out
        stop = ", ".join(f"{share:.0%} reach {rung}" for rung, share in self.rungs)
        out.append(
            f"plan: {self.reports_per_trial:.3g} reports per trial of at most {self.max_reports}"
            + (f" (early stopping: {stop})" if self.rungs else "")
            + f"; {self.worker_reports:.4g} worker-reports"
        )
        if self.hours is None:
            out.append(
                "plan: its cost in hours needs one report's seconds: --epoch-seconds S (raysweep.budget.epoch_seconds)"
            )
            return out
        wall = f"; about {self.hours / slots * HOUR:.0f} s of wall time on {slots} slots" if slots else ""
        out.append(f"plan: expected {self.hours:.4g} {self.unit} at {self.epoch_seconds:g} s a report{wall}")
        return out


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
    plan: Plan | None = None  # its latest driver's plan, beside what it spent (show, report)
    segment_budget: int | None = None  # the trials of the latest driver's Tune experiment (None: budget)
    storage: str | None = None  # the --storage URI the run dir lives under (None: a local path, the run dir itself)
    warm_start: tuple[str, ...] = ()  # run dirs whose finished trials the search was told first (run --warm-start)
    retry_failed: bool = False  # resume --retry-failed (not saved)
    exit_at_once: bool = True  # a second Ctrl-C ends the process (the CLI) or raises KeyboardInterrupt (not saved)

    format: int = RUN_DIR_FORMAT  # of the run dir (files.RUN_DIR_FORMAT); a file without one: 0

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k not in ("retry_failed", "exit_at_once")}
        return out | {"plan": self.plan.to_json() if self.plan else None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSettings:
        known = {k: v for k, v in data.items() if k in {f.name for f in fields(cls)}}
        plan = Plan.from_json(known["plan"]) if known.get("plan") else None
        return cls(**known | {"format": data.get("format", 0), "plan": plan})


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
