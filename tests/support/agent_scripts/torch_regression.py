"""A PyTorch sweep as W&B's docs write it: a small regression net on random tensors, a W&B-style
``main()`` reading ``wandb.config``. Moving it to raysweep changes the last block's one line."""

import os

import torch
import wandb
from torch import nn

sweep_config = {
    "method": "grid",
    "metric": {"name": "val_loss", "goal": "minimize"},
    "parameters": {"lr": {"values": [0.01, 0.05]}, "hidden": {"value": 16}, "epochs": {"value": 3}},
}


def main():
    wandb.init()
    config = wandb.config
    torch.manual_seed(0)
    x, w = torch.randn(256, 8), torch.randn(8, 1)
    y = x @ w + 0.1 * torch.randn(256, 1)
    model = nn.Sequential(nn.Linear(8, config.hidden), nn.ReLU(), nn.Linear(config.hidden, 1))
    opt = torch.optim.SGD(model.parameters(), lr=config.lr)
    for epoch in range(config.epochs):
        loss = nn.functional.mse_loss(model(x[:200]), y[:200])
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            val = nn.functional.mse_loss(model(x[200:]), y[200:])
        wandb.log({"epoch": epoch, "train_loss": loss.item(), "val_loss": val.item()})


if __name__ == "__main__":
    if os.environ.get("AGENT") == "wandb":  # as its author wrote it
        sweep_id = wandb.sweep(sweep_config, project="agent-move")
        wandb.agent(sweep_id, function=main, count=2)
    else:  # the one line changed
        import raysweep

        raysweep.run(sweep_config, function=main, count=2)
    print("AFTER THE AGENT")
