"""Part 3, search efficiency on the looped-transformer stages sweep: ASHA+TPE vs random vs grid.

Grid search is the whole stages grid (search_spaces/stages.yaml, 256 configurations), run
once: its wall time and its best are what a grid search costs and finds. ASHA+TPE
(stages_bayes.yaml) and ASHA+random (stages_random.yaml) run a fixed budget of trials with
seeds 0, 1, 2 (the searcher's; the model's seed is the loop's own, so a configuration reports
the same accuracies in every run). Every file keeps its own searcher settings and hyperband
(ASHA) scheduler, rescaled to the shorter trials; the sizes are in the results file. The report
(bench/report.py) reads, per run, the wall time from the first trial's start until the best so
far reached grid's best, and a top-1% configuration of the grid, and the best within the budget.

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.search --method bayes [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

import yaml

from bench import systems
from bench.common import RAW, REPO, RESULTS, median, write_result

FILES = {"bayes": "stages_bayes.yaml", "random": "stages_random.yaml", "grid": "stages.yaml"}
SIZES = {  # trials of bayes and random (grid runs its whole grid), the size of one trial, and the
    # first rung of early stopping (None: the file's own min_iter, 3 epochs; --asha-min-iter sets it)
    "full": {"trials": 96, "epochs": 6, "train_size": 3000, "val_size": 500, "asha_min_iter": None},
    "quick": {"trials": 3, "grid_trials": 3, "epochs": 2, "train_size": 300, "val_size": 100, "asha_min_iter": 1},
}
SEEDS = {"full": 3, "quick": 1}  # repetitions of bayes and random, seeds 0..n-1; grid runs once


def search_spec(
    method: str, quick: bool, seed: int = 0, asha_min_iter: int | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    size = dict(SIZES["quick" if quick else "full"])
    doc = yaml.safe_load((REPO / "search_spaces" / FILES[method]).read_text())
    doc.update(doc.pop("raysweep", {}))  # the bench's systems take raysweep's keys at the top level
    epochs = size["epochs"]
    doc["base_config"].update(
        {"epochs": epochs, "train_size": size["train_size"], "val_size": size["val_size"], "checkpoint_every": 0}
    )
    size["asha_min_iter"] = asha_min_iter or size["asha_min_iter"] or doc["early_terminate"]["min_iter"]
    doc["early_terminate"] = {
        "type": "hyperband",
        "min_iter": size["asha_min_iter"],
        "eta": doc["early_terminate"]["eta"],
    }
    # Part 3 measures Ray's ASHA at the file's first rung (W&B's own hyperband would put its
    # bands at max_iter / eta^k): raysweep's scheduler key picks it explicitly.
    doc["scheduler"] = {
        "type": "asha",
        "grace_period": size["asha_min_iter"],
        "max_t": epochs,
        "reduction_factor": doc["early_terminate"]["eta"],
    }
    trials = size.get("grid_trials") if method == "grid" else size["trials"]
    if trials is None:
        doc.pop("run_cap", None)  # the whole grid
    else:
        doc["run_cap"] = trials
    doc["max_concurrent"] = 2
    doc["seed"] = seed
    doc.pop("wandb", None)
    return doc, size


def trial_finals(r: dict[str, Any], metric: str = "exact_accuracy") -> list[dict[str, float]]:
    """Per finished trial, in start order: seconds since the first trial started (start, end)
    and its last ``metric`` (what the scheduler ranked it by), with its configuration."""
    t0 = min(s for s, _ in r["spans"])
    rows = sorted(
        (row for row in r["rows"] if "end" in row and metric in row.get("metrics", {})), key=lambda row: row["start"]
    )
    return [
        {
            "start": round(row["start"] - t0, 1),
            "end": round(row["end"] - t0, 1),
            "final": row["metrics"][metric],
            "epochs": row.get("iterations"),
            "config": row["config"],
        }
        for row in rows
    ]


def best_curve(r: dict[str, Any], metric: str = "exact_accuracy") -> list[tuple[float, float]]:
    """(seconds since the first trial started, best so far), at every improvement."""
    t0 = min(s for s, _ in r["spans"])
    reports = sorted(
        (e["t"] - t0, e["metrics"][metric]) for e in r["events"] if e["kind"] == "report" and e["rank"] == 0
    )
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
    p.add_argument("--asha-min-iter", type=int, help="the first rung, in epochs (default: the file's own min_iter)")
    p.add_argument(
        "--wandb-agent",
        type=float,
        metavar="STOP_PERIOD_S",
        help="run system (c) instead of raysweep: W&B's engine (its bayes or random, and its hyperband "
        "evaluated every STOP_PERIOD_S) proposing to one sequential torchrun agent",
    )
    p.add_argument("--seeds", type=int, help="runs of bayes or random, seeds 0..N-1 (default 3, --quick 1)")
    args = p.parse_args()
    if args.wandb_agent is not None and args.method == "grid":
        p.error("--wandb-agent runs bayes or random")
    runs = []
    for seed in range(1 if args.method == "grid" else args.seeds or SEEDS["quick" if args.quick else "full"]):
        doc, size = search_spec(args.method, args.quick, seed, args.asha_min_iter)
        if args.wandb_agent is None:
            r = systems.run_raysweep(doc, "transformer")
        else:
            r = systems.run_wandb_agent(doc, "transformer", seed, args.wandb_agent, size["trials"])
        curve = best_curve(r) if r["spans"] else []
        ends, starts = [e for _, e in r["spans"]], [s for s, _ in r["spans"]]
        runs.append(
            {
                "seed": seed,
                "best": curve[-1][1] if curve else None,
                "wall_s": round(max(ends) - min(starts), 1) if ends else None,
                "curve": curve,
                "trials": trial_finals(r) if r["spans"] else [],
                "trials_done": len(r["spans"]),
                "failed": r["failed"],
            }
        )
        print(f"search {args.method} seed {seed}: best {runs[-1]['best']} in {runs[-1]['wall_s']} s", flush=True)
    out = {
        "method": args.method,
        "system": "raysweep" if args.wandb_agent is None else f"wandb agent, hyperband every {args.wandb_agent:g} s",
        "size": size,
        "best": median(x["best"] for x in runs if x["best"] is not None),
        "wall_s": median(x["wall_s"] for x in runs if x["wall_s"] is not None),
        "trials_done": min(x["trials_done"] for x in runs),
        "failed": [e for x in runs for e in x["failed"]],
        "runs": runs,
    }
    name = (
        f"search_{args.method}"
        if args.wandb_agent is None
        else f"search_wandb_{args.method}_every{args.wandb_agent:g}s"
    )
    print(write_result(name, out, args.quick, RAW))
    grid = None if args.method == "grid" else read_summary("search_grid", args.quick)
    budget = SIZES["quick" if args.quick else "full"]["trials"]
    print(write_result(name, summarise(out, grid, budget), args.quick))


def read_summary(name: str, quick: bool) -> dict[str, Any] | None:
    path = RESULTS / f"{name}{'_quick' if quick else ''}.json"
    return json.loads(path.read_text()) if path.exists() else None


def summarise(raw: dict[str, Any], grid: dict[str, Any] | None, budget: int) -> dict[str, Any]:
    """A search part's committed figures from its per-trial table (``raw``): per run, its best-so-far
    curve and when grid's best configuration first started in it. ``grid``: the grid part's summary,
    which names that configuration (None: ``raw`` is the grid's own run). The grid's summary also
    holds its top-1% line, its first ``budget`` trials (bayes's trials), and each configuration's
    final value, which bench.search_proxy replays."""
    out = {k: v for k, v in raw.items() if k != "runs"}
    out["runs"] = [{k: v for k, v in run.items() if k != "trials"} for run in raw["runs"]]
    if grid is None:
        trials = raw["runs"][0]["trials"] if raw["runs"] else []
        out["grid"] = grid_figures(trials, budget)
    best_config = (out.get("grid") or (grid or {}).get("grid") or {}).get("best_config")
    if best_config is not None:
        for run, summary in zip(raw["runs"], out["runs"], strict=True):
            first = next((t for t in run["trials"] if t["config"] == best_config), None)
            summary["grid_best_config"] = first and {"start": first["start"], "epochs": first["epochs"]}
    return out


def grid_figures(trials: list[dict[str, Any]], budget: int) -> dict[str, Any]:
    finals = sorted((t["final"] for t in trials), reverse=True)
    first = trials[:budget]
    return {
        "configurations": len(finals),
        "top1": finals[math.ceil(0.01 * len(finals)) - 1] if finals else None,
        "best_config": max(trials, key=lambda t: t["final"])["config"] if trials else None,
        "first": {"trials": len(first), "best": max(t["final"] for t in first), "end": max(t["end"] for t in first)}
        if 0 < len(first) < len(trials)
        else None,
        "values": {json.dumps(t["config"], sort_keys=True): t["final"] for t in trials},
    }


if __name__ == "__main__":
    main()
