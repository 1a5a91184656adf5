"""A W&B sweep script, as W&B's docs write one: ``wandb.init()``, the run's config from
``wandb.config``, ``loss`` and ``accuracy`` logged each epoch. Under torchrun (or raysweep) every
rank runs it; rank 0 logs, and every rank writes the config it got to ``seen.<run>.rank<R>.json``
in its trial's dir under raysweep (else here)."""

import json
import os
import time

import wandb

run = wandb.init()
config = dict(wandb.config)
rank = int(os.environ.get("RANK", "0"))
seen = {"config": config, **{k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR")}}
try:
    import raysweep

    where = raysweep.get_context().trial_dir
except ImportError:
    where = "."
with open(os.path.join(where, f"seen.{run.id}.rank{rank}.json"), "w") as f:
    json.dump(seen, f)
x = float(config.get("x", 0.5))
for epoch in range(1, int(config.get("epochs", 2)) + 1):
    time.sleep(0.2)
    if rank == 0:
        wandb.log({"loss": (x - 0.3) ** 2 + 1.0 / epoch, "accuracy": 1.0 - x / (epoch + 1), "epoch": epoch})
run.finish()
