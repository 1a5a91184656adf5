"""A W&B ``program:`` script on Lightning that keeps its checkpoints in raysweep's trial checkpoint
directory (``RAYSWEEP_CHECKPOINT_DIR``) and resumes from ``last.ckpt`` there, as docs/train-loops.md
shows; each epoch it trains is appended to ``<record_dir>/x=<x>.jsonl``."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import lightning as L
import torch
import wandb
from lightning.pytorch.callbacks import ModelCheckpoint

parser = argparse.ArgumentParser()
parser.add_argument("--x", type=float)
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--record_dir")
args = parser.parse_args()
ckpt_dir = os.environ.get("RAYSWEEP_CHECKPOINT_DIR", "checkpoints")


class Line(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Linear(1, 1)

    def training_step(self, batch, index):
        time.sleep(0.25)  # an epoch of 4 steps: a second
        xs, ys = batch
        return torch.nn.functional.mse_loss(self.w(xs), ys)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class SaveThenLog(ModelCheckpoint):
    """Saves ``last.ckpt`` at each epoch's end, then logs the epoch: its report keeps the checkpoint."""

    def on_train_epoch_end(self, trainer, module) -> None:
        super().on_train_epoch_end(trainer, module)
        if trainer.is_global_zero:
            epoch = trainer.current_epoch + 1
            with open(Path(args.record_dir) / f"x={args.x}.jsonl", "a") as f:
                f.write(json.dumps({"x": args.x, "epoch": epoch}) + "\n")
            wandb.log({"score": (args.x - 0.3) ** 2 + 1.0 / epoch, "epoch": epoch})


run = wandb.init()
xs = torch.linspace(-1, 1, 64).unsqueeze(1)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xs, 2 * xs), batch_size=16)
saver = SaveThenLog(dirpath=ckpt_dir, save_last=True, save_on_train_epoch_end=True, every_n_epochs=1)
trainer = L.Trainer(
    max_epochs=args.epochs,
    accelerator="cpu",
    devices=1,
    callbacks=[saver],
    logger=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
last = Path(ckpt_dir) / "last.ckpt"
trainer.fit(Line(), loader, ckpt_path="last" if last.exists() else None)
run.finish()
