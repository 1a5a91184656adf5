"""A trivial, fast loop for tests and CI: no model, but every part of the trial protocol.

It calls ``raysweep.get_context``, reports every epoch on every rank, checkpoints a small JSON
every epoch and resumes from it (so a restarted trial continues its epochs), and can misbehave
on purpose: raise, diverge (NaN), hang, or report once too often on one rank. ``score`` falls with the epoch towards ``(x - 0.3) ** 2``, so sweeps over ``x`` have a
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
    fail_attempts: int | None = None  # ...only in this many attempts of the trial (None: every attempt)
    nan_at_epoch: int | None = None  # report score = NaN from this epoch on
    hang_at_epoch: int | None = None  # rank hang_rank sleeps forever at this epoch
    hang_rank: int = 0
    extra_report_rank: int | None = None  # this rank reports one extra time at the end
    collective: bool = False  # all-reduce a tensor every epoch, as DDP does (hang tests)
    seed: int = 0  # unused; here so a sweep's seed override is accepted like any loop's
    batch_size: int = 0  # unused but reported: a growing sweep hands each rank global / world
    checkpoint_every: int = 1  # epochs between checkpoints: the reports between carry none


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
        if cfg.fail_at_epoch == epoch and _count_attempt(ctx, cfg.fail_attempts):
            raise RuntimeError(f"smoke loop: planned failure at epoch {epoch} (fail_at_epoch={cfg.fail_at_epoch})")
        if cfg.hang_at_epoch == epoch and ctx.rank == cfg.hang_rank:
            time.sleep(3600)
        if cfg.collective and ctx.world_size > 1:
            import torch
            import torch.distributed as dist

            dist.all_reduce(torch.ones(1))  # a rank that hangs above leaves the others waiting here
        diverged = cfg.nan_at_epoch is not None and epoch >= cfg.nan_at_epoch
        metrics = {
            "score": float("nan") if diverged else score(cfg.x, epoch),
            "epoch": epoch,
            "rank": ctx.rank,  # the scheduler sees the mean over ranks: (world_size - 1) / 2
            "world_size": ctx.world_size,
            "resumed_from": start,  # 0 on a fresh start, else the checkpoint's epoch
            "batch_size": cfg.batch_size,
            "samples_per_sec": 1.0 / max(time.perf_counter() - t0, 1e-9),
        }
        if ctx.is_main and epoch % cfg.checkpoint_every == 0:
            with tempfile.TemporaryDirectory(prefix="raysweep_smoke_") as d:
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump({"epoch": epoch, "x": cfg.x}, f)
                raysweep.report(metrics, checkpoint=d)
        else:
            raysweep.report(metrics)
    if cfg.extra_report_rank == ctx.rank:
        raysweep.report(metrics)


def _count_attempt(ctx: raysweep.TrialContext, fail_attempts: int | None) -> bool:
    """True while this trial has failed fewer than ``fail_attempts`` times (a marker file counts)."""
    if fail_attempts is None:
        return True
    marker = os.path.join(ctx.trial_dir, "smoke_failures")
    failed = os.path.getsize(marker) if os.path.exists(marker) else 0
    if failed >= fail_attempts:
        return False
    with open(marker, "a") as f:
        f.write("x")
    return True
