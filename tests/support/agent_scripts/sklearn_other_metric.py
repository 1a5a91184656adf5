"""A scikit-learn sweep whose function logs ``Train Accuracy`` and ``Test Accuracy`` while the
sweep's metric is ``accuracy`` (a mismatch seen in a public script): under wandb.agent every run
finishes and the sweep goes on."""

import os

import numpy as np
import wandb
from sklearn.linear_model import LogisticRegression

sweep_config = {
    "method": "random",
    "metric": {"name": "accuracy", "goal": "maximize"},
    "parameters": {"C": {"min": 0.1, "max": 10.0}},
}


def train():
    run = wandb.init()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 5))
    y = (x[:, 0] + 0.5 * rng.normal(size=300) > 0).astype(int)
    model = LogisticRegression(C=run.config.C).fit(x[:200], y[:200])
    wandb.log({"Train Accuracy": model.score(x[:200], y[:200]), "Test Accuracy": model.score(x[200:], y[200:])})
    run.finish()


if __name__ == "__main__":
    if os.environ.get("AGENT") == "wandb":
        sweep_id = wandb.sweep(sweep_config, project="agent-move")
        wandb.agent(sweep_id, function=train, count=2)
    else:
        import raysweep

        raysweep.run(sweep_config, function=train, count=2)
    print("AFTER THE AGENT")
