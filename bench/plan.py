"""``python -m bench.plan``: the plan (``validate --plan``) against what sweeps spend.

An embedded Ray with 4 GPUs that do not exist on this 2-CPU machine (``RAYSWEEP_FAKE_GPUS``:
two workers at once), the smoke loop sleeping a fixed time per report.

1. grid: 2 x values, sizes 1 and 2 (num_gpus), 3 reports of R s each, 2 trials at once: the
   plan's GPU-hours against the sweep's spend (workers x the seconds each trial ran, start-up
   included), and the share start-up adds. R = 3 and 10 s (quick: 1 s).
2. asha: a random sweep of 32 trials of up to 4 reports (ASHA: grace 1, max_t 4, factor 2),
   one at a time, 3 seeds (quick: 8 trials, 1 seed): the plan's worker-reports against the
   reports the sweep made. Which trials ASHA stops is each sweep's own draw.

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.plan [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from bench.common import REPO, write_result
from raysweep.runs.files import TRIALS_FILE, read_trials


def raysweep(*args: str) -> subprocess.CompletedProcess:
    env = os.environ | {"PYTHONPATH": str(REPO), "RAYSWEEP_FAKE_GPUS": "4", "WANDB_SILENT": "true"}
    out = subprocess.run([sys.executable, "-m", "raysweep", *args], capture_output=True, text=True, env=env, cwd=REPO)
    if out.returncode != 0:
        raise RuntimeError(f"raysweep {' '.join(args)} exited {out.returncode}:\n{out.stderr[-2000:]}")
    return out


def sweep(where: Path, doc: dict[str, Any], epoch_s: float | None) -> dict[str, Any]:
    """One sweep: its plan, then its run; what it spent and the reports it made."""
    spec = where / f"{doc['name']}.yaml"
    spec.write_text(yaml.safe_dump(doc))
    seconds = ["--epoch-seconds", f"{epoch_s:g}"] if epoch_s else []
    plan = json.loads(raysweep("validate", str(spec), "--plan", "--json", *seconds).stdout)
    raysweep("run", str(spec), "--storage", str(where / "runs"), "--wandb", "disabled", *seconds)
    rows = read_trials(where / "runs" / doc["name"] / TRIALS_FILE)
    spent_h = sum(r["num_workers"] * r.get("run_s", 0.0) for r in rows) / 3600
    reports = sum((r.get("iterations") or 0) * r["num_workers"] for r in rows)
    return {"plan": plan, "spent_hours": round(spent_h, 6), "worker_reports": reports, "trials": len(rows)}


def grid(where: Path, report_s: float, values: int) -> dict[str, Any]:
    doc = {
        "name": f"grid-{report_s:g}s",
        "method": "grid",
        "metric": {"name": "score", "goal": "minimize"},
        "parameters": {
            "x": {"values": [round(0.1 * (i + 1), 1) for i in range(values)]},
            "num_gpus": {"values": [1, 2]},
        },
        "raysweep": {"train_loop": "train_loops.smoke:train", "base_config": {"epochs": 3, "sleep": report_s}},
    }
    out = sweep(where, doc, report_s)
    out["spent_over_plan"] = round(out["spent_hours"] / out["plan"]["hours"], 3)
    print(
        f"grid, {values * 2} trials, reports of {report_s:g} s: plan {out['plan']['hours']:.4g} GPU-hours, spent "
        f"{out['spent_hours']:.4g} ({out['spent_over_plan']:.2f}x); reports {out['worker_reports']} of the plan's "
        f"{out['plan']['worker_reports']:g}"
    )
    return out


def asha(where: Path, trials: int, seed: int) -> dict[str, Any]:
    doc = {
        "name": f"asha-{seed}",
        "method": "random",
        "run_cap": trials,
        "metric": {"name": "score", "goal": "minimize"},
        "parameters": {"x": {"min": 0.0, "max": 1.0}},
        "raysweep": {
            "train_loop": "train_loops.smoke:train",
            "base_config": {"epochs": 4, "sleep": 0.0},
            "scheduler": {"type": "asha", "grace_period": 1, "max_t": 4, "reduction_factor": 2},
            "max_concurrent": 1,
            "seed": seed,
        },
    }
    out = sweep(where, doc, None)
    out["made_over_plan"] = round(out["worker_reports"] / out["plan"]["worker_reports"], 3)
    print(
        f"asha, {trials} trials, seed {seed}: {out['worker_reports']} reports made, the plan's "
        f"{out['plan']['worker_reports']:.4g} ({out['made_over_plan']:.2f}x)"
    )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_plan_") as tmp:
        where = Path(tmp)
        grids = [grid(where, s, 1 if args.quick else 3) for s in ((1.0,) if args.quick else (3.0, 10.0))]
        ashas = [asha(where, 8 if args.quick else 32, seed) for seed in ((3,) if args.quick else (3, 4, 5))]
    ratios = [a["made_over_plan"] for a in ashas]
    path = write_result(
        "plan", {"grid": grids, "asha": ashas, "asha_made_over_plan_median": statistics.median(ratios)}, args.quick
    )
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
