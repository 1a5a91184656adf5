"""A loop that records where every rank of a trial ran (tests/trial/test_multinode.py): per rank, one
JSON line in ``<record_dir>/<trial x>.rank<r>.jsonl`` with its rank, local rank, world size, Ray
node, the GPUs its process sees, and the sum of an all-reduce over every rank (each adds rank + 1).
It works as a train loop (``train``) and as a W&B-style function (``main``, reading wandb.config).
``hang_rank``: that rank stops answering at epoch 2, its peers stuck in the all-reduce."""

from __future__ import annotations

import json
import os
import tempfile
import time

import ray
import torch
import torch.distributed as dist

import raysweep


def record(config: dict, epoch: int = 1) -> float:
    ctx = raysweep.get_context()
    summed = torch.tensor([float(ctx.rank + 1)])
    dist.all_reduce(summed)
    line = {
        "x": config["x"],
        "rank": ctx.rank,
        "local_rank": ctx.local_rank,
        "world_size": ctx.world_size,
        "node_id": ray.get_runtime_context().get_node_id(),
        "address": ray.util.get_node_ip_address(),
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        "gloo_ifname": os.environ.get("GLOO_SOCKET_IFNAME", ""),
        "sum": summed.item(),
        "epoch": epoch,
        "pid": os.getpid(),
    }
    with open(os.path.join(config["record_dir"], f"{config['x']}.rank{ctx.rank}.jsonl"), "a") as f:
        f.write(json.dumps(line) + "\n")
    return summed.item()


def train(config: dict) -> None:
    """One record and one report per epoch, each with a checkpoint; a restart goes on from it."""
    start = 0
    checkpoint = raysweep.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d, open(os.path.join(d, "epoch")) as f:
            start = int(f.read())
    for epoch in range(start + 1, int(config.get("epochs", 1)) + 1):
        if epoch == 2 and raysweep.get_context().rank == config.get("hang_rank"):
            time.sleep(3600)  # its peers wait for it in the next all-reduce
        summed = record(config, epoch)
        time.sleep(float(config.get("sleep", 0)))
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "epoch"), "w") as f:
                f.write(str(epoch))
            raysweep.report({"score": summed / epoch, "epoch": epoch}, checkpoint=d)


def main() -> None:
    import wandb

    with wandb.init() as run:
        summed = record(dict(run.config))
        wandb.log({"score": summed})
