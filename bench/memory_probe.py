"""What grows in the driver over a long sweep: Python objects counted by type while it runs.

Runs part 6's sweep (``bench.scale``: 1-worker trials of the trivial loop on 2 slots, shorter
trials here) and, from a thread in the driver, counts the objects the garbage collector tracks,
by type, every ``--every`` seconds, with the driver's RSS. Prints the types whose count grew
most between the first sample taken after ``--warmup`` trials' worth of time and the last one,
per trial: what the driver keeps per trial.

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.memory_probe --trials 600 --trial-s 0.2
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import psutil

from bench import scale, systems


def census() -> tuple[Counter, Counter]:
    """Count and shallow bytes of the objects the collector tracks, by type name."""
    counts: Counter = Counter()
    sizes: Counter = Counter()
    for obj in gc.get_objects():
        name = f"{type(obj).__module__}.{type(obj).__qualname__}"
        counts[name] += 1
        sizes[name] += sys.getsizeof(obj, 0)
    return counts, sizes


def main() -> None:
    p = argparse.ArgumentParser(description="count the driver's objects by type over a long sweep")
    p.add_argument("--trials", type=int, default=600)
    p.add_argument("--trial-s", type=float, default=0.2)
    p.add_argument("--every", type=float, default=15.0)
    args = p.parse_args()
    from raysweep.driver.request import RunRequest
    from raysweep.driver.sweep import run_sweep

    doc = scale.scale_spec(args.trials)
    doc["raysweep"]["base_config"]["trial_s"] = args.trial_s
    spec, _ = systems.spec_trials(doc)
    workdir = Path(tempfile.mkdtemp(prefix="raysweep_bench_memory_"))
    samples: list[tuple[float, float, int, Counter, Counter]] = []
    done = threading.Event()
    me = psutil.Process()

    def sample() -> None:
        while not done.wait(args.every):
            rows = systems.read_trials(workdir / "s" / systems.TRIALS_FILE)
            ended = sum(1 for r in rows if r.get("status") == "done")
            counts, sizes = census()
            samples.append((time.time(), me.memory_info().rss / 2**20, ended, counts, sizes))
            print(
                f"  {ended} trials ended, driver RSS {samples[-1][1]:.0f} MiB, {sum(counts.values())} objects",
                flush=True,
            )

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    run_sweep(spec, RunRequest(name="s", storage=workdir, wandb="disabled", quiet=True))
    done.set()
    thread.join()
    if len(samples) < 2:
        print(f"fewer than 2 samples: the sweep ended within 2 x --every ({args.every} s); lower it")
        return
    first = next((s for s in samples if s[2] >= args.trials // 5), samples[0])
    last = samples[-1]
    trials = max(1, last[2] - first[2])
    print(
        f"from {first[2]} to {last[2]} trials ended: RSS {first[1]:.0f} -> {last[1]:.0f} MiB "
        f"({(last[1] - first[1]) * 1024 / trials:.1f} KiB per trial)"
    )
    growth = sorted(last[3], key=lambda k: last[4][k] - first[4].get(k, 0), reverse=True)[:20]
    print(f"{'type':60} {'objects/trial':>14} {'bytes/trial':>12}")
    for name in growth:
        objects = (last[3][name] - first[3].get(name, 0)) / trials
        size = (last[4][name] - first[4].get(name, 0)) / trials
        print(f"{name[:60]:60} {objects:14.1f} {size:12.0f}")


if __name__ == "__main__":
    main()
