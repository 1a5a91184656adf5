"""Part 4, DDP scaling: training samples/sec of the looped transformer with 1 and 2 workers.

Both through raysweep (on the sweep's warm workers) and through torchrun, each size a sweep
of its own trial alone: in one sweep of both sizes, raysweep starts the second trial's process
ahead of its slots while the first trains (start-ahead), and that start shares the 2 cores
with the trial measured. The figure is the loop's own
``samples_per_sec`` (all ranks' samples over the slowest rank's epoch time), median over the
epochs after the first. The machine's load moves these figures by more than the systems
differ, so the two systems run in interleaved pairs (order alternating: a c, c a, a c) and
the ratio (a)/(c) is taken pair by pair; the table shows medians over the pairs. With 1 worker,
(e) runs the same loop in a plain Ray actor (no Tune, no pool) in the same rounds: (a)/(e) is
what raysweep costs a lone trial, (e)/(c) what running inside Ray costs it.

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.ddp_scaling [--quick]
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator
from typing import Any

from bench import systems
from bench.common import median, write_result

PAIRS = {"full": 3, "quick": 1}


def scaling_spec(quick: bool, workers: int) -> dict[str, Any]:
    return {
        "name": "bench-ddp",
        "method": "grid",
        "metric": {"name": "exact_accuracy", "goal": "maximize"},
        "parameters": {"num_gpus": {"value": workers}},
        "train_loop": "bench.loops:transformer",
        "base_config": {
            "epochs": 2 if quick else 4,
            "train_size": 1000 if quick else 8000,
            "val_size": 100,
            "checkpoint_every": 0,
        },
    }


def samples_per_sec(events: list[dict[str, Any]]) -> dict[int, float]:
    """Workers -> median samples/sec over epochs 2.. (epoch 1 pays one-off warm-up)."""
    by_world: dict[int, list[float]] = {}
    for e in events:
        if e["kind"] == "report" and e["rank"] == 0:
            by_world.setdefault(e["world"], []).append(e["metrics"]["samples_per_sec"])
    return {w: median(v[1:] or v) for w, v in by_world.items()}


def ratio(a: float | None, c: float | None) -> float | None:
    return round(a / c, 3) if a and c else None


def median_of_pairs(xs: Iterable[float | None], digits: int) -> float | None:
    """The median of the pairs that measured it; None (n/a in the table) when none did."""
    xs = [x for x in xs if x]
    return round(median(xs), digits) if xs else None


def interleaved_pairs(spec_doc: dict[str, Any], n: int) -> Iterator[dict[str, dict[str, Any]]]:
    """``n`` rounds of one raysweep and one torchrun run of ``spec_doc`` (and a bare Ray actor's,
    1-worker trials only), order alternating; per round and system, samples/sec by workers
    (``samples_per_sec``) and its failed trials."""
    _, trials = systems.spec_trials(spec_doc)
    runners = {
        "a_raysweep": lambda: systems.run_raysweep(spec_doc, "transformer", max_concurrent=1),
        "c_torchrun": lambda: systems.run_torchrun_agent(trials, "transformer", "exact_accuracy", "max"),
    }
    if all(t["workers"] == 1 for t in trials):
        runners["e_bare_actor"] = lambda: systems.run_bare_actor(trials, "transformer")
    for i in range(n):
        runs = {key: runners[key]() for key in sorted(runners, reverse=i % 2 == 1)}
        yield {key: {"by_workers": samples_per_sec(r["events"]), "failed": r["failed"]} for key, r in runs.items()}


def main() -> None:
    p = argparse.ArgumentParser(description="samples/sec with 1 and 2 DDP workers")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    n = PAIRS["quick" if args.quick else "full"]
    by_size = {w: list(interleaved_pairs(scaling_spec(args.quick, w), n)) for w in (1, 2)}
    pairs = []
    for i, (one, two) in enumerate(zip(by_size[1], by_size[2], strict=True)):
        pair: dict[str, Any] = {
            key: {
                "1w": one[key]["by_workers"].get(1),
                "2w": two[key]["by_workers"].get(2) if key in two else None,
                "failed": one[key]["failed"] + (two[key]["failed"] if key in two else []),
            }
            for key in one
        }
        pair["a_over_c_1w"] = ratio(pair["a_raysweep"]["1w"], pair["c_torchrun"]["1w"])
        pair["a_over_c_2w"] = ratio(pair["a_raysweep"]["2w"], pair["c_torchrun"]["2w"])
        pair["a_over_e_1w"] = ratio(pair["a_raysweep"]["1w"], pair["e_bare_actor"]["1w"])
        pair["e_over_c_1w"] = ratio(pair["e_bare_actor"]["1w"], pair["c_torchrun"]["1w"])
        print(f"ddp pair {i}: {pair}", flush=True)
        pairs.append(pair)
    out: dict[str, Any] = {}
    for key in ("a_raysweep", "c_torchrun", "e_bare_actor"):
        one = median_of_pairs((p[key]["1w"] for p in pairs), 1)
        two = median_of_pairs((p[key]["2w"] for p in pairs), 1)
        out[key] = {
            "samples_per_sec_1w": one,
            "samples_per_sec_2w": two,
            "speedup_2w": ratio(two, one),
            "failed": [e for p in pairs for e in p[key]["failed"]],
        }
    ratios = {
        key: median_of_pairs((p[key] for p in pairs), 3)
        for key in ("a_over_c_1w", "a_over_c_2w", "a_over_e_1w", "e_over_c_1w")
    }
    print(f"ddp: {out} {ratios}", flush=True)
    print(
        write_result(
            "ddp_scaling",
            {"config": scaling_spec(args.quick, 1)["base_config"], "systems": out, **ratios, "pairs": pairs},
            args.quick,
        )
    )


if __name__ == "__main__":
    main()
