"""Part 4, DDP scaling: training samples/sec of the looped transformer with 1 and 2 workers.

Both through raysweep (1 worker in the Tune trial, 2 under a TorchTrainer) and through
torchrun, one trial at a time so the two sizes never share the cores. The figure is the
loop's own ``samples_per_sec`` (all ranks' samples over the slowest rank's epoch time),
median over the epochs after the first.

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.ddp_scaling [--quick]
"""

from __future__ import annotations

import argparse
from typing import Any

from bench import systems
from bench.common import median, write_result


def scaling_spec(quick: bool) -> dict[str, Any]:
    return {
        "name": "bench-ddp",
        "method": "grid",
        "metric": {"name": "exact_accuracy", "goal": "maximize"},
        "parameters": {"num_gpus": {"values": [1, 2]}},
        "train_loop": "bench.loops:transformer",
        "base_config": {"epochs": 2 if quick else 4, "train_size": 1000 if quick else 8000, "val_size": 100, "checkpoint_every": 0},
    }


def samples_per_sec(events: list[dict[str, Any]]) -> dict[int, float]:
    """Workers -> median samples/sec over epochs 2.. (epoch 1 pays one-off warm-up)."""
    by_world: dict[int, list[float]] = {}
    for e in events:
        if e["kind"] == "report" and e["rank"] == 0:
            by_world.setdefault(e["world"], []).append(e["metrics"]["samples_per_sec"])
    return {w: median(v[1:] or v) for w, v in by_world.items()}


def main() -> None:
    p = argparse.ArgumentParser(description="samples/sec with 1 and 2 DDP workers")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    spec_doc = scaling_spec(args.quick)
    _, trials = systems.spec_trials(spec_doc)
    out: dict[str, Any] = {}
    a = systems.run_raysweep(spec_doc, "transformer", max_concurrent=1)
    c = systems.run_torchrun_agent(trials, "transformer", "exact_accuracy", "max")
    for key, r in (("a_raysweep", a), ("c_torchrun", c)):
        sps = samples_per_sec(r["events"])
        one, two = sps.get(1), sps.get(2)
        out[key] = {"samples_per_sec_1w": round(one, 1) if one else None, "samples_per_sec_2w": round(two, 1) if two else None,
                    "speedup_2w": round(two / one, 3) if one and two else None, "failed": r["failed"]}
        print(f"ddp {key}: {out[key]}", flush=True)
    print(write_result("ddp_scaling", {"config": spec_doc["base_config"], "systems": out}, args.quick))


if __name__ == "__main__":
    main()
