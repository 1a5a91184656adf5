"""``with wandb.init() as run:`` and ``run.config``, printing as it goes: under wandb.agent the
prints show on the console."""

import os

import wandb

sweep_config = {
    "method": "grid",
    "metric": {"name": "score", "goal": "maximize"},
    "parameters": {"batch_size": {"values": [32, 64]}},
}


def main():
    with wandb.init() as run:
        print(f"training with batch size {run.config.batch_size}")
        run.log({"score": 1.0 / run.config.batch_size})


if __name__ == "__main__":
    if os.environ.get("AGENT") == "wandb":
        sweep_id = wandb.sweep(sweep_config, project="agent-move")
        wandb.agent(sweep_id, function=main, count=2)
    else:
        import raysweep

        raysweep.run(sweep_config, function=main, count=2)
    print("AFTER THE AGENT")
