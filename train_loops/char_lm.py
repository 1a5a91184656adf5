"""A tiny GPT-style character language model on the Python standard library's own source.

Every machine with Python has this text, so the loop needs no download: the top-level
``*.py`` files of the stdlib, in sorted order, concatenated up to ``max_chars`` characters (the
exact text, and so the losses, depend on the Python version). Characters outside ASCII map to
one token. The last ``val_fraction`` of the text is held out. Made for lr / batch_size /
num_gpus sweeps (``search_spaces/lr_sweep_multigpu.yaml``).
"""

from __future__ import annotations

import math
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

import raysweep
from raysweep import ddp

VOCAB = 128  # ASCII; every other character becomes token 0


@dataclass
class Config:
    max_chars: int = 200_000  # characters of stdlib source read (train + val)
    val_fraction: float = 0.1
    block_size: int = 64  # context length
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 64
    dropout: float = 0.0
    epochs: int = 3
    batch_size: int = 16  # sequences per worker per micro-step
    grad_accum: int = 1
    lr: float = 2e-3  # AdamW peak lr (before linear scaling)
    base_batch: int | None = None  # linear scaling rule: lr * effective batch / base_batch; None: off
    warmup_steps: int = 30
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    cpu_bf16: bool = False  # bf16 autocast on CPU (CUDA uses bf16 when supported)
    checkpoint_every: int = 1  # epochs
    seed: int = 0  # base seed; each worker uses seed + rank


def load_text(max_chars: int) -> str:
    """The stdlib's top-level ``.py`` files in sorted order, up to ``max_chars`` characters."""
    parts, total = [], 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        parts.append(text)
        total += len(text)
        if total >= max_chars:
            break
    return "".join(parts)[:max_chars]


def encode(text: str) -> torch.Tensor:
    data = torch.frombuffer(bytearray(text.encode("ascii", errors="replace")), dtype=torch.uint8).long()
    return torch.where(data < VOCAB, data, 0)


def windows(data: torch.Tensor, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Non-overlapping (input, next-char target) windows of ``block_size``."""
    n = (len(data) - 1) // block_size
    x = data[: n * block_size].view(n, block_size)
    y = data[1 : n * block_size + 1].view(n, block_size)
    return x, y


class Block(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        d = cfg.d_model
        self.n_head, self.dropout = cfg.n_head, cfg.dropout
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(cfg.dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.n_head, D // self.n_head).permute(2, 0, 3, 1, 4)
        h = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        x = x + self.proj(h.transpose(1, 2).reshape(B, T, D))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, cfg.d_model)
        self.pos = nn.Parameter(torch.randn(cfg.block_size, cfg.d_model) * 0.02)
        self.blocks = nn.Sequential(*(Block(cfg) for _ in range(cfg.n_layer)))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, VOCAB, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.head(self.ln_f(self.blocks(self.tok(idx) + self.pos[: idx.shape[1]])))


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, device: torch.device, cfg: Config) -> float:
    model.eval()
    total = 0.0
    for i in range(0, len(x), 256):
        with ddp.autocast(device, cfg.cpu_bf16):
            logits = model(x[i : i + 256].to(device))
        total += F.cross_entropy(
            logits.float().flatten(0, 1), y[i : i + 256].to(device).flatten(), reduction="sum"
        ).item()
    model.train()
    return total / y.numel()


def train(config: dict) -> None:
    cfg: Config = ddp.config_from_dict(Config, config)
    ctx = ddp.setup(cfg.seed)
    data = encode(load_text(cfg.max_chars))
    n_val = int(len(data) * cfg.val_fraction)
    train_set = TensorDataset(*windows(data[:-n_val], cfg.block_size))
    x_val, y_val = windows(data[-n_val:], cfg.block_size)
    eff = ddp.effective_batch(cfg.batch_size, cfg.grad_accum, ctx.world_size, verbose=True)
    lr = ddp.scaled_lr(cfg.lr, eff, cfg.base_batch)

    model = GPT(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.99))
    start_epoch, _ = ddp.load_checkpoint(model, optimizer, seed=cfg.seed)
    model = ddp.prepare_model(model, ctx)
    loader = ddp.make_loader(train_set, cfg.batch_size, shuffle=True, seed=cfg.seed)
    steps_per_epoch = math.ceil(len(loader) / cfg.grad_accum)
    step, total_steps = start_epoch * steps_per_epoch, cfg.epochs * steps_per_epoch

    for epoch in range(start_epoch + 1, cfg.epochs + 1):
        ddp.set_epoch(loader, epoch)
        t0, n_samples, loss_sum, n_micro = time.perf_counter(), 0, 0.0, len(loader)
        for batch, loss_scale, step_now in ddp.accumulate(loader, model, cfg.grad_accum):
            x, y = ddp.to_device(batch, ctx.device)
            with ddp.autocast(ctx.device, cfg.cpu_bf16):
                logits = model(x)
            loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
            (loss * loss_scale).backward()
            loss_sum += loss.item()
            n_samples += len(y)
            if step_now:
                for group in optimizer.param_groups:
                    group["lr"] = ddp.lr_at(step, lr, cfg.warmup_steps, total_steps)
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
        metrics = {
            "epoch": epoch,
            "train/loss": loss_sum / max(n_micro, 1),
            "val/loss": evaluate(ddp.unwrap(model), x_val, y_val, ctx.device, cfg),
            "samples_per_sec": ddp.throughput(n_samples, time.perf_counter() - t0),
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
