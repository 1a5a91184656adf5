"""A user's script that sweeps functions of its own ``__main__`` with ``raysweep.run``
(tests/end_to_end/test_api.py runs it): ``python tests/support/api_script.py MODE ADDRESS STORAGE``."""

from __future__ import annotations

import json
import os
import sys
import time

import raysweep


def wandb_main() -> None:
    """W&B's style, as wandb.agent(function=main) runs it; each rank notes what wandb.config holds."""
    import torch.distributed as dist
    import wandb

    wandb.init()
    rank = dist.get_rank() if dist.is_initialized() else 0
    with open(os.path.join(raysweep.get_context().trial_dir, f"config.rank{rank}.json"), "w") as f:
        json.dump({**dict(wandb.config), "world_size": dist.get_world_size() if dist.is_initialized() else 1}, f)
    for epoch in range(1, wandb.config.epochs + 1):
        wandb.log({"loss": (wandb.config.lr - 0.3) ** 2 + 1.0 / epoch, "epoch": epoch})


def slow_train(config: dict) -> None:
    """raysweep's style: a report a second, continuing from its checkpoint."""
    import tempfile

    start = 0
    checkpoint = raysweep.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d, open(os.path.join(d, "epoch")) as f:
            start = int(f.read())
    for epoch in range(start + 1, 7):
        time.sleep(1.0)
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "epoch"), "w") as f:
                f.write(str(epoch))
            raysweep.report({"score": (config["x"] - 0.3) ** 2 + 1.0 / epoch, "epoch": epoch}, checkpoint=d)


def echo(config: dict) -> None:
    """Prints one line, then reports."""
    print(f"echo of sweep {config['sweep']}", flush=True)
    raysweep.report({"score": config["sweep"]})


SLOW = {"method": "grid", "metric": {"name": "score", "goal": "minimize"}, "parameters": {"x": {"values": [0.1, 0.5]}}}


def main(mode: str, address: str, storage: str) -> None:
    where = {"address": address, "storage": storage, "quiet": True}
    if mode in ("wandb warm", "wandb torchtrainer"):
        sweep = {
            "method": "grid",
            "metric": {"name": "loss", "goal": "minimize"},
            # a TorchTrainer's start-up is most of its trial: one poor trial there, two on warm workers
            "parameters": {
                "lr": {"values": [0.3, 2.0, 3.0] if mode == "wandb warm" else [0.3, 2.0]},
                "epochs": {"value": 3},
                "num_gpus": {"value": 2},
            },
            "raysweep": {
                "max_concurrent": 1,
                "ddp_workers": mode.split()[1],
                "scheduler": {"type": "asha", "grace_period": 1, "max_t": 3, "reduction_factor": 3},
            },
        }
        result = raysweep.run(sweep, function=wandb_main, name="wb", wandb="offline", **where)
    elif mode == "closure":
        best_x = 0.25  # captured by the closure below, which Ray pickles by value

        def train(config: dict) -> None:
            for epoch in range(1, 3):
                raysweep.report({"score": (config["x"] - best_x) ** 2 + 1.0 / epoch})

        result = raysweep.run(
            {
                "method": "random",
                "metric": {"name": "score", "goal": "minimize"},
                "parameters": {"x": {"min": 0.0, "max": 1.0}},
            },
            function=train,
            count=3,
            name="closure",
            seed=1,
            wandb="disabled",
            **where,
        )
    elif mode == "three sweeps":  # one process, three sweeps, their trials' lines on this console
        for k in (1, 2, 3):
            sweep = {"method": "grid", "metric": {"name": "score"}, "parameters": {"sweep": {"value": k}}}
            raysweep.run(sweep, function=echo, name=f"echo{k}", wandb="disabled", **(where | {"quiet": False}))
        return
    elif mode == "slow":
        try:
            raysweep.run(SLOW, function=slow_train, name="slow", wandb="disabled", **where)
        except KeyboardInterrupt as e:
            print(f"KeyboardInterrupt: {e}", flush=True)
            sys.exit(3)
        return
    elif mode == "resume without the function":
        try:
            raysweep.resume("slow", **where)
        except raysweep.UserError as e:
            print(f"UserError: {e}")
            sys.exit(2)
        return
    else:  # "resume"
        result = raysweep.resume("slow", function=slow_train, **where)
    frame = result.dataframe()
    print(
        json.dumps(
            {
                "trials": [t.to_json() for t in result.trials],
                "columns": list(frame.columns),
                "rows": frame.to_dict("records"),
            },
            default=str,
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
