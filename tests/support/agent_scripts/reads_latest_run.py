"""Reads W&B's own files as W&B's sweep check script does (wandb/wandb,
tests/standalone_tests/sweep_check.py): ``wandb/latest-run`` and ``wandb/debug.log`` under the
working directory, where wandb.agent points WANDB_DIR when it is unset. wandb.agent runs one run
at a time; raysweep runs trials side by side, and wandb/latest-run then names whichever started
last, so the one line asks for one trial at a time."""

import os

import wandb

sweep_config = {
    "method": "grid",
    "metric": {"name": "loss", "goal": "minimize"},
    "parameters": {"x": {"values": [1, 2]}},
}


def main():
    run = wandb.init()
    latest = os.path.realpath(os.path.join("wandb", "latest-run"))
    assert latest.endswith(run.id), f"wandb/latest-run is {latest}, not run {run.id}"
    assert os.path.exists(os.path.join("wandb", "debug.log"))
    wandb.log({"loss": run.config.x})
    run.finish()


if __name__ == "__main__":
    if os.environ.get("AGENT") == "wandb":
        sweep_id = wandb.sweep(sweep_config, project="agent-move")
        wandb.agent(sweep_id, function=main, count=2)
    else:
        import raysweep

        raysweep.run(sweep_config, function=main, count=2, max_concurrent=1)
    print("AFTER THE AGENT")
