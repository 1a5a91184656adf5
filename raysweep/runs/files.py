"""The run dir's files, read and written without Ray: what ``show``, ``report`` and a resumed
driver read back of a sweep.

``<storage>/<name>/`` holds ``spec.json`` (the resolved spec), ``run.json`` (the command's
settings), ``trials.jsonl`` (one row per trial, a journal), the Optuna journal for bayes, and a
dir per trial with its ``result.json`` (one line per report), checkpoints, W&B offline run and,
for a trial the watchdog ended, ``watchdog.txt``. Tune's own experiment state sits beside them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from raysweep.spec import SweepSpec

# What this raysweep writes and resumes. Tune pickles the searcher, scheduler and callbacks into
# a run dir under their module paths: a raysweep whose classes moved cannot resume it, so a
# change of those (or of the files' meaning) takes the next number. Run dirs without one are 0.
RUN_DIR_FORMAT = 1
SPEC_FILE = "spec.json"  # the resolved spec (SweepSpec.to_json)
SETTINGS_FILE = "run.json"  # how the sweep was started (runs/run_settings.py: RunSettings)
# Not *.json (nor the W&B sweep's file): Tune copies a run dir's top-level .json files into its
# staging dir on restore and syncs them back later, which would overwrite them with stale copies.
TRIALS_FILE = "trials.jsonl"
RESULTS_FILE = "result.json"  # a trial's reports, one JSON line each (Tune's name)
OPTUNA_JOURNAL = "optuna.journal"
WATCHDOG_FILE = "watchdog.txt"  # why the watchdog ended a trial, in its dir
WANDB_SWEEP_FILE = "wandb_sweep.txt"  # the W&B sweep's id and URL, as JSON (not *.json: see TRIALS_FILE)


# Keys Tune adds to every result itself: the rest are what the loop reported.
TUNE_KEYS = frozenset(
    {
        "training_iteration",
        "trial_id",
        "timestamp",
        "date",
        "time_since_restore",
        "iterations_since_restore",
        "time_this_iter_s",
        "time_total_s",
        "pid",
        "hostname",
        "node_ip",
        "done",
        "checkpoint_dir_name",
        "config",
        "should_checkpoint",
    }
)


def read_spec(run_dir: Path) -> SweepSpec:
    return SweepSpec.from_json(json.loads((Path(run_dir) / SPEC_FILE).read_text()))


def write_json(path: Path, data: Any) -> None:
    """Write atomically: a reader (or a killed driver) never sees half a file."""
    replace_text(path, json.dumps(data, indent=1, default=str))


def replace_text(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_trials(path: Path) -> list[dict[str, Any]]:
    """The rows of a run dir's trials file as JSON: each trial's last line, in the order trials
    first appeared. raysweep reads them typed (``rows.read_rows``); this is the file's own form."""
    if not path.exists():
        return []
    rows: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # blank, or the line a killed driver was writing
        rows[row["trial_id"]] = row
    return list(rows.values())


def in_run_dir(run_dir: str | os.PathLike, trial_dir: str | os.PathLike) -> Path:
    """A trial's dir as a reader finds it: where its row says, or, where that is not here (a run
    dir on a URI storage, pulled into a local copy; a run dir moved), the same name in ``run_dir``."""
    named = Path(trial_dir)
    return named if named.is_dir() else Path(run_dir) / named.name


def read_results(trial_dir: str | os.PathLike | None, run_dir: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """A trial's reports from its ``result.json``, oldest first (none for an unknown dir)."""
    if not trial_dir:
        return []
    path = (in_run_dir(run_dir, trial_dir) if run_dir is not None else Path(trial_dir)) / RESULTS_FILE
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a line being written while the sweep runs
            continue
    return out


def read_explanation(trial_dir: str | os.PathLike) -> str | None:
    """The watchdog's explanation of a hung trial, if it ended one."""
    path = Path(trial_dir) / WATCHDOG_FILE
    return path.read_text().strip() if path.exists() else None
