"""The ``program:`` script of tests/end_to_end/test_matrix*.py, as W&B's docs write one: its config from
``wandb.config`` on every rank (as under ``wandb agent`` + torchrun), ``loss`` logged by rank 0."""

import os
import sys
import time

import wandb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from entries import loss, record  # noqa: E402

import raysweep  # noqa: E402

run = wandb.init()
config = dict(wandb.config)
rank = int(os.environ["RANK"])
record(config, raysweep.get_context().trial_dir, rank)
for epoch in range(1, int(config.get("epochs", 2)) + 1):
    time.sleep(float(config.get("sleep", 0.2)))
    if rank == 0:
        wandb.log({"loss": loss(config, epoch), "epoch": epoch})
run.finish()
