"""``raysweep publish``: an offline sweep's runs uploaded to W&B, on a W&B sweep page of their own.

The runs are synced with ``wandb sync`` (which skips what it synced before, and syncs a
resumed run's offline dirs, one per start of its driver, as one run). The W&B sweep is then
created with those runs attached, as ``wandb sweep -R RUN`` does; a second publish adds only
runs that are new to the same sweep, whose id the run dir keeps (``wandb_sweep.txt``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from raysweep import wandb_sweep
from raysweep.env import WANDB_SILENT
from raysweep.errors import UserError
from raysweep.runs.files import read_spec
from raysweep.runs.rows import read_rows
from raysweep.runs.run_settings import read_settings
from raysweep.runs.storage import push_back


def offline_runs(run_dir: Path) -> dict[str, list[Path]]:
    """The run dir's offline W&B runs: run id -> its dirs, oldest first (one per start)."""
    runs: dict[str, list[Path]] = {}
    for path in sorted(run_dir.glob("*/wandb/offline-run-*"), key=lambda p: p.name.split("-")[2]):
        if path.is_dir():
            runs.setdefault(path.name.split("-", 3)[3], []).append(path)
    return runs


def publish(run_dir: Path) -> int:
    """Sync ``run_dir``'s offline runs and attach them to its W&B sweep (created on first publish)."""
    spec, settings = read_spec(run_dir), read_settings(run_dir)
    sweep = wandb_sweep.load(run_dir)
    if settings.wandb == "online" and sweep is not None:
        print(f"sweep {settings.name} ran online: its runs joined W&B sweep {sweep.url} as they ran")
        return 0
    runs = offline_runs(run_dir)
    if settings.wandb == "online":  # W&B gave no sweep then: its runs are on W&B already
        ids = [row.trial_id for row in read_rows(run_dir) if row.start is not None]
    else:
        ids = list(runs)
    if not ids:
        raise UserError(f"{run_dir} holds no W&B runs to publish (the sweep ran with W&B {settings.wandb})")
    if not wandb_sweep.key_configured():
        raise UserError("publish uploads to W&B, and no W&B key is configured: run `wandb login` or set WANDB_API_KEY")
    try:
        default_entity = wandb_sweep.check_reachable()  # first: wandb sync waits minutes for a server that is down
        entity = spec.wandb.entity or default_entity
    except wandb_sweep.WandbUnavailable as e:
        raise UserError(f"{e}; nothing was uploaded") from None

    if runs:
        synced, failed = _sync(runs, spec.wandb.project_name, entity)
        if failed:
            print(f"raysweep: wandb sync failed; nothing was added to a sweep:\n{failed}", file=sys.stderr)
            return 1
        ids = [run_id for run_id in ids if run_id in synced]
        if not ids:
            print("raysweep: wandb synced none of the runs; nothing was added to a sweep", file=sys.stderr)
            return 1
    new = [run_id for run_id in ids if sweep is None or run_id not in sweep.runs]
    if sweep is not None and not new:
        print(f"nothing new to publish: W&B sweep {sweep.url} holds this sweep's {len(sweep.runs)} runs")
        return 0
    try:
        if sweep is None:
            sweep = replace(wandb_sweep.create(spec, prior_runs=ids), runs=tuple(ids))
        else:
            sweep = wandb_sweep.attach(sweep, spec, new)
    except wandb_sweep.WandbUnavailable as e:
        print(f"raysweep: W&B: {e}; the runs were synced, on no sweep page. Publish again to retry", file=sys.stderr)
        return 1
    wandb_sweep.save(run_dir, sweep)
    push_back(run_dir)  # a run dir on a URI storage: the sweep's page is its too, for the next publish or resume
    rows = read_rows(run_dir)
    ended = len(rows) >= settings.budget and all(row.ended for row in rows)
    wandb_sweep.set_state(sweep, wandb_sweep.FINISHED if ended else wandb_sweep.PAUSED)
    added = f"{len(ids)} runs" if len(new) == len(sweep.runs) else f"{len(new)} new runs ({len(sweep.runs)} in all)"
    print(f"published {added} to W&B sweep {sweep.url}")
    return 0


def _sync(runs: dict[str, list[Path]], project: str, entity: str) -> tuple[set[str], str | None]:
    """``wandb sync`` of every dir (it skips those synced before): the run ids it synced, and
    the last lines it printed if it failed.

    A driver killed mid-write (SIGKILL, a second Ctrl-C) leaves its offline dir cut short, and
    wandb then syncs none of its run's dirs: those runs are synced again one dir at a time,
    oldest first, and the dirs wandb cannot read are named.
    """
    command = [sys.executable, "-m", "wandb", "sync", "--project", project, "--entity", entity]
    env = os.environ | {WANDB_SILENT: "false"}
    dirs = [path for paths in runs.values() for path in paths]
    done = subprocess.run([*command, *map(str, dirs)], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        return set(), "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
    for path in [path for path in dirs if not _synced(path)]:
        subprocess.run([*command, str(path)], capture_output=True, text=True, env=env)
    unreadable = [path for path in dirs if not _synced(path)]
    if unreadable:
        print(
            f"W&B: wandb could not read {len(unreadable)} offline run dir(s), cut short by a driver that was killed; "
            "what each held is on W&B only where a later start of its trial logged it again:\n  "
            + "\n  ".join(map(str, unreadable)),
            file=sys.stderr,
        )
    return {run_id for run_id, paths in runs.items() if any(map(_synced, paths))}, None


def _synced(path: Path) -> bool:
    """wandb sync marks each offline dir it synced."""
    return any(path.glob("*.wandb.synced"))
