"""What ``wandb agent`` gives a ``program:`` script, as raysweep gives it to every rank: the trial's
values in the config file WANDB_SWEEP_PARAM_PATH names (and ``${args_json_file}``), the sweep's
variables, and the W&B runs its ranks logged linked into the trial's dir."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from raysweep import private_api
from raysweep.env import (
    WANDB_DIR,
    WANDB_ENTITY,
    WANDB_MODE,
    WANDB_PROJECT,
    WANDB_RESUME,
    WANDB_RUN_GROUP,
    WANDB_RUN_ID,
    WANDB_SWEEP_ID,
    WANDB_SWEEP_PARAM_PATH,
)
from raysweep.trial.job import WandbSetup
from raysweep.values import plain


def write_wandb_config(trial_dir: Path, trial_id: str, params: Mapping[str, Any]) -> Path:
    """The YAML config ``wandb.init`` reads, as under ``wandb agent``."""
    sweep_dir = trial_dir / "wandb" / "sweep-raysweep"
    sweep_dir.mkdir(parents=True, exist_ok=True)
    yaml_path = sweep_dir / f"config-{trial_id}.yaml"
    private_api.save_config_file(str(yaml_path), {k: {"value": plain(v)} for k, v in params.items()})
    return yaml_path


def write_param_files(trial_dir: Path, trial_id: str, params: Mapping[str, Any]) -> tuple[Path, Path]:
    """A script's: the config ``wandb.init`` reads and the ``${args_json_file}`` beside it."""
    yaml_path = write_wandb_config(trial_dir, trial_id, params)
    json_path = yaml_path.with_suffix(".json")
    json_path.write_text(json.dumps({k: plain(v) for k, v in params.items()}))
    return yaml_path, json_path


def wandb_variables(launch: WandbSetup, trial_id: str, rank: int) -> dict[str, str | None]:
    """What ``wandb agent`` sets for a run of a sweep (None: unset): ``wandb.init`` reads the trial's
    values from the file WANDB_SWEEP_PARAM_PATH names. Rank 0's run is the trial's W&B run; other
    ranks that call ``wandb.init`` get runs of their own in the group. WANDB_SWEEP_ID names only
    a sweep W&B created: with none, the run is no sweep's, as outside ``wandb agent``."""
    env: dict[str, str | None] = {
        WANDB_SWEEP_PARAM_PATH: launch.param_file,
        WANDB_RESUME: "allow",  # a restarted trial continues its W&B run
        WANDB_RUN_GROUP: launch.group,
        WANDB_SWEEP_ID: launch.sweep_id,  # what wandb.run.sweep_id reads, as under wandb agent
        WANDB_PROJECT: launch.project,
        WANDB_DIR: launch.wandb_dir,  # as wandb.agent sets it; the run is linked into the trial dir
        WANDB_MODE: launch.wandb_mode,
        WANDB_RUN_ID: trial_id if rank == 0 else None,
    }
    if launch.entity:
        env[WANDB_ENTITY] = launch.entity
    return env


def link_wandb_runs(trial_dir: str | os.PathLike, wandb_dir: str, run_ids: set[str], run_dirs: set[str]) -> None:
    """Link a trial's W&B runs (``run_dirs``, and those of ``run_ids`` under WANDB_DIR, where
    wandb.agent's runs live) into ``<trial dir>/wandb``, where ``show``, ``publish`` and the
    report look for them."""
    found = set(run_dirs)
    for run_id in run_ids:
        found |= {str(p) for p in Path(wandb_dir, "wandb").glob(f"*run-*-{run_id}") if p.is_dir()}
    target = Path(trial_dir) / "wandb"
    for run_dir in sorted(found):
        link = target / Path(run_dir).name
        if Path(run_dir).resolve().parent == target.resolve() or link.exists() or link.is_symlink():
            continue  # already there (WANDB_DIR is the trial dir), or linked by an earlier attempt
        target.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path(run_dir).resolve(), target_is_directory=True)


def run_dirs_logged(path: Path) -> set[str]:
    """The W&B run dirs a rank's script logged from (the hook notes each run's once)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return set()
    return {entry["run_dir"] for entry in map(json.loads, filter(None, lines)) if "run_dir" in entry}
