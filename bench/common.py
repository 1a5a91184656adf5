"""Shared by every benchmark part: event logs, memory sampling, results files, medians."""

from __future__ import annotations

import json
import os
import platform
import statistics
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psutil

RESULTS = Path(os.environ.get("BENCH_RESULTS_DIR") or Path(__file__).resolve().parent / "results")
RAW = RESULTS / "raw"  # per-trial tables behind a part's summary: kept out of git (.gitignore)
REPO = Path(__file__).resolve().parent.parent


def read_events(path: str | os.PathLike) -> list[dict[str, Any]]:
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def loop_spans(events: Iterable[dict[str, Any]]) -> list[tuple[dict[str, Any], float]]:
    """Each loop a worker process ran: its start event and its seconds (start to end)."""
    starts: dict[tuple, dict[str, Any]] = {}
    spans = []
    for e in events:
        key = (e["pid"], e.get("tag"))
        if e["kind"] == "start":
            starts[key] = e
        elif e["kind"] == "end" and key in starts:
            start = starts.pop(key)
            spans.append((start, e["t"] - start["t"]))
    return spans


def busy_worker_seconds(events: Iterable[dict[str, Any]]) -> float:
    """Sum over worker processes of (loop end - loop start): the time the workers computed."""
    return sum(seconds for _, seconds in loop_spans(events))


def median(xs: Iterable[float]) -> float:
    xs = list(xs)
    return statistics.median(xs) if xs else float("nan")


def time_to(curve: Iterable[tuple[float, float]], target: float) -> float | None:
    """Seconds until a best-so-far curve of (seconds, value) first reached ``target``; None if never."""
    return next((t for t, v in curve if v >= target), None)


def per_trial_seconds(spans: list[tuple[float, float]]) -> list[float]:
    """Sequential trials: the gaps between consecutive trial ends (the first from its own start).

    Each gap holds one trial's whole cost, launch and teardown included.
    """
    spans = sorted(spans, key=lambda s: s[1])
    if not spans:
        return []
    ends = [spans[0][0]] + [end for _, end in spans]
    return [b - a for a, b in zip(ends, ends[1:], strict=False)]


class RssSampler:
    """Peak RSS of this process and of all its descendants (Ray's processes, torchrun's ranks).

    Sampled every ``interval_s`` on a thread. A sum of RSS counts a page shared by several
    processes once per process (Ray's object store; the libraries of processes forked from one
    parent, like the dashboard's nine modules): an upper bound. PSS splits each shared page among
    its sharers, so its sum is what the processes hold together; both are kept.

    PSS is read every ``pss_interval_s`` only: the kernel walks every mapping of a process for it
    (smaps_rollup), and Ray's ~15 processes made that a quarter of one core at every 0.25 s, taken
    from the system measured and not from torchrun's two. The thread's own CPU time is recorded.
    """

    def __init__(self, interval_s: float = 0.25, pss_interval_s: float = 5.0) -> None:
        self.interval_s = interval_s
        self.pss_interval_s = pss_interval_s
        self.cpu_s = 0.0  # this thread's own CPU time: what measuring cost the system measured
        self._pss_at = 0.0
        self.peak_driver = 0
        self.peak_children = 0
        self.peak_children_pss = 0
        self.driver_timeline: list[tuple[float, float]] = []  # (time, driver RSS MiB) at every sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        rss = me.memory_info().rss
        self.peak_driver = max(self.peak_driver, rss)
        self.driver_timeline.append((time.time(), rss / 2**20))
        with_pss = time.monotonic() >= self._pss_at
        if with_pss:
            self._pss_at = time.monotonic() + self.pss_interval_s
        total = total_pss = 0
        for child in me.children(recursive=True):
            try:
                if with_pss:
                    memory = child.memory_full_info()  # /proc/PID/smaps_rollup: every mapping walked
                    total_pss += memory.pss
                else:
                    memory = child.memory_info()  # /proc/PID/statm
                total += memory.rss
            except psutil.Error:
                pass
        self.peak_children = max(self.peak_children, total)
        self.peak_children_pss = max(self.peak_children_pss, total_pss)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval_s)
        self.cpu_s = time.thread_time()  # read by as_dict after __exit__ joined this thread

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def as_dict(self) -> dict[str, float]:
        mib = 1024 * 1024
        return {
            "driver_peak_rss_mib": round(self.peak_driver / mib, 1),
            "children_peak_rss_mib": round(self.peak_children / mib, 1),
            "children_peak_pss_mib": round(self.peak_children_pss / mib, 1),
            "sampler_cpu_s": round(self.cpu_s, 2),
        }


def machine() -> dict[str, Any]:
    """What the figures were measured on (they mean little without it)."""
    import ray
    import torch

    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "ray": ray.__version__,
        "torch": torch.__version__,
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def write_result(name: str, data: dict[str, Any], quick: bool, directory: Path = RESULTS) -> Path:
    """A part's summary in ``RESULTS`` (committed, one per part), or its raw tables in ``RAW``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}{'_quick' if quick else ''}.json"
    data = {"part": name, "quick": quick, "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": machine(), **data}
    path.write_text(json.dumps(data, indent=2, default=float) + "\n")
    return path
