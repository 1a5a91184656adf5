"""Part 1, per-trial overhead: trivial trials (3 reports, no compute), run one at a time.

Seconds per trial = the gap between consecutive trial ends, so launch and teardown count;
the figure is the median over the trials of one sweep (each trial is one repetition).

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.overhead --workers 2 [--quick]
"""

from __future__ import annotations

import argparse
from typing import Any

from bench import systems
from bench.common import median, per_trial_seconds, write_result


def smoke_spec(workers: int, n: int) -> dict[str, Any]:
    return {
        "name": "bench-overhead",
        "method": "grid",
        "metric": {"name": "score", "goal": "minimize"},
        "parameters": {"x": {"values": [round(0.1 * i, 2) for i in range(n)]}, "num_gpus": {"value": workers}},
        "train_loop": "bench.loops:smoke",
        "base_config": {"epochs": 3, "sleep": 0.0},
    }


def measure(workers: int, n: int, which: str = "abcd") -> dict[str, Any]:
    spec_doc = smoke_spec(workers, n)
    _, trials = systems.spec_trials(spec_doc)
    runs = {
        "a_raysweep": lambda: systems.run_raysweep(spec_doc, "smoke", max_concurrent=1),
        "b_docs_pattern": lambda: systems.run_docs_pattern(trials, "smoke", "score", "min", max_concurrent=1),
        "c_torchrun_agent": lambda: systems.run_torchrun_agent(trials, "smoke", "score", "min"),
        "d_plain_tune": lambda: systems.run_plain_tune(trials, "smoke", "score", "min", max_concurrent=1),
    }
    out: dict[str, Any] = {}
    for key, run in runs.items():
        if key[0] not in which or (key == "d_plain_tune" and workers != 1):
            continue
        r = run()
        per = per_trial_seconds(r["spans"])
        out[key] = {
            "per_trial_s": round(median(per), 3),
            "each_s": [round(x, 2) for x in per],
            "trials_done": len(r["spans"]),
            "failed": r["failed"],
            "total_s": round(r["total_s"], 1),
        }
        print(
            f"overhead {workers} worker(s) {key}: {out[key]['per_trial_s']:.2f} s/trial {out[key]['each_s']}",
            flush=True,
        )
    base = out.get("b_docs_pattern", {}).get("per_trial_s")
    if base:
        out["ratios_to_b"] = {
            k: round(v["per_trial_s"] / base, 3) for k, v in out.items() if isinstance(v, dict) and "per_trial_s" in v
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description="per-trial overhead of trivial trials")
    p.add_argument("--workers", type=int, choices=(1, 2), required=True)
    p.add_argument("--trials", type=int, help="trials per system (default 4, --quick 2)")
    p.add_argument("--systems", default="abcd", help="which of a, b, c, d to run")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    n = args.trials or (2 if args.quick else 4)
    result = measure(args.workers, n, args.systems)
    print(
        write_result(f"overhead_{args.workers}w", {"workers": args.workers, "trials": n, "systems": result}, args.quick)
    )


if __name__ == "__main__":
    main()
