"""``python -m bench.handoff``: how long a placement group waiting for slots takes them after the
group holding them is removed, as a trial started ahead of its slots waits (``trial/slots.py``).

Three ways side by side, each on its own embedded Ray of 2 CPUs, ``--rounds`` handoffs each (the
waiting group has waited 1-2 s, as a trial started ahead does):

* ``ray_default``: remove the group, nothing else;
* ``nudge``: ``slots.release`` (the removal, then its nudges), Ray's settings as they are;
* ``nudge_gcs``: the same on a GCS started with ``ray_settings.STARTED_RAY``'s placement-group
  retries (10-50 ms);
* ``nudge_report``: the same with all of ``ray_settings.STARTED_RAY``, the raylet's resource
  report every 20 ms too (raysweep's embedded Ray and `raysweep slurm`'s nodes).

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.handoff [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

from bench.common import REPO, write_result
from raysweep.env import PG_RETRY_MAX, PG_RETRY_MIN
from raysweep.ray_settings import STARTED_RAY

MODES = ("ray_default", "nudge", "nudge_gcs", "nudge_report")


def handoffs(mode: str, rounds: int) -> list[float]:
    """In this process: ``rounds`` handoffs of 2 CPUs from one group to a waiting one, in seconds."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    from raysweep.trial.slots import release

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")
    rng, out = random.Random(0), []
    for _ in range(rounds):
        holder = placement_group([{"CPU": 2}])
        ray.get(holder.ready())
        waiting = placement_group([{"CPU": 2}])
        time.sleep(1.0 + rng.random())
        freed = time.monotonic()
        if mode == "ray_default":
            remove_placement_group(holder)
        else:
            release(holder, own=True)
        ray.get(waiting.ready())
        out.append(round(time.monotonic() - freed, 3))
        remove_placement_group(waiting)
        time.sleep(0.3)  # the nudges of this round end
    ray.shutdown()
    return out


def run(mode: str, rounds: int) -> list[float]:
    """``handoffs`` in a process of its own: the GCS reads its settings as it starts."""
    env = {k: v for k, v in os.environ.items() if k not in STARTED_RAY} | {"PYTHONPATH": str(REPO)}
    if mode == "nudge_gcs":
        env |= {key: STARTED_RAY[key] for key in (PG_RETRY_MIN, PG_RETRY_MAX)}
    elif mode == "nudge_report":
        env |= STARTED_RAY
    code = f"import json; from bench.handoff import handoffs; print(json.dumps(handoffs({mode!r}, {rounds})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--quick", action="store_true", help="3 rounds")
    args = p.parse_args()
    rounds = 3 if args.quick else args.rounds
    out = {}
    for mode in MODES:
        seconds = run(mode, rounds)
        out[mode] = {"median_s": statistics.median(seconds), "max_s": max(seconds), "seconds": seconds}
        print(mode, json.dumps(out[mode]), flush=True)
    print(write_result("handoff", out, args.quick))


if __name__ == "__main__":
    main()
