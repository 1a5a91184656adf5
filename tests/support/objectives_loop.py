"""A loop for sweeps of W&B's new format (tests/driver/test_driver.py): it takes any config,
reports ``score`` (lower is better with more workers, as a larger batch might be) and its
``workers`` every epoch,
and its epochs take less time with more workers (the work is shared), so a 2-worker trial
finishes sooner than a 1-worker one of the same epochs."""

from __future__ import annotations

import time

import raysweep


def train(config: dict) -> None:
    ctx = raysweep.get_context()
    epochs = int(config.get("epochs", 2))
    for epoch in range(1, epochs + 1):
        time.sleep(1.0 / ctx.world_size)
        score = (float(config.get("x", 0.5)) - 0.3) ** 2 - 0.1 * ctx.world_size + 1.0 / epoch
        raysweep.report({"score": score, "workers": ctx.world_size})
