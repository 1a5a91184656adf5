"""A looped transformer in three stages (z_L, z_M, z_H) learning multi-digit addition.

Each stage is one transformer block applied ``repeat`` times (weights shared across repeats),
optionally re-injecting the input embedding before every repeat (``include_inputs``); each
stage starts from the previous one's state. Addition needs iterated computation: the carry
into digit i depends on every lower digit, and the training data is biased towards long
carry chains (pairs summing to 9) so that shallow settings visibly fail. The stage settings
are what ``search_spaces/stages*.yaml`` sweep.

Digits are aligned and least-significant first: position i holds (a_i, b_i) and predicts digit
i of a + b; position n predicts the final carry. Every position is predicted at once.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

from raysweep import ddp


@dataclass
class Stage:
    repeat: int = 2  # times this stage's block is applied (weights shared)
    include_inputs: bool = True  # add the input embedding again before every repeat


@dataclass
class Arch:
    stages: list[Stage] = field(
        default_factory=lambda: [Stage(2, True), Stage(2, True), Stage(2, False)]
    )  # z_L, z_M, z_H
    d_model: int = 64  # width
    n_heads: int = 4
    mlp_ratio: int = 2  # MLP hidden = mlp_ratio * d_model
    window: int = 1  # position i attends to i - window .. i: a carry moves `window` digits per block


@dataclass
class Config:
    arch: Arch = field(default_factory=Arch)
    n_digits: int = 8  # digits per operand; the answer has n_digits + 1
    p_nine: float = 0.5  # chance a digit pair sums to 9 (propagates a carry): long carry chains
    train_size: int = 8_000  # fresh training problems per epoch (from seed and epoch)
    val_size: int = 2_000  # fixed held-out problems
    epochs: int = 10
    batch_size: int = 64  # per worker per micro-step
    grad_accum: int = 1  # micro-steps per optimizer step
    lr: float = 3e-3  # AdamW peak lr (before linear scaling)
    base_batch: int | None = None  # linear scaling rule: lr * effective batch / base_batch; None: off
    warmup_steps: int = 50
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    cpu_bf16: bool = False  # bf16 autocast on CPU (CUDA uses bf16 when supported)
    checkpoint_every: int = 1  # epochs
    seed: int = 0  # base seed; each worker uses seed + rank


def make_problems(n: int, n_digits: int, p_nine: float, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """``n`` problems: operand digits (n, n_digits + 1) each, and answer digits, LSB first."""
    a = torch.randint(0, 10, (n, n_digits), generator=gen)
    b = torch.randint(0, 10, (n, n_digits), generator=gen)
    nine = torch.rand(n, n_digits, generator=gen) < p_nine
    b = torch.where(nine, 9 - a, b)
    pad = torch.zeros(n, 1, dtype=torch.long)
    a, b = torch.cat([a, pad], 1), torch.cat([b, pad], 1)  # the last position holds the final carry
    out = torch.empty_like(a)
    carry = torch.zeros(n, dtype=torch.long)
    for i in range(n_digits + 1):
        s = a[:, i] + b[:, i] + carry
        out[:, i], carry = s % 10, s // 10
    return a, b, out


class Block(nn.Module):
    """Pre-LayerNorm transformer block whose attention sees only a local band of positions."""

    def __init__(self, d: int, n_heads: int, mlp_ratio: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, mlp_ratio * d), nn.GELU(), nn.Linear(mlp_ratio * d, d))

    def forward(self, z: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        B, T, D = z.shape
        q, k, v = self.qkv(self.ln1(z)).view(B, T, 3, self.n_heads, D // self.n_heads).permute(2, 0, 3, 1, 4)
        h = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        z = z + self.proj(h.transpose(1, 2).reshape(B, T, D))
        return z + self.mlp(self.ln2(z))


class LoopTransformer(nn.Module):
    def __init__(self, arch: Arch, n_pos: int) -> None:
        super().__init__()
        d = arch.d_model
        self.stages = arch.stages
        self.emb_a, self.emb_b = nn.Embedding(10, d), nn.Embedding(10, d)
        self.pos = nn.Parameter(torch.randn(n_pos, d) * 0.02)
        self.blocks = nn.ModuleList(Block(d, arch.n_heads, arch.mlp_ratio) for _ in arch.stages)
        self.ln_f = nn.LayerNorm(d)
        # Local attention is what makes depth matter: with full attention one layer can find the
        # carry's source directly, and every stage setting solves the task alike.
        i = torch.arange(n_pos)
        self.register_buffer("mask", (i[None, :] <= i[:, None]) & (i[None, :] >= i[:, None] - arch.window))
        self.head = nn.Linear(d, 10)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        x = self.emb_a(a) + self.emb_b(b) + self.pos
        z = x  # z_L starts from the inputs; z_M from z_L; z_H from z_M
        for stage, block in zip(self.stages, self.blocks, strict=True):
            for _ in range(stage.repeat):
                z = block(z + x if stage.include_inputs else z, self.mask)
        return self.head(self.ln_f(z))


@torch.no_grad()
def evaluate(model: nn.Module, val: tuple[torch.Tensor, ...], device: torch.device, cfg: Config) -> dict[str, float]:
    """Loss and exact accuracy (every answer digit right) on the held-out problems."""
    model.eval()
    loss_sum, exact = 0.0, 0
    for i in range(0, len(val[0]), 500):
        a, b, y = (t[i : i + 500].to(device) for t in val)
        with ddp.autocast(device, cfg.cpu_bf16):
            logits = model(a, b)
        loss_sum += F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), reduction="sum").item()
        exact += (logits.argmax(-1) == y).all(-1).sum().item()
    model.train()
    n = len(val[0])
    return {"val_loss": loss_sum / (n * val[2].shape[1]), "exact_accuracy": exact / n}


def train(config: dict) -> None:
    cfg: Config = ddp.config_from_dict(Config, config)
    if len(cfg.arch.stages) != 3:
        raise ValueError(f"arch.stages must list 3 stages (z_L, z_M, z_H), got {len(cfg.arch.stages)}")
    for i, s in enumerate(cfg.arch.stages):
        if not isinstance(s, Stage) or s.repeat < 1:
            raise ValueError(f"arch.stages.{i}: needs repeat >= 1 and include_inputs, got {s!r}")

    ctx = ddp.setup(cfg.seed)
    eff = ddp.effective_batch(cfg.batch_size, cfg.grad_accum, ctx.world_size, verbose=True)
    lr = ddp.scaled_lr(cfg.lr, eff, cfg.base_batch)
    micro_per_epoch = math.ceil(math.ceil(cfg.train_size / ctx.world_size) / cfg.batch_size)  # this rank's shard
    steps_per_epoch = math.ceil(micro_per_epoch / cfg.grad_accum)
    total_steps = cfg.epochs * steps_per_epoch

    # The held-out set comes from its own generator, the same on every rank.
    val = make_problems(cfg.val_size, cfg.n_digits, cfg.p_nine, torch.Generator().manual_seed(10_000 + cfg.seed))
    model = LoopTransformer(cfg.arch, cfg.n_digits + 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=cfg.weight_decay)
    start_epoch, _ = ddp.load_checkpoint(model, optimizer, seed=cfg.seed)
    model = ddp.prepare_model(model, ctx)

    step = start_epoch * steps_per_epoch
    for epoch in range(start_epoch + 1, cfg.epochs + 1):
        # Fresh problems each epoch, a function of (seed, epoch) only: resuming replays them.
        gen = torch.Generator().manual_seed(cfg.seed * 100_003 + epoch)
        loader = ddp.make_loader(
            TensorDataset(*make_problems(cfg.train_size, cfg.n_digits, cfg.p_nine, gen)),
            cfg.batch_size,
            shuffle=True,
            seed=cfg.seed,
        )
        ddp.set_epoch(loader, epoch)
        t0, n_samples, loss_sum, n_micro = time.perf_counter(), 0, 0.0, len(loader)
        for batch, loss_scale, step_now in ddp.accumulate(loader, model, cfg.grad_accum):
            a, b, y = ddp.to_device(batch, ctx.device)
            with ddp.autocast(ctx.device, cfg.cpu_bf16):
                logits = model(a, b)
            loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
            (loss * loss_scale).backward()
            loss_sum += loss.item()  # a CPU-GPU sync point; fine at this size
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
            "loss": loss_sum / max(n_micro, 1),
            "samples_per_sec": ddp.throughput(n_samples, time.perf_counter() - t0),
            **evaluate(ddp.unwrap(model), val, ctx.device, cfg),
        }
        ddp.report_epoch(
            metrics,
            model=model,
            optimizer=optimizer,
            epoch=epoch,
            checkpoint_every=cfg.checkpoint_every,
            last_epoch=cfg.epochs,
        )
