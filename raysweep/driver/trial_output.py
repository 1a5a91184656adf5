"""The driver's side of a trial's output (``trial/output_marks.py``): the marked lines Ray streams from
the workers, shown on the console with the trial's id in front and kept in driver.log; every other
line a worker prints stays in Ray's log files, as before."""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any

from raysweep.private_api import stop_worker_output, stream_worker_output
from raysweep.trial.output_marks import END, unmark

log = logging.getLogger("raysweep.trials")


class TrialOutput:
    """Ray's handler of streamed worker output on the driver; ``wait`` lets a sweep's end show the
    lines still on their way (Ray streams them a moment after they are printed)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.ended: set[str] = set()  # trials whose output's end came
        self._changed = threading.Condition()

    def wait(self, trial_ids: set[str], timeout_s: float = 5.0) -> None:
        """Until the end of each of ``trial_ids``' output has been streamed here, or ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not trial_ids <= self.ended and time.monotonic() < deadline:
                self._changed.wait(deadline - time.monotonic())

    def close(self) -> None:
        """The sweep is over: its lines no longer reach this console (a later sweep of the process
        shows its own, once)."""
        stop_worker_output()

    def __call__(self, batch: dict[str, Any]) -> None:
        sink = sys.stderr if batch.get("is_err") else sys.stdout
        for line in batch.get("lines", []):
            found = unmark(line)
            if found is None:
                continue
            trial_id, text = found
            if text == END:
                with self._changed:
                    self.ended.add(trial_id)
                    self._changed.notify_all()
                continue
            log.info("[%s] %s", trial_id, text)
            if not self.quiet:
                sink.write(f"[{trial_id}] {text}\n")
        sink.flush()


def show_trial_output(quiet: bool) -> TrialOutput:
    """From now on, trials' marked lines reach this console (``ray.init`` ran with ``log_to_driver``)."""
    output = TrialOutput(quiet)
    stream_worker_output(output)
    return output
