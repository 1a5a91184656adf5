"""The digits loop (``train_loops/digits.py``) paced as an accelerator would be: each epoch also
waits ``epoch_s / world`` seconds before its report, a compute time that halves with each doubling,
so that on 2 shared cores the driver's estimates see a trial run faster at a larger size. What it
learns is the digits loop's own."""

from __future__ import annotations

import time

import raysweep
from raysweep import ddp
from train_loops import digits


def train(config: dict) -> None:
    config = dict(config)
    wait = config.pop("epoch_s") / raysweep.get_context().world_size
    report = ddp.report_epoch

    def paced(*args, **kwargs):
        time.sleep(wait)
        return report(*args, **kwargs)

    ddp.report_epoch = paced
    try:
        digits.train(config)
    finally:
        ddp.report_epoch = report  # a warm worker runs the next trial in this process
