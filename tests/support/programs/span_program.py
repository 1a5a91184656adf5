"""A torchrun-style script across nodes (tests/trial/test_multinode.py): its process group comes from
the environment raysweep gives every rank; each rank records that environment and the sum of an
all-reduce (each adds rank + 1); rank 0 logs the sum as the sweep's metric."""

import argparse
import json
import os

import torch
import torch.distributed as dist
import wandb

parser = argparse.ArgumentParser()
parser.add_argument("--x", type=float, default=0.0)
parser.add_argument("--record_dir", default=".")
parser.add_argument("--num_gpus", type=int, default=1)
args = parser.parse_args()

dist.init_process_group("gloo")
summed = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(summed)
keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK", "MASTER_ADDR")
line = {key.lower(): os.environ.get(key) for key in keys} | {
    "x": args.x,
    "sum": summed.item(),
    "visible": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
    "gloo_ifname": os.environ.get("GLOO_SOCKET_IFNAME", ""),
}
with open(os.path.join(args.record_dir, f"{args.x}.rank{dist.get_rank()}.jsonl"), "a") as f:
    f.write(json.dumps(line) + "\n")
if dist.get_rank() == 0:
    run = wandb.init()
    wandb.log({"score": summed.item()})
    run.finish()
dist.destroy_process_group()
