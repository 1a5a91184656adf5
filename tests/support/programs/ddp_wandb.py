"""A script written for ``torchrun`` + ``wandb agent``, run unchanged by raysweep's tests.

The process group comes from torchrun's environment, the hyperparameters from ``wandb.config``
(every rank calls ``wandb.init``), metrics go to ``wandb.log`` on rank 0. It all-reduces the
learning rate each rank sees, so rank 0 can log proof that every rank got the trial's config.
"""

import argparse
import sys
import time

import torch
import torch.distributed as dist
import wandb

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=-1.0)  # defaults a sweep must override
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--num_gpus", type=int, default=1)
parser.add_argument("--fail", type=str, default="no")
parser.add_argument("--hang_at", type=int, default=0)  # from this epoch on, log nothing (watchdog tests)
args = parser.parse_args()

dist.init_process_group("gloo")  # MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE from the environment
rank, world = dist.get_rank(), dist.get_world_size()
run = wandb.init(config={"lr": -1.0, "epochs": 3})  # the sweep's values override these defaults
lr_seen = torch.tensor([float(wandb.config.lr)])
dist.all_reduce(lr_seen)  # the sum over ranks: world * lr when every rank got the config

for epoch in range(1, int(wandb.config.epochs) + 1):
    time.sleep(args.sleep)
    loss = torch.tensor([(args.lr - 0.3) ** 2 + 1.0 / epoch])
    dist.all_reduce(loss)
    if args.fail == "yes" and epoch == 2:
        raise SystemExit("ddp_wandb: planned failure at epoch 2")
    if args.hang_at and epoch >= args.hang_at:
        print(f"ddp_wandb: stuck at epoch {epoch}", file=sys.stderr, flush=True)
        time.sleep(3600)
    if rank == 0:
        wandb.log({"train/step_loss": loss.item() / world})  # no metric: merged into the next report
        wandb.log({"score": loss.item() / world, "epoch": epoch, "lr_sum": lr_seen.item(), "world_size": world})
run.finish()
dist.destroy_process_group()
