"""A trial's side of the warm workers' pool (``pool.py``): it borrows one worker per rank, on the
rank's node, and gives them back when it ends, waiting out a restart of the pool.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import ray

from raysweep.placement import RankPlace
from raysweep.trial.cpu_threads import ThreadCount, ThreadShare

POOL_RESTART_WAIT_S = 120.0


@dataclass
class Lease:
    """Workers lent to one trial, rank r's first; ``broken`` (set by ``gang.run``) ends them when
    they come back."""

    id: int
    workers: list[Any]
    group: Any  # the placement group that holds their slots
    broken: bool = False
    threads: ThreadCount | None = None  # what its CPU ranks start with (None: GPU ranks)


def borrow(pool: Any, places: list[RankPlace], group: Any, share: ThreadShare | None = None) -> Lease:
    """A worker for each rank at its place (``group``, the trial's placement group, holds their
    resources), its CPU ranks with ``share`` of their node (``cpu_threads.py``)."""
    ranks = [(place.node_id, place.gpu) for place in places]
    lease, workers, threads = _ask(pool.lend, ranks, group.id.hex() if group else None, share)
    return Lease(lease, workers, group, threads=threads)


def give_back(pool: Any, lease: Lease) -> None:
    _ask(pool.give_back, lease.id, lease.broken, lease.workers)


def _ask(method: Any, *args: Any) -> Any:
    """Call the pool, waiting while Ray restarts it: the driver's node can be a node that dies
    (a driver attaches to any raylet of its machine), and a trial that asks the pool during its
    restart must not fail for it. A lend that ran but whose answer was lost is ended with
    its trial's placement group (``WorkerPool._end_abandoned``)."""
    deadline = time.monotonic() + POOL_RESTART_WAIT_S
    while True:
        try:
            return ray.get(method.remote(*args))
        except ray.exceptions.ActorUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
