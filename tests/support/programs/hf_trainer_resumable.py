"""A W&B ``program:`` script on HF Trainer whose ``output_dir`` is raysweep's trial checkpoint
directory (``RAYSWEEP_CHECKPOINT_DIR``), resumed from the newest ``checkpoint-*`` there, as
docs/train-loops.md shows; each epoch it trains is appended to ``<record_dir>/x=<x>.jsonl``."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import wandb
from transformers import Trainer, TrainerCallback, TrainingArguments

parser = argparse.ArgumentParser()
parser.add_argument("--x", type=float)
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--record_dir")
args = parser.parse_args()
ckpt_dir = os.environ.get("RAYSWEEP_CHECKPOINT_DIR", "checkpoints")


class Line(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Linear(1, 1)

    def forward(self, x, labels=None):
        time.sleep(0.25)  # an epoch of 4 steps: a second
        out = self.w(x)
        return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}


class Rows(torch.utils.data.Dataset):
    def __init__(self) -> None:
        self.xs = torch.linspace(-1, 1, 64).unsqueeze(1)

    def __len__(self) -> int:
        return len(self.xs)

    def __getitem__(self, i):
        return {"x": self.xs[i], "labels": 2 * self.xs[i]}


class LogAfterSave(TrainerCallback):
    """Logs each epoch once its checkpoint is saved: its report keeps that checkpoint."""

    def on_save(self, training_args, state, control, **kwargs):
        if state.is_world_process_zero:
            epoch = round(state.epoch)
            with open(Path(args.record_dir) / f"x={args.x}.jsonl", "a") as f:
                f.write(json.dumps({"x": args.x, "epoch": epoch}) + "\n")
            wandb.log({"score": (args.x - 0.3) ** 2 + 1.0 / epoch, "epoch": epoch})


run = wandb.init()
training = TrainingArguments(
    output_dir=ckpt_dir,
    num_train_epochs=args.epochs,
    per_device_train_batch_size=16,
    save_strategy="epoch",
    save_total_limit=1,
    logging_strategy="no",
    report_to=[],
    use_cpu=True,
    disable_tqdm=True,
)
trainer = Trainer(model=Line(), args=training, train_dataset=Rows(), callbacks=[LogAfterSave()])
has_one = any(name.startswith("checkpoint-") for name in os.listdir(ckpt_dir)) if os.path.isdir(ckpt_dir) else False
trainer.train(resume_from_checkpoint=has_one or None)
run.finish()
