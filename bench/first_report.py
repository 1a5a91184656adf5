"""Where the seconds go from ``raysweep run`` to the first trial's first report.

Runs ``run_sweep`` in this process, as ``raysweep run`` does (embedded Ray, W&B offline), on a
2-trial grid of the trivial loop with ``num_gpus`` 1 or 2, and stamps each phase: the process's
start (the OS's record), raysweep's imports, ``ray.init`` (``start_or_connect``), the pool's
start, Tune's ``fit``, the loop's first start and first report (its event log). The stamps come
from wrapping raysweep's own functions here; nothing in raysweep is changed.

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.first_report --workers 2
"""

from __future__ import annotations

import time

T_MAIN = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import psutil  # noqa: E402

RUNS = {"full": 3, "quick": 1}
TOTAL = "loop's first report"


def part(quick: bool) -> None:
    """Fresh processes, sizes interleaved; the figure is the median of each size's totals."""
    from bench.common import median, write_result

    runs: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    for _ in range(RUNS["quick" if quick else "full"]):
        for workers in runs:
            out = subprocess.run(
                [sys.executable, "-m", "bench.first_report", "--one", "--workers", str(workers)],
                capture_output=True,
                text=True,
                check=True,
            )
            print(out.stdout, flush=True)
            runs[workers].append(json.loads(out.stdout.splitlines()[-1]))
    medians = {f"{w}w": round(median(r[TOTAL] for r in rs if TOTAL in r), 2) for w, rs in runs.items()}
    print(f"first report (s after the process started), median: {medians}")
    print(write_result("first_report", {"median_s": medians, "runs": {f"{w}w": rs for w, rs in runs.items()}}, quick))


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.first_report", description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--one", action="store_true", help="one run in this process, its stamps printed")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    if not args.one:
        part(args.quick)
        return 0
    started = psutil.Process().create_time()
    stamps: dict[str, float] = {"python started": started, "bench main": T_MAIN}

    import raysweep.driver.experiment as experiment
    import raysweep.driver.sweep as sweep_module
    from raysweep.driver.request import RunRequest
    from raysweep.spec import parse_spec

    stamps["raysweep imported"] = time.time()

    def stamped(name: str, fn):
        def wrapper(*a, **k):
            stamps.setdefault(f"{name} called", time.time())
            out = fn(*a, **k)
            stamps.setdefault(f"{name} returned", time.time())
            return out

        return wrapper

    experiment.start_or_connect = stamped("ray.init (start_or_connect)", experiment.start_or_connect)
    experiment.start_pool = stamped("start_pool", experiment.start_pool)
    experiment.make_trainable = stamped("make_trainable", experiment.make_trainable)
    tuner_cls = experiment.tune.Tuner
    tuner_cls.fit = stamped("Tuner.fit", tuner_cls.fit)

    with tempfile.TemporaryDirectory() as tmp:
        events = Path(tmp) / "events.jsonl"
        spec = parse_spec(
            {
                "method": "grid",
                "metric": {"name": "score"},
                "parameters": {"x": {"values": [0.1, 0.3]}, "num_gpus": {"value": args.workers}},
                "raysweep": {
                    "train_loop": "bench.loops:smoke",
                    "base_config": {"epochs": 3, "bench_events": str(events)},
                },
            }
        )
        code = sweep_module.run_sweep(
            spec, RunRequest(name="first", storage=Path(tmp) / "runs", quiet=True, wandb="offline")
        )
        rows = [json.loads(line) for line in events.read_text().splitlines()] if events.exists() else []
    starts = [r["t"] for r in rows if r["kind"] == "start"]
    reports = [r["t"] for r in rows if r["kind"] == "report"]
    if starts:
        stamps["loop's first start"] = min(starts)
    if reports:
        stamps["loop's first report"] = min(reports)
    previous = started
    print(f"workers per trial: {args.workers}; exit {code}")
    for name, t in sorted(stamps.items(), key=lambda kv: kv[1]):
        print(f"{t - started:7.2f} s  (+{t - previous:5.2f})  {name}")
        previous = t
    print(json.dumps({name: round(t - started, 3) for name, t in stamps.items()}))
    return code


if __name__ == "__main__":
    sys.exit(main())
