"""Part 4's control: what Ray's own processes cost a lone trial that uses every core.

A 1-worker loop runs at ~0.9-0.95x a torchrun process inside Ray whether raysweep runs it or a bare
Ray actor does (part 4's (e)), and so does the loop in a fresh process spawned by a Ray actor,
with no Ray in it (docs/benchmarks.md, 2026-12-05, evening). What is left is the rest of Ray on
the node: the raylet, the GCS, the dashboard and its modules, the agents, the monitors, idle
workers. Here the same loop runs in a bare Ray actor (part 4's (e)) and every other process of
that Ray is stopped (SIGSTOP) for a window in the middle of it, then continued: the epochs
inside the window against those outside it, in the same run, and torchrun's in the same round.
(Their nice 19 or SCHED_IDLE for the window instead changed nothing: docs/benchmarks.md.)

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.ray_background [--quick]
"""

from __future__ import annotations

import argparse
import signal
import tempfile
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

import psutil

from bench import systems
from bench.common import median, read_events, write_result
from bench.ddp_scaling import median_of_pairs, ratio, samples_per_sec, scaling_spec

ROUNDS = {"full": 3, "quick": 1}
EPOCHS = {"full": 10, "quick": 6}  # ~2 s each on 2 cores: a window of 4 whole epochs, and some either side
STOP_AFTER_S = {"full": 3.5, "quick": 2.5}  # from the first report (epoch 1 is warm-up)
STOP_FOR_S = {"full": 8.0, "quick": 5.0}


class Window:
    """Stops every process of this driver's Ray but ``keep`` for ``stop_for_s``, ``stop_after_s``
    after ``events`` has its first report; always continues them."""

    def __init__(self, events: str, keep: int, stop_after_s: float, stop_for_s: float) -> None:
        self.events, self.keep = Path(events), keep
        self.stop_after_s, self.stop_for_s = stop_after_s, stop_for_s
        self.start = self.end = float("nan")
        self.stopped = 0
        self._over = threading.Event()  # the loop ended (or failed): stop nothing from then on
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not (self.events.exists() and '"report"' in self.events.read_text()):
            if self._over.wait(0.2):
                return
        if self._over.wait(self.stop_after_s):
            return
        others = [p for p in psutil.Process().children(recursive=True) if p.pid != self.keep]
        try:
            for p in others:
                with suppress(psutil.Error):
                    p.send_signal(signal.SIGSTOP)
                    self.stopped += 1
            self.start = time.time()
            time.sleep(self.stop_for_s)
        finally:
            self.end = time.time()
            for p in others:
                with suppress(psutil.Error):
                    p.send_signal(signal.SIGCONT)

    def __enter__(self) -> Window:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._over.set()
        self._thread.join()


def split_epochs(events: list[dict[str, Any]], start: float, end: float) -> tuple[list[float], list[float]]:
    """Rank 0's samples/sec of epochs 2.. wholly inside [start, end], and of those wholly outside
    it (an epoch spans the report before it to its own)."""
    inside, outside = [], []
    reports = [e for e in events if e["kind"] == "report" and e["rank"] == 0]
    for before, e in zip(reports, reports[1:]):
        sps = e["metrics"]["samples_per_sec"]
        if before["t"] >= start and e["t"] <= end:
            inside.append(sps)
        elif e["t"] <= start or before["t"] >= end:
            outside.append(sps)
    return inside, outside


def run_stopped_window(trial: dict[str, Any], quick: bool) -> dict[str, Any]:
    """The loop in a bare Ray actor (part 4's (e), without the memory sampler), Ray's other
    processes stopped for a window in the middle."""
    import ray

    size = "quick" if quick else "full"
    events = str(Path(tempfile.mkdtemp(prefix="raysweep_bench_bg_")) / "events.jsonl")
    config = {**trial["config"], "bench_events": events}
    with systems.bare_ray():
        actor = systems.start_bare_rank()
        rank_pid = ray.get(actor.pid.remote())
        with Window(events, rank_pid, STOP_AFTER_S[size], STOP_FOR_S[size]) as window:
            ray.get(actor.run.remote("transformer", config))
    inside, outside = split_epochs(read_events(events), window.start, window.end)
    return {
        "stopped_processes": window.stopped,
        "epochs_stopped": len(inside),
        "epochs_running": len(outside),
        "sps_ray_stopped": round(median(inside), 1) if inside else None,
        "sps_ray_running": round(median(outside), 1) if outside else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description="a lone trial inside Ray with Ray's other processes stopped for a window")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    size = "quick" if args.quick else "full"
    spec_doc = scaling_spec(False, 1)  # part 4's full epochs (~2 s): --quick runs fewer of them, once
    spec_doc["base_config"]["epochs"] = EPOCHS[size]
    _, trials = systems.spec_trials(spec_doc)
    rounds = []
    for i in range(ROUNDS[size]):
        runs = {}
        for key in sorted(("c_torchrun", "e_window"), reverse=i % 2 == 1):
            if key == "c_torchrun":
                r = systems.run_torchrun_agent(trials, "transformer", "exact_accuracy", "max")
                runs[key] = {"sps": samples_per_sec(r["events"]).get(1), "failed": r["failed"]}
            else:
                runs[key] = run_stopped_window(trials[0], args.quick)
        one = {**runs["e_window"], "sps_torchrun": runs["c_torchrun"]["sps"], "failed": runs["c_torchrun"]["failed"]}
        one["stopped_over_running"] = ratio(one["sps_ray_stopped"], one["sps_ray_running"])
        one["running_over_torchrun"] = ratio(one["sps_ray_running"], one["sps_torchrun"])
        one["stopped_over_torchrun"] = ratio(one["sps_ray_stopped"], one["sps_torchrun"])
        print(f"ray_background round {i}: {one}", flush=True)
        rounds.append(one)
    out = {
        key: median_of_pairs((r[key] for r in rounds), 3)
        for key in ("stopped_over_running", "running_over_torchrun", "stopped_over_torchrun")
    }
    print(f"ray_background: {out}", flush=True)
    print(write_result("ray_background", {"config": spec_doc["base_config"], **out, "rounds": rounds}, args.quick))


if __name__ == "__main__":
    main()
