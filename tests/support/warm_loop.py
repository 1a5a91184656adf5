"""A loop that records which process ran each rank of each trial (tests/trial/test_warm_workers.py).

Every rank writes ``<trial_dir>/pid.rank<r>`` with its process id, ``thread.rank<r>`` with the
thread that ran the loop, ``threads.rank<r>`` with torch's intra-op threads and ``dynamo.rank<r>``
with whether its process had begun importing torch._dynamo, then runs the smoke loop;
``fail_rank`` raises on that rank at once, while the other ranks wait for it in a collective.
"""

from __future__ import annotations

import os
import sys
import threading

import torch
import torch.distributed as dist

import raysweep
from train_loops import smoke


def train(config: dict) -> None:
    config = dict(config)
    fail_rank = config.pop("fail_rank", None)
    ctx = raysweep.get_context()
    with open(os.path.join(ctx.trial_dir, f"pid.rank{ctx.rank}"), "w") as f:
        f.write(str(os.getpid()))
    with open(os.path.join(ctx.trial_dir, f"thread.rank{ctx.rank}"), "w") as f:
        f.write(str(threading.get_native_id()))
    with open(os.path.join(ctx.trial_dir, f"threads.rank{ctx.rank}"), "w") as f:
        f.write(str(torch.get_num_threads()))
    with open(os.path.join(ctx.trial_dir, f"dynamo.rank{ctx.rank}"), "w") as f:
        f.write(str("torch._dynamo" in sys.modules))
    if fail_rank == ctx.rank:
        raise ValueError(f"warm loop: planned failure on rank {ctx.rank}")
    if ctx.world_size > 1:
        dist.all_reduce(torch.ones(1))  # the trial's process group is live on every rank
    smoke.train(config)
