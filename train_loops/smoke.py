"""A trivial, fast loop for tests and CI: no model, but every part of the trial protocol.

It calls ``raysweep.get_context``, reports every epoch on every rank, checkpoints a small JSON
every epoch and resumes from it (so a restarted trial continues its epochs), and can fail on
purpose. ``score`` falls with the epoch towards ``(x - 0.3) ** 2``, so sweeps over ``x`` have a
known best value (x = 0.3).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass

import raysweep
from raysweep import ddp


@dataclass
class Config:
    epochs: int = 3
    x: float = 0.0  # the swept value; the best is 0.3
    sleep: float = 0.0  # seconds per epoch, to make trials overlap
    fail_at_epoch: int | None = None  # raise RuntimeError at this epoch (failure tests)
    seed: int = 0  # unused; here so a sweep's seed override is accepted like any loop's


def score(x: float, epoch: int) -> float:
    """Decreases with ``epoch`` towards ``(x - 0.3) ** 2``."""
    return (x - 0.3) ** 2 + 1.0 / epoch


def train(config: dict) -> None:
    cfg: Config = ddp.config_from_dict(Config, config)
    ctx = raysweep.get_context()
    start = 0
    ckpt = raysweep.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d, open(os.path.join(d, "state.json")) as f:
            start = json.load(f)["epoch"]
    for epoch in range(start + 1, cfg.epochs + 1):
        t0 = time.perf_counter()
        time.sleep(cfg.sleep)
        if cfg.fail_at_epoch == epoch:
            raise RuntimeError(f"smoke loop: planned failure at epoch {epoch} (fail_at_epoch={cfg.fail_at_epoch})")
        metrics = {
            "score": score(cfg.x, epoch),
            "epoch": epoch,
            "rank": ctx.rank,  # the scheduler sees the mean over ranks: (world_size - 1) / 2
            "world_size": ctx.world_size,
            "samples_per_sec": 1.0 / max(time.perf_counter() - t0, 1e-9),
        }
        if ctx.is_main:
            with tempfile.TemporaryDirectory(prefix="raysweep_smoke_") as d:
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump({"epoch": epoch, "x": cfg.x}, f)
                raysweep.report(metrics, checkpoint=d)
        else:
            raysweep.report(metrics)
