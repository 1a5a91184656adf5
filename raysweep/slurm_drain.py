"""``python -m raysweep.slurm_drain ADDRESS SECONDS``: a ``raysweep slurm`` job told that it ends
(SLURM's ``--signal`` before its time limit, a preemption, ``scancel --signal``) drains its own
Ray nodes with that deadline instead of ending its sweep at once.

Every trial then leaves at its next report that carries a checkpoint (a ``program:`` script gets
SIGTERM: ``trial/preemption.py``), counted as a preemption, and no trial starts; this returns once
no trial holds a slot, or at the deadline. The batch script then tells the sweep to save its state
and exit; the job SLURM brings back (``--requeue``) goes on from those checkpoints
(``--resume-existing``), having lost no finished epoch.
"""

from __future__ import annotations

import sys
import time

from raysweep import private_api
from raysweep.placement import SLOT


def slots_held() -> float:
    import ray

    return ray.cluster_resources().get(SLOT, 0.0) - ray.available_resources().get(SLOT, 0.0)


def main(argv: list[str]) -> int:
    import ray

    address, seconds = argv[0], float(argv[1])
    deadline = time.time() + seconds
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    private_api.drain(nodes, int(deadline * 1000), "the SLURM job ends")
    print(f"raysweep: the job ends: {len(nodes)} node(s) drain; each trial leaves at its next checkpoint", flush=True)
    while slots_held() > 0 and time.time() < deadline:
        time.sleep(1)
    held = slots_held()
    print(
        f"raysweep: {'every trial left' if held <= 0 else f'{held:g} slot(s) still held at the deadline'}; the sweep saves its state"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
