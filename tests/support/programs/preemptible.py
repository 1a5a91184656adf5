"""A W&B ``program:`` script that saves its state in the trial checkpoint directory
(``RAYSWEEP_CHECKPOINT_DIR``) every ``--checkpoint_every`` epochs, and, told by SIGTERM that its
node ends, at the end of the epoch it is in; then it exits. Rank 0 appends each epoch it ran, with
its node (the name tests/support/loopback.py gives it), to ``<record_dir>/x=<x>.jsonl``."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

import wandb

parser = argparse.ArgumentParser()
parser.add_argument("--x", type=float)
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--sleep", type=float, default=1.0)
parser.add_argument("--checkpoint_every", type=int, default=4)
parser.add_argument("--record_dir")
args, _ = parser.parse_known_args()  # num_gpus too

told = []
signal.signal(signal.SIGTERM, lambda signum, frame: told.append(time.time()))
state = Path(os.environ["RAYSWEEP_CHECKPOINT_DIR"]) / "state.json"
start = json.loads(state.read_text())["epoch"] if state.exists() else 0
rank = int(os.environ.get("RANK", "0"))
run = wandb.init()
for epoch in range(start + 1, args.epochs + 1):
    time.sleep(args.sleep)
    if rank == 0:
        record = {
            "x": f"{args.x},{os.environ['WORLD_SIZE']}",
            "epoch": epoch,
            "node": os.environ.get("LOOPBACK_NODE"),
            "t": time.time(),
            "told": bool(told),
        }
        with open(Path(args.record_dir) / f"x={args.x},n={os.environ['WORLD_SIZE']}.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")
        if epoch % args.checkpoint_every == 0 or told:
            state.write_text(json.dumps({"epoch": epoch}))
    wandb.log({"score": (args.x - 0.3) ** 2 + 1.0 / epoch, "epoch": epoch})
    if told:
        run.finish()
        sys.exit(0)
run.finish()
