"""A trial's side of the warm workers' pool (``pool.py``): it borrows as many workers as it has
ranks, on its own node, and gives them back when it ends, waiting out a restart of the pool.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import ray

POOL_RESTART_WAIT_S = 120.0


@dataclass
class Lease:
    """Workers lent to one trial; ``broken`` (set by ``gang.run``) ends them when they come back."""

    id: int
    workers: list[Any]
    broken: bool = False


def borrow(pool: Any, count: int, gpus: list[str] | None = None) -> Lease:
    """``count`` of the pool's workers on this trial's node (its placement group holds their
    resources), rank r's serving ``gpus[r]``."""
    pg = ray.util.get_current_placement_group()
    node_id = ray.get_runtime_context().get_node_id()
    lease, workers = _ask(pool.lend, node_id, count, pg.id.hex() if pg else None, gpus)
    return Lease(lease, workers)


def give_back(pool: Any, lease: Lease) -> None:
    _ask(pool.give_back, lease.id, lease.broken, lease.workers)


def _ask(method: Any, *args: Any) -> Any:
    """Call the pool, waiting while Ray restarts it: the driver's node can be a node that dies
    (a driver attaches to any raylet of its machine), and a trial that asks the pool during its
    restart must not fail for it. A lend that ran but whose answer was lost is ended with
    its trial's placement group (``_end_abandoned``)."""
    deadline = time.monotonic() + POOL_RESTART_WAIT_S
    while True:
        try:
            return ray.get(method.remote(*args))
        except ray.exceptions.ActorUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
