"""A function that fails in every run (a typo in a config key): wandb.agent gives up after its
first failures, says so, and returns, and the script goes on."""

import os

import wandb

sweep_config = {
    "method": "grid",
    "metric": {"name": "loss", "goal": "minimize"},
    "parameters": {"x": {"values": list(range(8))}},
}


def main():
    run = wandb.init()
    run.log({"loss": run.config.learning_rate})  # no such key: AttributeError


if __name__ == "__main__":
    if os.environ.get("AGENT") == "wandb":
        sweep_id = wandb.sweep(sweep_config, project="agent-move")
        wandb.agent(sweep_id, function=main, count=8)
    else:
        import raysweep

        result = raysweep.run(sweep_config, function=main, count=8)
        print("STOPPED:", result.stopped)
    print("AFTER THE AGENT")
