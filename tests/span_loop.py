"""A loop that records where every rank of a trial ran (tests/test_multinode.py): per rank, one
JSON line in ``<record_dir>/<trial x>.rank<r>.jsonl`` with its rank, local rank, world size, Ray
node, the GPUs its process sees, and the sum of an all-reduce over every rank (each adds rank + 1).
It works as a train loop (``train``) and as a W&B-style function (``main``, reading wandb.config)."""

from __future__ import annotations

import json
import os
import time

import ray
import torch
import torch.distributed as dist

import raysweep


def record(config: dict) -> float:
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
    }
    with open(os.path.join(config["record_dir"], f"{config['x']}.rank{ctx.rank}.jsonl"), "a") as f:
        f.write(json.dumps(line) + "\n")
    return summed.item()


def train(config: dict) -> None:
    for epoch in range(1, int(config.get("epochs", 1)) + 1):
        summed = record(config)
        time.sleep(float(config.get("sleep", 0)))
        raysweep.report({"score": summed / epoch, "epoch": epoch})


def main() -> None:
    import wandb

    with wandb.init() as run:
        summed = record(dict(run.config))
        wandb.log({"score": summed})
