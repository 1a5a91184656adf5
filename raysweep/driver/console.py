"""The driver's side of a trial's output (``trial/console.py``): the marked lines Ray streams from
the workers, shown on the console with the trial's id in front and kept in driver.log; every other
line a worker prints stays in Ray's log files, as before."""

from __future__ import annotations

import logging
import sys
from typing import Any

from raysweep.private_api import stream_worker_output
from raysweep.trial.console import unmark

log = logging.getLogger("raysweep.trials")


class TrialOutput:
    def __init__(self, quiet: bool):
        self.quiet = quiet

    def __call__(self, batch: dict[str, Any]) -> None:
        sink = sys.stderr if batch.get("is_err") else sys.stdout
        for line in batch.get("lines", []):
            found = unmark(line)
            if found is None:
                continue
            trial_id, text = found
            log.info("[%s] %s", trial_id, text)
            if not self.quiet:
                sink.write(f"[{trial_id}] {text}\n")
        sink.flush()


def show_trial_output(quiet: bool) -> None:
    """From now on, trials' marked lines reach this console (``ray.init`` ran with ``log_to_driver``)."""
    stream_worker_output(TrialOutput(quiet))
