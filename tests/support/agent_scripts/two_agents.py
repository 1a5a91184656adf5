"""One sweep, two agents with two functions, as a public notebook runs it: 3 runs, then 2 more."""

import os

import wandb

sweep_config = {
    "method": "random",
    "metric": {"name": "loss", "goal": "minimize"},
    "parameters": {"lr": {"min": 0.0, "max": 1.0}},
}


def first():
    with wandb.init() as run:
        run.log({"loss": run.config.lr, "agent": 1})


def second():
    with wandb.init() as run:
        run.log({"loss": 2 * run.config.lr, "agent": 2})


if __name__ == "__main__":
    if os.environ.get("AGENT") == "wandb":
        sweep_id = wandb.sweep(sweep_config, project="agent-move")
        wandb.agent(sweep_id, function=first, count=3)
        wandb.agent(sweep_id, function=second, count=2)
    else:
        import raysweep

        raysweep.run(sweep_config, function=first, count=3, name="two-agents")
        raysweep.run(sweep_config, function=second, count=2, name="two-agents")
    print("AFTER THE AGENT")
