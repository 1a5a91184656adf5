"""Each trial keeps its newest checkpoints, and an older one until the run dir's saved
experiment state names a newer one.

Tune's ``CheckpointConfig(num_to_keep=2)`` deletes a trial's third-newest checkpoint the moment
the trial writes a new one, while the experiment state in the run dir (staged every 10 s or
more and copied there in the background) may still name it. A driver SIGKILLed in that window
left a trial that ``resume`` could not restore ("does not exist on storage anymore"). So Tune
keeps every checkpoint, and ``KeepNewestCheckpoints`` deletes a trial's old ones only once a
state naming newer ones is in the run dir.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ray import tune

from raysweep.private_api import saved_experiment_state

KEEP = 2  # checkpoints per trial once the run dir's state names them


@dataclass(frozen=True)
class Staged:
    """One experiment state Tune staged: when, and how many checkpoints each trial had then."""

    at: float
    written: dict[str, int]


class KeepNewestCheckpoints(tune.Callback):
    """Deletes a trial's checkpoints older than its newest ``keep`` as of a staged state that has
    reached the run dir.

    Tune calls ``get_state`` as it stages each experiment state, and then copies the state to
    the run dir in the background. A state file in the run dir written after state k+1 was
    staged holds state k or a later one (a copy that began before k was staged would have to
    outlast Tune's whole save period, 10 s or more), so state k's checkpoints are safe to
    thin. At the sweep's end Tune has saved and copied its last state before it calls
    ``on_experiment_end``.
    """

    def __init__(self, run_dir: Path, keep: int = KEEP) -> None:
        self._run_dir = run_dir
        self._keep = keep
        self._written: dict[str, list[Any]] = {}  # trial id -> its checkpoints, oldest first
        self._deleted: dict[str, int] = {}  # trial id -> how many of its oldest are deleted
        self._staged: list[Staged] = []

    def on_checkpoint(self, iteration: int, trials: list[Any], trial: Any, checkpoint: Any, **info: Any) -> None:
        self._written.setdefault(trial.trial_id, []).append(checkpoint)

    def get_state(self) -> dict | None:
        self._staged.append(Staged(time.time(), {t: len(c) for t, c in self._written.items()}))
        self._thin(last_is_safe=False)
        return None  # nothing to restore: a resumed driver starts with the checkpoints it sees written

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        self._thin(last_is_safe=True)

    def _thin(self, *, last_is_safe: bool) -> None:
        saved = saved_experiment_state(self._run_dir)
        if saved is None:
            return
        saved_at = saved.stat().st_mtime
        reached = [k for k in range(len(self._staged)) if self._staged[k].at <= saved_at]
        safe = [k for k in reached if last_is_safe or k + 1 in reached]
        if not safe:
            return
        state = self._staged[safe[-1]]
        self._staged = self._staged[safe[-1] :]
        for trial_id, count in state.written.items():
            checkpoints = self._written[trial_id]
            for checkpoint in checkpoints[self._deleted.get(trial_id, 0) : count - self._keep]:
                _delete(checkpoint)
            self._deleted[trial_id] = max(self._deleted.get(trial_id, 0), count - self._keep)


def _delete(checkpoint: Any) -> None:
    try:
        checkpoint.filesystem.delete_dir(checkpoint.path)
    except (FileNotFoundError, OSError):
        pass  # gone already: nothing to keep
