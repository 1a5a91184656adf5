"""Part 2 (and 5), sweep throughput and memory: a fixed 16-trial sweep of short real trials.

Half the trials have 1 worker and half 2 (interleaved), each a short looped-transformer run.
Utilisation = busy worker-seconds (time inside the train loop, summed over every worker
process) / (worker slots x wall), wall = first trial start to last trial end. Peak RSS of the
driver and of all its child processes (Ray's, or torchrun's) is sampled during the sweep.

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.throughput --system a [--quick]
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from bench import systems
from bench.common import busy_worker_seconds, loop_spans, median, write_result

SIZES = {  # trial size: (train_size, val_size, epochs); a full 1-worker trial: 2.4-2.8 s on 2 cores (2026-12-05)
    "full": (3000, 500, 2),
    "quick": (400, 100, 1),
}


def mixed_spec(n_seeds: int, quick: bool, epochs: int | None = None) -> dict[str, Any]:
    """``epochs`` (default: the size's) lengthens each trial, the handoffs between them staying as
    they are: utilisation against trial length."""
    train_size, val_size, size_epochs = SIZES["quick" if quick else "full"]
    epochs = epochs or size_epochs
    return {
        "name": "bench-throughput",
        "method": "grid",
        "metric": {"name": "exact_accuracy", "goal": "maximize"},
        "parameters": {"seed": {"values": list(range(n_seeds))}, "num_gpus": {"values": [1, 2]}},
        "train_loop": "bench.loops:transformer",
        "base_config": {"epochs": epochs, "train_size": train_size, "val_size": val_size, "checkpoint_every": 0},
    }


def slowest_vs_median(events: list[dict[str, Any]]) -> dict[str, float]:
    """Per trial size, the longest loop over the median one (rank 0's start to end). Utilisation
    counts a crawling rank as busy: a trial that ran 5x slower than its peers (two ranks'
    threads on one core) lifted it while the sweep took longer (docs/benchmarks.md, 2026-12-05)."""
    loops: dict[int, list[float]] = {}
    for start, seconds in loop_spans(events):
        if start.get("rank") == 0:
            loops.setdefault(start["world"], []).append(seconds)
    return {f"{world}w": round(max(xs) / median(xs), 2) for world, xs in sorted(loops.items())}


def summarise(r: dict[str, Any], slots: int) -> dict[str, Any]:
    starts = [s for s, _ in r["spans"]]
    ends = [e for _, e in r["spans"]]
    wall = max(ends) - min(starts) if ends else float("nan")
    busy = busy_worker_seconds(r["events"])
    return {
        "wall_s": round(wall, 1),
        "total_s": round(r["total_s"], 1),  # with cluster start and shutdown
        "busy_worker_s": round(busy, 1),
        "utilisation": round(busy / (slots * wall), 3) if ends else None,
        "trials_done": len(r["spans"]),
        "slowest_loop_vs_median": slowest_vs_median(r["events"]),
        "failed": r["failed"],
        "driver_peak_rss_mib": r["driver_peak_rss_mib"],
        "children_peak_rss_mib": r["children_peak_rss_mib"],
        "children_peak_pss_mib": r.get("children_peak_pss_mib"),
    }


def run(system: str, quick: bool, epochs: int | None = None) -> dict[str, Any]:
    spec_doc = mixed_spec(2 if quick else 8, quick, epochs)
    _, trials = systems.spec_trials(spec_doc)
    metric, mode = "exact_accuracy", "max"
    if system == "a":
        r = systems.run_raysweep(spec_doc, "transformer")
    elif system == "b":
        r = systems.run_docs_pattern(trials, "transformer", metric, mode, max_concurrent=2)
    elif system == "c":
        r = systems.run_torchrun_agent(trials, "transformer", metric, mode)
    else:
        raise ValueError(f"system must be a, b or c, got {system!r}")
    return summarise(r, slots=os.cpu_count() or 1)


def main() -> None:
    p = argparse.ArgumentParser(description="16-trial mixed sweep: wall time, utilisation, memory")
    p.add_argument("--system", choices=("a", "b", "c"), required=True)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--epochs", type=int, help="epochs per trial (default 2; 1 with --quick)")
    args = p.parse_args()
    out = run(args.system, args.quick, args.epochs)
    print(f"throughput {args.system}: {out}", flush=True)
    name = f"throughput_{args.system}" + (f"_{args.epochs}epochs" if args.epochs else "")
    print(write_result(name, {"system": args.system, "epochs": args.epochs, **out}, args.quick))


if __name__ == "__main__":
    main()
