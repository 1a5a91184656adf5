"""Part 6, scale: a 2,000-trial sweep of 1-s trials (3 reports each, no compute) on 2 slots.

Its ideal wall time is trials x 1 s / slots (1,000 s); efficiency = ideal / the sweep's wall
from its first trial's start to its last trial's end (start-up is part 1's and the start-up
probe's business). Also: every trial recorded as done, the driver's RSS over the sweep (is it
flat: the peak of the last tenth against the peak of the second tenth), and the driver's own
work per result (``driver_per_result``: SweepMonitor's and ResultLog's per-result calls timed
on a run dir already holding 10, 1,000 and 10,000 trials: constant when the cost is).

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.scale [--trials 2000] [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import systems
from bench.common import RssSampler, write_result
from raysweep.driver.monitor import SweepMonitor
from raysweep.driver.result_log import ResultLog

TRIAL_S = 1.0
SLOTS = 2


def scale_spec(n: int) -> dict[str, Any]:
    return {
        "name": "bench-scale",
        "method": "grid",
        "metric": {"name": "score", "goal": "minimize"},
        "parameters": {"x": {"values": list(range(n))}},
        "raysweep": {"train_loop": "bench.loops:scale", "base_config": {"trial_s": TRIAL_S, "reports": 3}},
    }


def peaks_by_tenth(timeline: list[tuple[float, float]], start: float, end: float) -> list[float]:
    """Peak driver RSS (MiB) in each tenth of [start, end]."""
    out = []
    for i in range(10):
        lo, hi = start + (end - start) * i / 10, start + (end - start) * (i + 1) / 10
        out.append(round(max((m for t, m in timeline if lo <= t <= hi), default=float("nan")), 1))
    return out


def sweep(n: int) -> dict[str, Any]:
    from raysweep.driver.request import RunRequest
    from raysweep.driver.sweep import run_sweep

    workdir = Path(tempfile.mkdtemp(prefix="raysweep_bench_scale_"))
    spec, _ = systems.spec_trials(scale_spec(n))
    started = time.time()
    with RssSampler(interval_s=1.0) as rss:
        code = run_sweep(spec, RunRequest(name="s", storage=workdir, wandb="disabled", quiet=True))
    ended = time.time()
    rows = systems.read_trials(workdir / "s" / systems.TRIALS_FILE)
    done = [r for r in rows if r.get("status") == "done" and r.get("iterations") == 3]
    first_start = min(r["start"] for r in rows)
    last_end = max(r.get("end", 0) for r in rows)
    ideal = n * TRIAL_S / SLOTS
    tenths = peaks_by_tenth(rss.driver_timeline, first_start, last_end)
    return {
        "exit_code": code,
        "trials": n,
        "recorded": len(rows),
        "done_with_3_reports": len(done),
        "ideal_s": ideal,
        "sweep_wall_s": round(last_end - first_start, 1),
        "run_sweep_wall_s": round(ended - started, 1),
        "efficiency": round(ideal / (last_end - first_start), 3),
        "efficiency_incl_startup": round(ideal / (ended - started), 3),
        "per_trial_s": round((last_end - first_start) * SLOTS / n, 3),
        "driver_rss_mib_by_tenth": tenths,
        "driver_rss_growth_last_vs_second_tenth": round(tenths[-1] / tenths[1], 3),
        "trials_file_bytes": (workdir / "s" / systems.TRIALS_FILE).stat().st_size,
    }


@dataclass(eq=False)
class _Trial:
    """What the callbacks read of a Tune trial."""

    trial_id: str
    config: dict
    path: str
    local_path: str
    status: str = "RUNNING"
    checkpoint: None = None

    def init_local_path(self) -> None:
        Path(self.local_path).mkdir(parents=True, exist_ok=True)


def driver_per_result(sizes: tuple[int, ...] = (10, 1000, 10000), results: int = 300) -> dict[str, float]:
    """Microseconds of SweepMonitor + ResultLog work per result, by trials already in the run dir."""
    spec, _ = systems.spec_trials(scale_spec(2))
    out = {}
    for size in sizes:
        run_dir = Path(tempfile.mkdtemp(prefix="raysweep_bench_driver_"))
        monitor, log = SweepMonitor(spec, run_dir, budget=size + 1, quiet=True), ResultLog()
        trials = []
        for i in range(size + 1):
            path = run_dir / f"t{i}"
            path.mkdir()
            trials.append(_Trial(f"t{i}", {"x": i}, str(path), str(path)))
            monitor.on_trial_start(0, trials, trials[-1])
            monitor.on_trial_result(0, trials, trials[-1], {"score": 1.0, "training_iteration": 1})
        last = trials[-1]
        t0 = time.perf_counter()
        for it in range(2, results + 2):
            result = {"score": 1.0 / it, "training_iteration": it, "epoch": it, "time_total_s": 0.1 * it}
            monitor.on_trial_result(it, trials, last, result)
            log.log_trial_result(it, last, result)
        out[f"{size}_trials_us"] = round((time.perf_counter() - t0) / results * 1e6, 1)
        log.on_experiment_end(trials)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description="a 2,000-trial sweep of 1-s trials on 2 slots")
    p.add_argument("--trials", type=int, help="default 2000, --quick 20")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    n = args.trials or (20 if args.quick else 2000)
    per_result = driver_per_result((10, 100) if args.quick else (10, 1000, 10000), 50 if args.quick else 300)
    print(f"scale: driver per result {per_result}", flush=True)
    result = sweep(n)
    print(f"scale: {n} trials: {result}", flush=True)
    print(write_result("scale", {"sweep": result, "driver_per_result_us": per_result}, args.quick))


if __name__ == "__main__":
    main()
