"""What every DDP train loop needs, as plain functions: ``from raysweep import ddp``.

A loop written with these runs unchanged on 1 worker (no process group: plain single-process
training), in any plain ``torch.distributed`` group (DDP + sampler by hand: raysweep's warm
DDP workers, the tests), and on N Ray Train workers (``prepare_model`` /
``prepare_data_loader`` over the group Ray Train set up).

The rules it keeps: seed = base seed + rank; each epoch every sample is seen exactly once
across workers, so steps per epoch shrink to 1/N; gradients are all-reduced once per
optimizer step, not per micro-batch; ``samples_per_sec`` is the whole group's throughput;
checkpoints hold model, optimizer, epoch and every rank's RNG state.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import math
import os
import random
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, Dataset, DistributedSampler

from raysweep import trial
from raysweep.env import LOCAL_RANK
from raysweep.trial import TrialContext

__all__ = [
    "accumulate",
    "autocast",
    "config_from_dict",
    "effective_batch",
    "load_checkpoint",
    "lr_at",
    "make_loader",
    "prepare_model",
    "report_epoch",
    "scaled_lr",
    "set_epoch",
    "setup",
    "sync_grads",
    "throughput",
    "to_device",
    "unwrap",
]

# --- config ----------------------------------------------------------------------------------


def config_from_dict(cls: type, config: Mapping[str, Any] | None, where: str = "") -> Any:
    """Build a loop's dataclass config from the (nested) dict the trial passes.

    Nested dataclasses and lists of them are filled from nested dicts, each starting from
    its default. A key the dataclass lacks is a ``ValueError`` naming every such key at once
    (a misspelt swept parameter would otherwise be silently ignored).
    """
    problems: list[str] = []
    out = _build(cls(), dict(config or {}), where, problems)
    if problems:
        raise ValueError(f"{cls.__name__}: " + "; ".join(problems))
    return out


def _build(default: Any, given: Mapping[str, Any], where: str, problems: list[str]) -> Any:
    names = [f.name for f in dataclasses.fields(default)]
    values: dict[str, Any] = {}
    for key, value in given.items():
        path = f"{where}{key}"
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" (did you mean {where}{close[0]}?)" if close else ""
            problems.append(f"unknown config key {path!r}{hint}; valid keys here: {', '.join(names)}")
            continue
        current = getattr(default, key)
        if dataclasses.is_dataclass(current) and isinstance(value, Mapping):
            value = _build(current, value, f"{path}.", problems)
        elif isinstance(current, list) and current and dataclasses.is_dataclass(current[0]) and isinstance(value, list):
            value = [
                _build(current[min(i, len(current) - 1)], v, f"{path}.{i}.", problems) if isinstance(v, Mapping) else v
                for i, v in enumerate(value)
            ]
        values[key] = value
    return dataclasses.replace(default, **values)


# --- setup -----------------------------------------------------------------------------------


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def setup(seed: int) -> TrialContext:
    """Rank, world size and device of this worker, with every RNG seeded to ``seed + rank``.

    Under a plain ``torch.distributed`` group (no Ray) rank and world size come from the group.
    """
    ctx = trial.get_context()
    if dist.is_available() and dist.is_initialized() and trial.current().group_from_torch:
        rank, world = dist.get_rank(), dist.get_world_size()
        # raysweep's own ranks know their local rank; a group raysweep did not make (a loop
        # under torchrun) has it in the environment
        local = ctx.local_rank if ctx.world_size == world else int(os.environ.get(LOCAL_RANK, rank))
        ctx = dataclasses.replace(ctx, rank=rank, local_rank=local, world_size=world)
    _seed_all(seed + ctx.rank)
    return ctx


def _seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def effective_batch(batch_size: int, grad_accum: int, world_size: int, verbose: bool = False) -> int:
    """Samples per optimizer step over the whole group; printed once by rank 0 if ``verbose``."""
    total = batch_size * world_size * grad_accum
    if verbose and (not _distributed() or dist.get_rank() == 0):
        print(f"effective batch {total} = batch_size {batch_size} x {world_size} workers x grad_accum {grad_accum}")
    return total


def scaled_lr(lr: float, effective: int, base_batch: int | None) -> float:
    """The linear scaling rule: ``lr * effective / base_batch``; ``lr`` unchanged when base is None."""
    if base_batch is None:
        return lr
    if base_batch <= 0:
        raise ValueError(f"base_batch must be > 0, got {base_batch}")
    return lr * effective / base_batch


def lr_at(step: int, lr: float, warmup_steps: int = 0, total_steps: int | None = None, min_ratio: float = 0.1) -> float:
    """Learning rate for optimizer step ``step`` (0-based).

    Linear warmup from ``lr / warmup_steps`` to ``lr`` over the first ``warmup_steps`` (a large
    scaled lr diverges from random init otherwise), then constant, or a cosine decay to
    ``min_ratio * lr`` at ``total_steps`` when that is given.
    """
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if total_steps is None or total_steps <= warmup_steps:
        return lr
    progress = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))
    return lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


# --- model and data --------------------------------------------------------------------------


def prepare_model(model: nn.Module, ctx: TrialContext) -> nn.Module:
    """Move the model to the worker's device and wrap it in DDP when there are 2+ workers."""
    return trial.current().prepare_model(model, lambda m: _to_device_in_ddp(m, ctx))


def _to_device_in_ddp(model: nn.Module, ctx: TrialContext) -> nn.Module:
    model = model.to(ctx.device)
    if _distributed():
        ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    return model


def unwrap(model: nn.Module) -> nn.Module:
    """The bare model inside a DDP wrapper (for eval, saving and loading)."""
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


def make_loader(
    dataset: Dataset, batch_size: int, shuffle: bool = True, seed: int = 0, drop_last: bool = False
) -> DataLoader:
    """A loader over this worker's shard of ``dataset``, yielding ``batch_size`` samples a step.

    With N workers a ``DistributedSampler`` (seeded with the *base* seed, the same on every
    rank) gives each worker a disjoint 1/N of the samples, so each sample is seen once per
    epoch across the group. One worker takes the same path with a single replica. Call
    ``set_epoch`` before each epoch to reshuffle.

    Batches are fetched with one list index (``dataset[[i, j, ...]]``), which a
    ``TensorDataset`` supports, instead of collating samples one by one.
    """
    world = dist.get_world_size() if _distributed() else 1
    rank = dist.get_rank() if _distributed() else 0
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=shuffle, seed=seed)
    loader = DataLoader(dataset, sampler=BatchSampler(sampler, batch_size, drop_last), batch_size=None)
    return trial.current().prepare_loader(loader)


def set_epoch(loader: DataLoader, epoch: int) -> None:
    """Reshuffle for ``epoch``: the same permutation on every rank, a different one per epoch."""
    loader.sampler.sampler.set_epoch(epoch)  # our BatchSampler wraps the DistributedSampler


def to_device(batch: Any, device: torch.device) -> Any:
    """Move a tensor or a tuple of tensors to ``device`` (a no-op when it is already there)."""
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(b, device) for b in batch)
    return batch.to(device, non_blocking=True) if isinstance(batch, torch.Tensor) else batch


def sync_grads(
    model: nn.Module, micro_step: int, grad_accum: int, last: bool = False
) -> contextlib.AbstractContextManager:
    """Context for one micro-batch's backward: no all-reduce except on the step's last micro-batch.

    ``micro_step`` counts from 0 within the epoch; ``last`` forces a sync (an epoch's short tail).
    """
    if isinstance(model, nn.parallel.DistributedDataParallel) and not last and (micro_step + 1) % grad_accum:
        return model.no_sync()
    return contextlib.nullcontext()


def accumulate(loader: Iterable[Any], model: nn.Module, grad_accum: int) -> Iterator[tuple[Any, float, bool]]:
    """An epoch's micro-batches as ``(batch, loss_scale, step)``, for gradient accumulation.

    In the loop body: backward ``loss * loss_scale``, then step the optimizer when ``step``. DDP
    all-reduces only on a step's last micro-batch. Each step averages its own micro-batches: the
    epoch's short last group (e.g. 5 micro-batches with ``grad_accum`` 2) divides by its own size,
    not by ``grad_accum``, so its step is not under-weighted.
    """
    n_micro = len(loader)  # type: ignore[arg-type]
    for micro, batch in enumerate(loader):
        first = micro - micro % grad_accum
        size = min(grad_accum, n_micro - first)
        step = micro == first + size - 1
        with sync_grads(model, micro, grad_accum, last=step):
            yield batch, 1.0 / size, step


def autocast(device: torch.device, cpu_bf16: bool = False) -> contextlib.AbstractContextManager:
    """bf16 autocast on CUDA devices that support it; on CPU only if ``cpu_bf16`` (fp32 is the default)."""
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.autocast("cuda", dtype=torch.bfloat16)
    if device.type == "cpu" and cpu_bf16:
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def throughput(local_samples: int, seconds: float) -> float:
    """Samples/sec of the whole worker group: all samples over the slowest worker's time.

    Every rank gets the same value (raysweep averages metrics over ranks).
    """
    if _distributed():
        t = torch.tensor([float(local_samples), -seconds], dtype=torch.float64)
        totals = t.clone()
        dist.all_reduce(totals, op=dist.ReduceOp.SUM)
        dist.all_reduce(t, op=dist.ReduceOp.MIN)  # min of -seconds = max seconds
        local_samples, seconds = int(totals[0].item()), -t[1].item()
    return local_samples / max(seconds, 1e-9)


# --- checkpoints -----------------------------------------------------------------------------

CHECKPOINT_FILE = "checkpoint.pt"


def _rng_state() -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def _set_rng_state(state: Mapping[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def report_epoch(
    metrics: Mapping[str, Any],
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    epoch: int,
    checkpoint_every: int = 1,
    last_epoch: int | None = None,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Report one epoch (every rank calls this once per epoch), with a checkpoint when due.

    A checkpoint is written every ``checkpoint_every`` epochs and at ``last_epoch``. Every rank
    joins the RNG-state gather; only rank 0 writes the directory and hands it to
    ``raysweep.report``, which copies it before returning.
    """
    due = checkpoint_every > 0 and (epoch % checkpoint_every == 0 or epoch == last_epoch)
    if not due:
        trial.report(metrics)
        return
    rng = [_rng_state()]
    rank = 0
    if _distributed():  # every rank resumes with its own stream, not rank 0's
        rank = dist.get_rank()
        rng = [None] * dist.get_world_size()
        dist.all_gather_object(rng, _rng_state())
    if rank != 0:
        trial.report(metrics)
        return
    state = {
        "model": unwrap(model).state_dict(),
        "optimizer": optimizer.state_dict(),
        "epoch": epoch,
        "rng": rng,
        "extra": dict(extra or {}),
    }
    with tempfile.TemporaryDirectory(prefix="raysweep_ddp_") as d:
        torch.save(state, os.path.join(d, CHECKPOINT_FILE))
        trial.report(metrics, checkpoint=d)


def load_checkpoint(
    model: nn.Module, optimizer: torch.optim.Optimizer | None = None, seed: int | None = None
) -> tuple[int, dict[str, Any]]:
    """Restore the trial's last checkpoint, if any; return ``(epoch done, extra)``, ``(0, {})`` if none.

    This rank gets its own saved RNG state back; if the world size changed since, its RNGs are
    reseeded from ``seed + rank + epoch`` instead (when ``seed`` is given).
    """
    ckpt = trial.get_checkpoint()
    if ckpt is None:
        return 0, {}
    with ckpt.as_directory() as d:
        path = os.path.join(d, CHECKPOINT_FILE)
        if not os.path.exists(path):
            raise FileNotFoundError(f"the trial's checkpoint has no {CHECKPOINT_FILE} (written by another loop?)")
        state = torch.load(path, map_location="cpu", weights_only=False)
    unwrap(model).load_state_dict(state["model"])
    if optimizer is not None:
        optimizer.load_state_dict(state["optimizer"])
    rank = dist.get_rank() if _distributed() else 0
    world = dist.get_world_size() if _distributed() else 1
    if len(state["rng"]) == world:
        _set_rng_state(state["rng"][rank])
    elif seed is not None:
        _seed_all(seed + rank + state["epoch"])
    return state["epoch"], state["extra"]
