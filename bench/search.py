"""Part 3, search efficiency on the looped-transformer stages sweep: ASHA+TPE vs random vs grid.

Runs search_spaces/stages_bayes.yaml, stages_random.yaml and stages.yaml through raysweep at
a reduced size (fewer epochs and problems per epoch, a fixed trial budget; the sizes are in
the results file), each file's own ASHA scheduler rescaled to the shorter trials. Reports the
best exact_accuracy reached within the budget, and the wall time (from the first trial's
start) until each method first reached a target: grid's best, and a fixed accuracy. Repeated
with seeds 0, 1, 2 (the searcher's and the model's); the table shows medians.

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.search --method bayes [--quick]
"""

from __future__ import annotations

import argparse
from typing import Any

import yaml

from bench import systems
from bench.common import REPO, median, write_result

FILES = {"bayes": "stages_bayes.yaml", "random": "stages_random.yaml", "grid": "stages.yaml"}
SIZES = {  # (trials, epochs, train_size, val_size, rungs min_iter)
    "full": (12, 6, 3000, 500, 2),
    "quick": (3, 2, 300, 100, 1),
}
SEEDS = {"full": 3, "quick": 1}  # repetitions, seeds 0..n-1


def search_spec(method: str, quick: bool, seed: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    trials, epochs, train_size, val_size, min_iter = SIZES["quick" if quick else "full"]
    doc = yaml.safe_load((REPO / "search_spaces" / FILES[method]).read_text())
    doc["base_config"].update({"epochs": epochs, "train_size": train_size, "val_size": val_size, "checkpoint_every": 0})
    doc["early_terminate"] = {"type": "hyperband", "min_iter": min_iter, "max_iter": epochs, "eta": 3}
    doc["run_cap"] = trials
    doc["max_concurrent"] = 2
    doc["seed"] = seed
    doc.pop("wandb", None)
    if method == "bayes":
        doc["searcher"] = {"n_startup_trials": max(2, trials // 3)}
    size = {"trials": trials, "epochs": epochs, "train_size": train_size, "val_size": val_size, "asha_min_iter": min_iter}
    return doc, size


def best_curve(r: dict[str, Any], metric: str = "exact_accuracy") -> list[tuple[float, float]]:
    """(seconds since the first trial started, best so far), at every improvement."""
    t0 = min(s for s, _ in r["spans"])
    reports = sorted((e["t"] - t0, e["metrics"][metric]) for e in r["events"] if e["kind"] == "report" and e["rank"] == 0)
    curve, best = [], float("-inf")
    for t, v in reports:
        if v > best:
            best = v
            curve.append((round(t, 1), v))
    return curve


def main() -> None:
    p = argparse.ArgumentParser(description="one search method of the stages sweep, reduced")
    p.add_argument("--method", choices=tuple(FILES), required=True)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    runs = []
    for seed in range(SEEDS["quick" if args.quick else "full"]):
        doc, size = search_spec(args.method, args.quick, seed)
        r = systems.run_raysweep(doc, "transformer")
        curve = best_curve(r) if r["spans"] else []
        ends, starts = [e for _, e in r["spans"]], [s for s, _ in r["spans"]]
        runs.append({
            "seed": seed,
            "best": curve[-1][1] if curve else None,
            "wall_s": round(max(ends) - min(starts), 1) if ends else None,
            "curve": curve,
            "trials_done": len(r["spans"]),
            "failed": r["failed"],
        })
    out = {
        "method": args.method,
        "size": size,
        "best": median(x["best"] for x in runs if x["best"] is not None),
        "wall_s": median(x["wall_s"] for x in runs if x["wall_s"] is not None),
        "trials_done": min(x["trials_done"] for x in runs),
        "failed": [e for x in runs for e in x["failed"]],
        "runs": runs,
    }
    print(f"search {args.method}: best {out['best']} in {out['wall_s']} s", flush=True)
    print(write_result(f"search_{args.method}", out, args.quick))


if __name__ == "__main__":
    main()
