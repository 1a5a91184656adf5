"""How soon can a sampler find the stages grid's best? An offline proxy for part 3's 0.1x target.

Replays Optuna samplers on the values part 3's grid run recorded for every one of the 256
configurations (``bench/results/search_grid.json``: the final value, 6 epochs or ASHA's rung at
3), one trial at a time, repeats skipped as raysweep's ``skip_duplicates`` skips them, and
counts the distinct configurations each seed runs before it proposes the grid's best. No
ASHA, no concurrency, no training: seconds for many seeds, where part 3 takes ~8 min a seed.
The 0.1x target needs the best found within ~15 distinct trials in the median seed (part 3's
TPE found it at its 23rd-35th trial).

    .venv/bin/python -m bench.search_proxy [--seeds 40] [--only TEXT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import warnings
from collections.abc import Callable
from typing import Any

import optuna
from optuna.samplers import GPSampler, RandomSampler, TPESampler

from bench.common import RESULTS, write_result

BUDGET = 96  # proposals per seed, part 3's trials
NEVER = BUDGET + 1
PARAMS = (
    "arch.stages.0.repeat",
    "arch.stages.1.repeat",
    "arch.stages.2.repeat",
    "arch.stages.0.include_inputs",
    "arch.stages.1.include_inputs",
)
VARIANTS: dict[str, Callable[[int], Any]] = {  # seed -> sampler; Optuna 5's TPE is multivariate + constant_liar
    "TPE, raysweep's defaults (10 random first)": lambda seed: TPESampler(seed=seed),
    "TPE, 5 random first": lambda seed: TPESampler(seed=seed, n_startup_trials=5),
    "TPE, 3 random first": lambda seed: TPESampler(seed=seed, n_startup_trials=3),
    "TPE, independent (multivariate off)": lambda seed: TPESampler(seed=seed, multivariate=False),
    "TPE, 64 EI candidates": lambda seed: TPESampler(seed=seed, n_ei_candidates=64),
    "random, no repeats": lambda seed: RandomSampler(seed=seed),
    "Gaussian process (searcher.sampler: gp; W&B's bayes is one)": lambda seed: GPSampler(seed=seed),
}


def recorded_values() -> dict[tuple, float]:
    values = json.loads((RESULTS / "search_grid.json").read_text())["grid"]["values"]  # bench.search's summary
    return {tuple(json.loads(config)[p] for p in PARAMS): final for config, final in values.items()}


def trials_to_best(values: dict[tuple, float], sampler: Any) -> int:
    """Distinct configurations run up to and including the best one; NEVER if not in the budget."""
    study = optuna.create_study(direction="maximize", sampler=sampler)
    best = max(values, key=values.get)
    seen: set[tuple] = set()
    for _ in range(BUDGET):
        trial = study.ask()
        config = tuple(trial.suggest_int(p, 1, 4) for p in PARAMS[:3]) + tuple(
            trial.suggest_categorical(p, [True, False]) for p in PARAMS[3:]
        )
        if config in seen:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        seen.add(config)
        study.tell(trial, values[config])
        if config == best:
            return len(seen)
    return NEVER


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=40)
    p.add_argument(
        "--only", default="", help="only the samplers whose name contains this (the GP takes ~1 s a proposal)"
    )
    args = p.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    values = recorded_values()
    out = {}
    print("| sampler | median distinct trials to grid's best | found within 15 | within 25 | not in 96 proposals |")
    print("|---|---|---|---|---|")
    for name, sampler in VARIANTS.items():
        if args.only not in name:
            continue
        counts = [trials_to_best(values, sampler(seed)) for seed in range(args.seeds)]
        median = statistics.median(counts)
        row = {
            "counts": counts,
            "median": median,
            "within_15": sum(c <= 15 for c in counts),
            "within_25": sum(c <= 25 for c in counts),
            "never": counts.count(NEVER),
        }
        out[name] = row
        shown = "not reached" if median >= NEVER else f"{median:g}"
        print(
            f"| {name} | {shown} | {row['within_15']}/{args.seeds} | {row['within_25']}/{args.seeds} | "
            f"{row['never']}/{args.seeds} |"
        )
    name = "search_proxy_gp" if args.only else "search_proxy"  # a subset never overwrites the full table
    print(
        write_result(
            name, {"seeds": args.seeds, "budget": BUDGET, "only": args.only, "variants": out}, quick=args.seeds < 10
        )
    )


if __name__ == "__main__":
    main()
