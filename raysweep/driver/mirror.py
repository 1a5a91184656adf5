"""A sweep on a URI storage (``runs/storage.py``): Tune is given the URI, and the run dir's own files
(spec, settings, trials, the Optuna journal, W&B runs, the log), written in the driver's local
copy, are pushed to it every few seconds while the sweep runs and once more as the driver ends.
A killed driver's storage lags its local copy by at most one period."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from raysweep.runs import storage
from raysweep.runs.run_settings import RunSettings

log = logging.getLogger("raysweep")

PUSH_PERIOD_S = 5.0


def remote_of(run_dir: Path, settings: RunSettings) -> storage.Remote | None:
    """The run dir's URI on its storage; None for a run dir on a local path."""
    if settings.storage is None:
        return None
    return storage.Remote(settings.storage).join(run_dir.name)


def tune_storage(run_dir: Path, settings: RunSettings) -> str:
    """``RunConfig.storage_path`` for the sweep: the URI, or the local run dir's parent."""
    return settings.storage if settings.storage is not None else str(run_dir.parent)


def experiment_path(run_dir: Path, settings: RunSettings) -> str:
    """Where Tune's experiment of the sweep is, for ``Tuner.restore`` and ``can_restore``."""
    remote = remote_of(run_dir, settings)
    return remote.uri if remote is not None else str(run_dir)


class Mirror:
    """Pushes the local copy to the storage while the sweep runs (a context manager; nothing for a local run dir)."""

    def __init__(self, run_dir: Path, settings: RunSettings, period_s: float = PUSH_PERIOD_S):
        remote = remote_of(run_dir, settings)
        self.pusher = storage.Pusher(run_dir, remote) if remote is not None else None
        self.period_s = period_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def push(self) -> None:
        if self.pusher is None:
            return
        try:
            self.pusher.push()
        except OSError as e:  # the storage went away for a while: the next push tries again
            log.warning("pushing the run dir to %s failed: %s", self.pusher.run, e)

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self.push()

    def __enter__(self) -> Mirror:
        if self.pusher is not None:
            self.push()
            self._thread = threading.Thread(target=self._loop, name="raysweep-mirror", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.push()
