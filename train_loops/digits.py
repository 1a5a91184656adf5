"""An MLP on scikit-learn's bundled 8x8 handwritten digits: a real sweep in seconds.

``sklearn.datasets.load_digits`` ships with scikit-learn (1797 images), so no download is
needed. A fixed 80/20 split (seeded by ``split_seed``, not by the trial seed, so every trial
is scored on the same validation images).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

import raysweep
from raysweep import ddp


@dataclass
class Config:
    hidden: int = 128  # MLP hidden width
    depth: int = 2  # hidden layers
    dropout: float = 0.1
    epochs: int = 10
    batch_size: int = 32  # per worker per micro-step
    grad_accum: int = 1
    lr: float = 3e-3  # Adam lr (before linear scaling)
    base_batch: int | None = None  # linear scaling rule: lr * effective batch / base_batch; None: off
    warmup_steps: int = 10
    weight_decay: float = 0.0
    val_fraction: float = 0.2
    split_seed: int = 0  # the train/val split, the same for every trial
    cpu_bf16: bool = False  # bf16 autocast on CPU (CUDA uses bf16 when supported)
    checkpoint_every: int = 1  # epochs
    seed: int = 0  # base seed; each worker uses seed + rank


def load_split(val_fraction: float, split_seed: int) -> tuple[TensorDataset, tuple[torch.Tensor, torch.Tensor]]:
    """Train set and validation tensors; pixels scaled from 0..16 to 0..1."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.tensor(data.data, dtype=torch.float32) / 16.0
    y = torch.tensor(data.target, dtype=torch.long)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(split_seed))
    n_val = int(len(y) * val_fraction)
    val, tr = perm[:n_val], perm[n_val:]
    return TensorDataset(x[tr], y[tr]), (x[val], y[val])


def make_model(cfg: Config) -> nn.Module:
    layers: list[nn.Module] = []
    width = 64
    for _ in range(cfg.depth):
        layers += [nn.Linear(width, cfg.hidden), nn.ReLU(), nn.Dropout(cfg.dropout)]
        width = cfg.hidden
    return nn.Sequential(*layers, nn.Linear(width, 10))


def train(config: dict) -> None:
    cfg: Config = ddp.config_from_dict(Config, config)
    ctx = ddp.setup(cfg.seed)
    train_set, (x_val, y_val) = load_split(cfg.val_fraction, cfg.split_seed)
    x_val, y_val = x_val.to(ctx.device), y_val.to(ctx.device)
    eff = ddp.effective_batch(cfg.batch_size, cfg.grad_accum, ctx.world_size, verbose=True)
    lr = ddp.scaled_lr(cfg.lr, eff, cfg.base_batch)

    model = make_model(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=cfg.weight_decay)
    start_epoch, _ = ddp.load_checkpoint(model, optimizer, seed=cfg.seed)
    model = ddp.prepare_model(model, ctx)
    loader = ddp.make_loader(train_set, cfg.batch_size, shuffle=True, seed=cfg.seed)
    steps_per_epoch = -(-len(loader) // cfg.grad_accum)
    step = start_epoch * steps_per_epoch

    for epoch in range(start_epoch + 1, cfg.epochs + 1):
        ddp.set_epoch(loader, epoch)
        t0, n_samples, loss_sum, n_micro = time.perf_counter(), 0, 0.0, len(loader)
        for batch, loss_scale, step_now in ddp.accumulate(loader, model, cfg.grad_accum):
            x, y = ddp.to_device(batch, ctx.device)
            with ddp.autocast(ctx.device, cfg.cpu_bf16):
                logits = model(x)
            loss = F.cross_entropy(logits.float(), y)
            (loss * loss_scale).backward()
            loss_sum += loss.item()
            n_samples += len(y)
            if step_now:
                for group in optimizer.param_groups:
                    group["lr"] = ddp.lr_at(step, lr, cfg.warmup_steps)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
        seconds = time.perf_counter() - t0

        model.eval()
        with torch.no_grad(), ddp.autocast(ctx.device, cfg.cpu_bf16):
            logits = ddp.unwrap(model)(x_val).float()
        model.train()
        metrics = {
            "epoch": epoch,
            "train/loss": loss_sum / max(n_micro, 1),
            "val/loss": F.cross_entropy(logits, y_val).item(),
            "val/accuracy": (logits.argmax(-1) == y_val).float().mean().item(),
            "samples_per_sec": ddp.throughput(n_samples, seconds),
        }
        ddp.report_epoch(
            metrics,
            model=model,
            optimizer=optimizer,
            epoch=epoch,
            checkpoint_every=cfg.checkpoint_every,
            last_epoch=cfg.epochs,
        )


if __name__ == "__main__":
    for m in raysweep.run_local(train, {}):
        print(m)
