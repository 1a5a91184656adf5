"""W&B's quickstart sweep, moved to raysweep by changing one line.

    sweep_id = wandb.sweep(sweep_config, project="digits")     # before
    wandb.agent(sweep_id, function=main, count=8)

    raysweep.run(sweep_config, function=main, count=8)         # after

``main`` is W&B's style, unchanged: it calls ``wandb.init()``, reads ``wandb.config`` and logs
with ``wandb.log``. It is a logistic regression on scikit-learn's bundled handwritten digits
(no download), a few seconds per trial. Run it with ``python train_loops/wandb_quickstart.py``
(W&B offline without a key); the results come back as a pandas DataFrame.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import wandb
from sklearn.datasets import load_digits

import raysweep

sweep_config = {
    "name": "digits-quickstart",
    "method": "random",
    "metric": {"name": "val/accuracy", "goal": "maximize"},
    "parameters": {
        "lr": {"distribution": "log_uniform_values", "min": 1e-3, "max": 1.0},
        "weight_decay": {"values": [0.0, 1e-4, 1e-2]},
        "epochs": {"value": 20},
    },
    "early_terminate": {"type": "hyperband", "min_iter": 5},
}


def main() -> None:
    wandb.init()
    config = wandb.config
    x, y = load_digits(return_X_y=True)
    x, y = torch.tensor(x / 16.0, dtype=torch.float32), torch.tensor(y)
    generator = torch.Generator().manual_seed(0)  # the same validation images for every trial
    order = torch.randperm(len(y), generator=generator)
    train, val = order[:1400], order[1400:]
    model = torch.nn.Linear(64, 10)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    for epoch in range(1, config.epochs + 1):
        for batch in train[torch.randperm(len(train), generator=generator)].split(64):
            optimizer.zero_grad()
            F.cross_entropy(model(x[batch]), y[batch]).backward()
            optimizer.step()
        with torch.no_grad():
            accuracy = (model(x[val]).argmax(1) == y[val]).float().mean().item()
        wandb.log({"val/accuracy": accuracy, "epoch": epoch})


if __name__ == "__main__":
    result = raysweep.run(sweep_config, function=main, count=8)
    print(result.dataframe()[["lr", "weight_decay", "val/accuracy", "status", "iterations"]])
