"""Which GPU a rank uses, and a sentence instead of torch's when it cannot use it.

Ray names a GPU by its entry in the node's ``CUDA_VISIBLE_DEVICES`` (an index, a UUID or a MIG
id). A process Ray gives GPUs sees only those; a warm DDP worker asks Ray for none (the
borrowing trial's placement group holds them), so it sets its own visibility to the one GPU
it serves. It has to: Ray up to 2.55 sets ``CUDA_VISIBLE_DEVICES=''`` in every actor that asks
for no GPU, which would hide every GPU from it.
"""

from __future__ import annotations

import glob
import os
from typing import Any

from raysweep.env import CUDA_VISIBLE_DEVICES, GPU_DEVICE_FILES


def visible() -> list[str]:
    """This process's ``CUDA_VISIBLE_DEVICES`` entries ([] when unset or empty)."""
    return [d.strip() for d in os.environ.get(CUDA_VISIBLE_DEVICES, "").split(",") if d.strip()]


def pin(gpu: str, pinned: str | None) -> str:
    """Make ``gpu`` this process's one CUDA device, ``cuda:0``, before CUDA starts here.

    ``pinned``: the GPU this process already serves. CUDA reads ``CUDA_VISIBLE_DEVICES`` once,
    so a process keeps one GPU (and one CUDA context) for its whole life; the pool lends a
    worker only to trials of its GPU.
    """
    if pinned is not None and pinned != gpu:
        raise RuntimeError(
            f"this warm worker serves GPU {pinned!r} and cannot take GPU {gpu!r} (one CUDA context each)"
        )
    os.environ[CUDA_VISIBLE_DEVICES] = gpu
    return "cuda:0"


def assigned(gpu_ids: list[Any]) -> str:
    """The device of the first GPU Ray gave this process (its index in ``CUDA_VISIBLE_DEVICES``,
    where Ray put it), or ``cpu`` without one."""
    if not gpu_ids:
        return "cpu"
    ids, shown = [str(g) for g in gpu_ids], visible()
    return f"cuda:{shown.index(ids[0]) if ids[0] in shown else 0}"


def machine_has_gpus() -> bool:
    """NVIDIA's device files exist: GPUs Ray advertises here are real (else a fake-GPU cluster)."""
    # A test points GPU_DEVICE_FILES at files of its own, so this check runs on a CPU machine with
    # fake GPUs as it does on a GPU node whose torch has no CUDA.
    return bool(glob.glob(os.environ.get(GPU_DEVICE_FILES, "/dev/nvidia[0-9]*")))


def check_usable(device: str) -> None:
    """Raise a sentence naming the GPU and ``CUDA_VISIBLE_DEVICES`` if this process cannot use
    ``device``; silent where the machine has no GPUs (Ray advertising ones that do not exist)."""
    if not device.startswith("cuda") or not machine_has_gpus():
        return
    import torch

    index, shown = int(device.partition(":")[2] or 0), visible()
    gpu = shown[index] if index < len(shown) else str(index)
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if index < count:
        torch.cuda.set_device(index)
        return
    raise RuntimeError(
        f"this rank was given GPU {gpu!r} as {device}, but CUDA here sees {count} device(s) "
        f"({CUDA_VISIBLE_DEVICES}={os.environ.get(CUDA_VISIBLE_DEVICES)!r}, torch {torch.__version__}"
        f"{'' if torch.backends.cuda.is_built() else ', a build without CUDA'}): the rank cannot use its GPU"
    )
