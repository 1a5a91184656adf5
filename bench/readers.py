"""``raysweep show`` and ``raysweep report`` wall time on a run dir of N trials (default 256).

The run dir is written here, in the format a sweep leaves (``spec.json``, ``trials.jsonl``,
each trial's ``result.json``), from the stages spec with seeded random configurations: the
readers' cost depends on the files, not on how the trials ran. Each command runs as a user
runs it, a fresh ``python -m raysweep`` process, ``--repeats`` times; the median is kept.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, write_result
from raysweep.spec import load_spec, sample_points


def write_run_dir(root: Path, trials: int, epochs: int = 10, seed: int = 0) -> Path:
    """A finished sweep of ``trials`` trials of ``epochs`` reports each, as a driver leaves it."""
    spec = load_spec(REPO / "search_spaces" / "stages.yaml")
    run_dir = root / "readers"
    run_dir.mkdir(parents=True)
    (run_dir / "spec.json").write_text(json.dumps(spec.to_json()))
    rng = random.Random(seed)
    rows = []
    for i, config in enumerate(sample_points(spec, trials, seed)):
        trial_dir = run_dir / f"trial_{i:05d}"
        trial_dir.mkdir()
        loss, history = 2.0 + rng.random(), []
        for epoch in range(1, epochs + 1):
            loss *= 0.8 + 0.15 * rng.random()
            history.append(
                {
                    spec.objectives.single.name: 1 - loss / 3,
                    "val_loss": loss,
                    "samples_per_s": 900 + 100 * rng.random(),
                    "training_iteration": epoch,
                    "time_total_s": 3.0 * epoch,
                    "timestamp": 1.7e9 + 10 * i + epoch,
                }
            )
        (trial_dir / "result.json").write_text("".join(json.dumps(h) + "\n" for h in history))
        start = 1.7e9 + 10 * i
        rows.append(
            {
                "trial_id": f"t{i:05d}",
                "start": start,
                "config": config,
                "num_workers": config.get("num_gpus", 1),
                "trial_dir": str(trial_dir),
                "status": "done",
                "iterations": epochs,
                "metrics": history[-1],
                "wall_s": 30.0,
                "end": start + 30,
            }
        )
    (run_dir / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run_dir


def time_command(args: list[str], repeats: int) -> float:
    walls = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "raysweep", *args], check=True, cwd=REPO, stdout=subprocess.DEVNULL)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls)


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.readers", description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=256)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="16 trials, 1 repeat")
    args = p.parse_args()
    trials, repeats = (16, 1) if args.quick else (args.trials, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = write_run_dir(Path(tmp), trials)
        figures = {
            "trials": trials,
            "show_s": time_command(["show", str(run_dir)], repeats),
            "show_json_s": time_command(["show", str(run_dir), "--json"], repeats),
            "report_s": time_command(["report", str(run_dir), "-o", str(Path(tmp) / "r.html")], max(1, repeats // 2)),
            "python_startup_s": statistics.median(_wall([sys.executable, "-c", "pass"]) for _ in range(repeats)),
        }
    for key, value in figures.items():
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")
    write_result("readers", figures, args.quick)
    return 0


def _wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - t0


if __name__ == "__main__":
    sys.exit(main())
