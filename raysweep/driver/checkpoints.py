"""On resume, each trial Tune runs again goes on from the newest of its checkpoints that exists on
storage, or starts over when none does: never failed for a checkpoint that is gone.

Tune's saved state names each trial's latest checkpoint, and Tune deletes a trial's third-newest
checkpoint as it saves a new one (``CheckpointConfig(num_to_keep=2)``), then saves its state. A
driver killed between the two left a state naming a deleted checkpoint, and Tune failed that trial
on resume ("does not exist on storage anymore"). A state saved before the trial's last reports also
named an older checkpoint than the newest one on storage: those epochs were trained again.

A checkpoint counts when a report in the trial's ``result.json`` names it (``checkpoint_dir_name``):
it was then whole on storage. Tune's record of a trial's checkpoints is private: it is set through
``private_api.restart_from``, once, before Tune starts any trial (the first ``on_step_begin``).
"""

from __future__ import annotations

import json
import logging
from pathlib import PurePosixPath
from typing import Any

import pyarrow.fs
from ray.tune import Callback
from ray.tune.experiment import Trial

from raysweep import private_api
from raysweep.runs.files import RESULTS_FILE
from raysweep.runs.storage import read_text

log = logging.getLogger("raysweep")


def newest_stored(trial_dir: str, fs: Any = None) -> tuple[str, dict[str, Any]] | None:
    """The newest checkpoint of a trial that is on storage (``fs``: its pyarrow filesystem, local
    by default), with the report that saved it."""
    fs = fs or pyarrow.fs.LocalFileSystem()
    reports = []
    for line in read_text(fs, f"{trial_dir}/{RESULTS_FILE}").splitlines():
        try:
            reports.append(json.loads(line))
        except json.JSONDecodeError:  # the line a killed driver was writing
            continue
    for report in reversed(reports):
        name = report.get("checkpoint_dir_name")
        if name and fs.get_file_info(f"{trial_dir}/{name}").type == pyarrow.fs.FileType.Directory:
            return f"{trial_dir}/{name}", report
    return None


class StoredCheckpoints(Callback):
    def __init__(self) -> None:
        self.done = False
        self.moved: dict[str, str | None] = {}  # trial id -> the checkpoint it goes on from (None: from scratch)

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        if self.done:
            return
        self.done = True
        for trial in trials:
            if trial.status in (Trial.TERMINATED, Trial.ERROR):  # ended (an errored one retried is PENDING)
                continue
            named = trial.checkpoint.path if trial.checkpoint is not None else None
            stored = newest_stored(trial.path, private_api.trial_filesystem(trial))
            if stored is None and named is None:
                continue  # it never saved one: it starts over, as Tune starts it
            if stored is not None and named is not None and PurePosixPath(named) == PurePosixPath(stored[0]):
                continue
            if stored is None:
                log.warning(
                    "trial %s: its checkpoint %s is gone and none other is stored; it starts over", trial, named
                )
            else:
                log.info("trial %s: goes on from %s (Tune's state named %s)", trial, stored[0], named)
            private_api.restart_from(trial, *(stored or (None, {})))
            self.moved[trial.trial_id] = stored[0] if stored else None
