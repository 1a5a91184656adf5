"""A W&B ``program:`` script that keeps its own checkpoint in raysweep's trial checkpoint directory
(``RAYSWEEP_CHECKPOINT_DIR``), as a framework's ``output_dir`` would, and goes on from it when it
is there: each epoch it runs is appended to ``<record_dir>/x=<x>.jsonl`` by rank 0."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import wandb

parser = argparse.ArgumentParser()
parser.add_argument("--x", type=float)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--sleep", type=float, default=1.0)
parser.add_argument("--record_dir")
args = parser.parse_args()

state = Path(os.environ["RAYSWEEP_CHECKPOINT_DIR"]) / "state.json"
start = json.loads(state.read_text())["epoch"] if state.exists() else 0
rank = int(os.environ.get("RANK", "0"))
run = wandb.init()
for epoch in range(start + 1, args.epochs + 1):
    time.sleep(args.sleep)
    if rank == 0:
        with open(Path(args.record_dir) / f"x={args.x}.jsonl", "a") as f:
            f.write(json.dumps({"x": args.x, "epoch": epoch}) + "\n")
        state.write_text(json.dumps({"epoch": epoch}))  # saved, then logged: kept with this report
    wandb.log({"score": (args.x - 0.3) ** 2 + 1.0 / epoch, "epoch": epoch})
run.finish()
