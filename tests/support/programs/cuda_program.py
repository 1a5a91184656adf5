"""A ``torchrun``-style script on CUDA (tests/gpu/test_gpu.py): its GPU is cuda:LOCAL_RANK of the
``CUDA_VISIBLE_DEVICES`` it was given, its NCCL group comes from the environment."""

import argparse
import os

import torch
import torch.distributed as dist
import wandb

parser = argparse.ArgumentParser()
parser.add_argument("--x", type=float, default=0.0)
parser.add_argument("--num_gpus", type=int, default=1)
args = parser.parse_args()

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
summed = torch.ones(1, device="cuda") * (args.x + dist.get_rank())
dist.all_reduce(summed)
if dist.get_rank() == 0:
    run = wandb.init()
    wandb.log({"score": summed.item(), "world_size": dist.get_world_size(), "on_cuda": float(summed.is_cuda)})
    run.finish()
dist.destroy_process_group()
