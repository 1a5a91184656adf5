"""The benchmark's train loops: the repo's loops, plus an event log every system can write.

Each process appends JSON lines (start, every report, end; with its rank and a wall-clock
time) to the file named by ``config["bench_events"]``, so busy worker-seconds and
time-to-target are measured the same way under raysweep, Ray Train, plain Tune and torchrun.
The key is popped before the real loop sees its config.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import raysweep
from raysweep import trial


def _rank_world() -> tuple[int, int]:
    if trial.backend() == "torchtrainer":
        import ray.train

        ctx = ray.train.get_context()
        return ctx.get_world_rank(), ctx.get_world_size()
    if trial.backend() == "warm":
        ctx = trial.get_context()
        return ctx.rank, ctx.world_size
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def _log(path: str | None, kind: str, **fields: Any) -> None:
    if not path:
        return
    import torch

    rank, world = _rank_world()
    threads = torch.get_num_threads()  # the intra-op threads this rank computes with now
    line = json.dumps(
        {"t": time.time(), "kind": kind, "rank": rank, "world": world, "pid": os.getpid(), "threads": threads, **fields}
    )
    with open(path, "a") as f:  # one short write per line: appends from several processes stay whole
        f.write(line + "\n")


def _run_logged(train_fn: Any, config: dict) -> None:
    config = dict(config)
    events = config.pop("bench_events", None)
    tag = config.pop("bench_tag", None)
    real_report = trial.report

    def report(metrics: Any, checkpoint: Any = None) -> None:
        _log(events, "report", tag=tag, metrics={k: v for k, v in dict(metrics).items() if isinstance(v, int | float)})
        real_report(metrics, checkpoint=checkpoint)

    trial.report = report  # the loops call raysweep.trial.report (directly or via raysweep.ddp)
    raysweep.report = report
    _log(events, "start", tag=tag)
    try:
        train_fn(config)
    finally:
        trial.report = real_report
        raysweep.report = real_report
        _log(events, "end", tag=tag)


def smoke(config: dict) -> None:
    """train_loops.smoke: 3 reports, no compute (per-trial overhead)."""
    from train_loops.smoke import train

    _run_logged(train, config)


def transformer(config: dict) -> None:
    """train_loops.loop_transformer: real, short trials (throughput, search, DDP scaling)."""
    from train_loops.loop_transformer import train

    _run_logged(train, config)


def scale(config: dict) -> None:
    """The scale part's trial: ``reports`` reports, ``trial_s`` seconds in all, no checkpoint."""
    reports = int(config.get("reports", 3))
    for epoch in range(1, reports + 1):
        time.sleep(config["trial_s"] / reports)
        raysweep.report({"score": (config["x"] % 97) / 97 + 1.0 / epoch, "epoch": epoch})


def paced(config: dict) -> None:
    """The fill's trial (``bench.fill``): each epoch waits ``epoch_s / world`` (an accelerator's
    compute, halving with each doubling), reports ``x``'s curve, and checkpoints; a restarted trial
    goes on from its checkpoint."""
    import tempfile

    ctx, start = raysweep.get_context(), 0
    checkpoint = raysweep.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d, open(os.path.join(d, "epoch")) as f:
            start = int(f.read())
    for epoch in range(start + 1, int(config["epochs"]) + 1):
        time.sleep(config["epoch_s"] / ctx.world_size)
        metrics = {"score": config["x"] * (1 - 1 / (epoch + 1)), "epoch": float(epoch), "at": time.time()}
        if not ctx.is_main:
            raysweep.report(metrics)
            continue
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "epoch"), "w") as f:
                f.write(str(epoch))
            raysweep.report(metrics, checkpoint=d)
