"""The four kinds of entry point of tests/end_to_end/test_matrix*.py, each recording on every rank
the config it got and torchrun's variables as it read them (``seen.rank<R>.json`` in its trial's
dir), and reporting ``loss`` every epoch: a train loop and a raysweep-style function (both
checkpoint every epoch and go on from it), a W&B-style ``main()``; the ``program:`` script is
``program.py`` beside this file."""

from __future__ import annotations

import json
import os
import tempfile
import time

import raysweep

TORCHRUN = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")


def record(config: dict, trial_dir: str, rank: int) -> None:
    """What this rank got: its config, and torchrun's variables."""
    seen = {"config": config, "env": {k: os.environ.get(k) for k in TORCHRUN}}
    with open(os.path.join(trial_dir, f"seen.rank{rank}.json"), "w") as f:
        json.dump(seen, f, sort_keys=True, default=str)


def x_of(config: dict) -> float:
    """The swept value: ``x`` of a flat space, or of the nested block ``opt``."""
    return float(config["x"] if "x" in config else config["opt"]["x"])


def loss(config: dict, epoch: int) -> float:
    return (x_of(config) - 0.3) ** 2 + 1.0 / epoch


def train(config: dict) -> None:
    """A train loop (``raysweep.train_loop``), and a raysweep-style function: ``train(config)``."""
    ctx = raysweep.get_context()
    record(config, ctx.trial_dir, ctx.rank)
    start = 0
    checkpoint = raysweep.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d, open(os.path.join(d, "epoch.json")) as f:
            start = json.load(f)["epoch"]
    for epoch in range(start + 1, int(config.get("epochs", 2)) + 1):
        time.sleep(float(config.get("sleep", 0.2)))
        metrics = {"loss": loss(config, epoch), "epoch": epoch}
        if ctx.is_main:
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "epoch.json"), "w") as f:
                    json.dump({"epoch": epoch}, f)
                raysweep.report(metrics, checkpoint=d)
        else:
            raysweep.report(metrics)


function = train  # the same body, given to raysweep.run instead of named in the file


def wandb_main() -> None:
    """``wandb.agent(sweep_id, function=main)``'s ``main``: the config from ``wandb.config``."""
    import wandb

    run = wandb.init()
    config = dict(wandb.config)
    ctx = raysweep.get_context()
    record(config, ctx.trial_dir, ctx.rank)
    for epoch in range(1, int(config.get("epochs", 2)) + 1):
        time.sleep(float(config.get("sleep", 0.2)))
        wandb.log({"loss": loss(config, epoch), "epoch": epoch})
    run.finish()


FUNCTIONS = {"function": function, "wandb_function": wandb_main}
