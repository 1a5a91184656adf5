"""A loop that really uses the GPU raysweep gives it, for tests/gpu/test_gpu.py (CUDA only).

It reports what it found: its device and ``CUDA_VISIBLE_DEVICES``, one NCCL all-reduce's
result, whether ``raysweep.ddp.autocast`` ran the forward pass in bf16, and the CUDA memory its
process held when the trial started (on a warm worker: what earlier trials left behind). With
``oom_at`` equal to the trial's ``x`` it asks for twice the GPU's memory.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

import raysweep
from raysweep import ddp
from raysweep.trial.ports import free_port


def train(config: dict) -> None:
    ctx = raysweep.get_context()
    assert ctx.device.type == "cuda", f"the trial's device is {ctx.device}, not a GPU"
    mib = 2**20
    allocated, reserved = torch.cuda.memory_allocated(ctx.device) / mib, torch.cuda.memory_reserved(ctx.device) / mib
    free, total = torch.cuda.mem_get_info(ctx.device)  # the whole device: NCCL's buffers, other processes
    own_group = not dist.is_initialized()  # a 1-worker trial has none: NCCL with world size 1
    if own_group:
        dist.init_process_group(
            "nccl", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1, device_id=ctx.device
        )
    try:
        if "barrier_dir" in config:
            wait_for_peers(Path(config["barrier_dir"]), int(config["barrier"]), f"{config['x']}.{ctx.rank}")
        summed = torch.full((4,), float(ctx.rank + 1), device=ctx.device)
        dist.all_reduce(summed)
        model = ddp.prepare_model(nn.Linear(1024, 1024), ctx)
        held = torch.empty(int(config.get("hold_mib", 256)) * mib, dtype=torch.uint8, device=ctx.device)
        with ddp.autocast(ctx.device):
            out = model(torch.randn(512, 1024, device=ctx.device))
        if "oom_at" in config and config["oom_at"] == config.get("x"):
            total = torch.cuda.get_device_properties(ctx.device).total_memory
            torch.empty(2 * total, dtype=torch.uint8, device=ctx.device)
        torch.cuda.synchronize(ctx.device)
        raysweep.report(
            {
                "score": float(summed[0]),
                "bf16": float(out.dtype == torch.bfloat16),
                "held_mib": held.numel() / mib,
                "device_index": ctx.device.index,
                "visible": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
                "allocated_at_start_mib": allocated,
                "reserved_at_start_mib": reserved,
                "pid": os.getpid(),
                "device_used_mib": (total - free) / mib,
                "own_group": float(own_group),
                "group_size": float(dist.get_world_size()),
            }
        )
    finally:
        if own_group:
            dist.destroy_process_group()


def wait_for_peers(barrier_dir: Path, count: int, me: str, timeout_s: float = 300) -> None:
    """Until ``count`` ranks have arrived (they provably run at the same time)."""
    (barrier_dir / me).touch()
    deadline = time.time() + timeout_s
    while len(list(barrier_dir.iterdir())) < count:
        if time.time() > deadline:
            raise RuntimeError(f"gpu_loop: fewer than {count} ranks ran at the same time")
        time.sleep(0.1)
