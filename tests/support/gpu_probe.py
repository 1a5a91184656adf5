"""What a rank sees of its GPUs, for the fake-GPU placement tests (tests/trial/test_gpu_placement.py).

Run as a ``train_loop`` (``train``) or as a ``program:`` script (``python gpu_probe.py``). It never
touches CUDA: it writes what raysweep and Ray gave it (rank, LOCAL_RANK, device,
CUDA_VISIBLE_DEVICES, its process id) to ``<barrier_dir>/<trial>.rank<r>.json``, waits until ``barrier`` trials
have written theirs, every rank of them (so they provably ran at the same time, and no rank is
ended before it wrote), then reports once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # raysweep, when run as a script

import raysweep  # noqa: E402


def probe(barrier_dir: str, barrier: int, timeout_s: float = 180, hold_s: float = 0.0, script: bool = False) -> None:
    ctx = raysweep.get_context()
    trial = Path(ctx.trial_dir).name
    seen = {
        "trial": trial,
        "rank": ctx.rank,
        "world_size": ctx.world_size,
        "device": str(ctx.device),
        "local_rank": os.environ.get("LOCAL_RANK"),
        "script": script,  # a script's device is cuda:LOCAL_RANK; a loop's, the one raysweep pinned
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "pid": os.getpid(),
        "trial_dir": ctx.trial_dir,
    }
    out = Path(barrier_dir)
    (out / f"{trial}.rank{ctx.rank}.json").write_text(json.dumps(seen))
    deadline = time.time() + timeout_s
    while (
        len(list(out.glob("*.rank*.json"))) < barrier * ctx.world_size
    ):  # every rank: a program's rank 1 ends with rank 0
        if time.time() > deadline:
            raise RuntimeError(f"gpu_probe: fewer than {barrier} trials ran at the same time")
        time.sleep(0.2)
    time.sleep(hold_s)  # trials of several lengths end out of order
    raysweep.report({"score": 1.0})


def train(config: dict) -> None:
    probe(config["barrier_dir"], config["barrier"], config.get("barrier_timeout_s", 180), config.get("hold_s", 0.0))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--barrier_dir")
    parser.add_argument("--barrier", type=int)
    parser.add_argument("--x", type=float)
    parser.add_argument("--num_gpus", type=int)
    args = parser.parse_args()
    probe(args.barrier_dir, args.barrier, script=True)
