"""Tiny loops the engine tests drive: they report fast and say who ran them."""

from __future__ import annotations

import json
import os
import tempfile
import time

import raysweep


def echo(config: dict) -> None:
    """Report ``score`` = (x - 0.3)^2 + 1/epoch and the reporting rank, ``epochs`` times."""
    ctx = raysweep.get_context()
    start = 0
    ckpt = raysweep.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            start = json.loads(open(os.path.join(d, "state.json")).read())["epoch"]
    for epoch in range(start + 1, config.get("epochs", 3) + 1):
        time.sleep(config.get("sleep", 0.0))
        if config.get("fail_at") == epoch:
            raise RuntimeError(f"planned failure at epoch {epoch}")
        metrics = {
            "score": (config.get("x", 0.0) - 0.3) ** 2 + 1.0 / epoch,
            "rank": ctx.rank,
            "world_size": ctx.world_size,
            "epoch": epoch,
            "pid": os.getpid(),
        }
        if ctx.is_main:
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump({"epoch": epoch}, f)
                raysweep.report(metrics, checkpoint=d)
        else:
            raysweep.report(metrics)
