"""The sweep's checkpoint policy (``raysweep.checkpoints``, after Determined's): checkpoints that
no decision can need are deleted from the storage as trials end, so a sweep of a thousand
fine-tuned models keeps its best few, not two per trial.

Deleted: every checkpoint of a trial the scheduler stopped (it never runs again), and of a
finished trial once ``keep_best_trials`` finished ones rank above it. Kept: every unfinished
trial's (a killed driver's ``resume`` goes on from them), a failed trial's (``resume
--retry-failed``), and the best finished ones'; every trial's with ``keep_best_trials: all``
(Tune's default). A ``TorchTrainer`` trial's Tune checkpoint names
its Ray Train checkpoint: both go.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pyarrow.fs
from ray.tune import Callback

from raysweep.private_api import trial_filesystem
from raysweep.runs.storage import open_path
from raysweep.runs.sweep_results import load_results
from raysweep.spec import SweepSpec
from raysweep.trial.torchtrainer_runner import POINTER
from raysweep.words import TrialStatus

log = logging.getLogger("raysweep")


class PruneCheckpoints(Callback):
    """Deletes, as each trial ends, the checkpoints the policy no longer keeps (after the monitor
    has written the trial's row: it is one of Tune's callbacks after it)."""

    def __init__(self, spec: SweepSpec, run_dir: Path, stopped_by_scheduler: set[str]):
        self.keep_best = spec.checkpoints.keep_best_trials
        self.run_dir = run_dir
        self.stopped_by_scheduler = stopped_by_scheduler  # the scheduler's set, filled as it stops trials
        self.pruned: set[str] = set()

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        if self.keep_best is None:  # "all": every trial keeps its checkpoints, as under Tune's default
            return
        for gone in self.unneeded(trials):
            try:
                prune(gone)
            except OSError as e:  # the storage went away for a while: the next end tries again
                log.warning("trial %s: deleting its checkpoints failed: %s", gone, e)
                continue
            self.pruned.add(gone.trial_id)

    def unneeded(self, trials: list) -> list[Any]:
        """The ended trials whose checkpoints the policy no longer keeps (not yet deleted)."""
        by_id = {t.trial_id: t for t in trials}
        ranked = [t for t in load_results(self.run_dir).trials if t.trial_id in by_id]
        finished = [t.trial_id for t in ranked if t.status == TrialStatus.DONE]
        kept = set(finished[: self.keep_best])
        ended = set(finished) | {t.trial_id for t in ranked if t.status == TrialStatus.STOPPED}
        gone = (ended & (set(finished) | self.stopped_by_scheduler)) - kept - self.pruned
        return [by_id[i] for i in sorted(gone)]


def prune(trial: Any) -> None:
    """Delete a trial's checkpoints from its storage (and the Ray Train ones they name)."""
    fs = trial_filesystem(trial)
    listed = fs.get_file_info(pyarrow.fs.FileSelector(trial.path, allow_not_found=True))
    for info in listed:
        if info.type != pyarrow.fs.FileType.Directory or not info.base_name.startswith("checkpoint_"):
            continue
        pointer = f"{info.path}/{POINTER}"
        if fs.get_file_info(pointer).type == pyarrow.fs.FileType.File:
            with fs.open_input_stream(pointer) as f:
                train_fs, train_path = open_path(json.loads(f.read())["path"])
            if train_fs.get_file_info(train_path).type == pyarrow.fs.FileType.Directory:
                train_fs.delete_dir(train_path)
        fs.delete_dir(info.path)
