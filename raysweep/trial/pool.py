"""The sweep's warm DDP workers: started once per node, lent to every trial, whatever its size.

Starting a worker is most of a short trial's cost: a Ray worker process, then torch and
torch._dynamo imported (docs/benchmarks.md). So the driver starts one pool per sweep, and the
pool starts each node's workers (as many as the node has worker slots) while Tune is still
starting. A trial borrows as many workers as it has ranks, on its own node, and gives them back
when it ends: 1-worker and 2-worker trials run on the same processes, and a trial of a new size
waits for no process to start.

Resources stay with Tune: a trial's placement group holds its CPUs/GPUs and worker slots (the
admission control of ``placement.py``); the workers hold none of their own, and compute only
while lent to a trial that holds them. A worker serves one GPU for its whole life (the first it
was lent for): a rank that needs GPU g gets an idle worker of g, else one that has served no GPU
yet, else a new worker that replaces an idle one of another GPU. So a worker never holds a
second CUDA context, and N workers on an N-GPU node hold at most N contexts.

The pool is an actor of the driver, on its node, so it and its workers end with the sweep. A
worker whose trial failed, or whose borrower ended without giving it back (that trial's
placement group is gone), is ended rather than lent again: its state is unknown.
"""

from __future__ import annotations

import itertools
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raysweep.trial.warm_rank import DDPWorker


@ray.remote(num_cpus=0)
class WorkerPool:
    def __init__(self) -> None:
        self._slots: dict[str, int] = {}  # node id -> most workers it may have (its worker slots)
        self._idle: dict[str, list[Any]] = {}  # node id -> workers waiting for a trial
        self._lent: dict[int, tuple[str, str | None, list[Any]]] = {}  # lease -> (node, borrower's group, workers)
        self._gpu: dict[Any, str] = {}  # worker -> the one GPU it serves (workers that served one)
        self._ids = itertools.count()

    def start(self, node_id: str, count: int) -> None:
        """Start workers on ``node_id`` until it has ``count`` (they import torch meanwhile)."""
        self._slots[node_id] = count
        self._idle.setdefault(node_id, []).extend(_new_worker(node_id) for _ in range(count - self._have(node_id)))

    def _have(self, node_id: str) -> int:
        return len(self._idle.get(node_id, [])) + sum(len(w) for n, _, w in self._lent.values() if n == node_id)

    def lend(self, node_id: str, count: int, group: str | None, gpus: list[str] | None = None) -> tuple[int, list[Any]]:
        """``count`` workers on ``node_id`` for the trial holding placement group ``group``; rank r
        will use GPU ``gpus[r]`` (None: CPU ranks)."""
        self._end_abandoned()
        idle = self._idle.setdefault(node_id, [])
        alive = _alive(idle)  # a worker that died while idle would fail the trial that borrows it
        for dead in set(idle) - set(alive):
            self._forget(dead)
        idle[:] = alive
        # A trial's placement group holds its slots, so a lend never waits; the pool's count of lent
        # workers can lag behind a node's failure, so extra workers are made now and ended on return.
        workers = [self._take(node_id, idle, gpus[r] if gpus else None) for r in range(count)]
        lease = next(self._ids)
        self._lent[lease] = (node_id, group, workers)
        return lease, workers

    def _take(self, node_id: str, idle: list[Any], gpu: str | None) -> Any:
        """An idle worker for a rank on ``gpu``: one that serves it, else one that serves none yet;
        else a new one, and an idle worker of another GPU is ended in its place."""
        fits = [w for w in idle if gpu is None or self._gpu.get(w) == gpu] or [w for w in idle if w not in self._gpu]
        if fits:
            worker = fits[0]
            idle.remove(worker)
        else:
            if idle:
                _end([self._forget(idle.pop())])
            worker = _new_worker(node_id)
        if gpu is not None:
            self._gpu[worker] = gpu
        return worker

    def _forget(self, worker: Any) -> Any:
        self._gpu.pop(worker, None)
        return worker

    def give_back(self, lease: int, broken: bool, workers: list[Any]) -> None:
        node_id, _, _ = self._lent.pop(lease, (None, None, None))  # unknown: lent before the pool restarted
        over = node_id is not None and self._have(node_id) + len(workers) > self._slots.get(node_id, len(workers))
        if broken or node_id is None or over:  # `over`: never more workers on a node than its slots
            _end([self._forget(w) for w in workers])
        else:  # first in line again, in rank order: a trial of the same size gets the same ranks
            self._idle[node_id][:0] = workers

    def _end_abandoned(self) -> None:
        """End the workers of trials that ended without giving them back (their group is gone)."""
        groups = {g for _, g, _ in self._lent.values() if g}
        if not groups:
            return
        table = ray.util.placement_group_table()
        gone = {g for g in groups if table.get(g, {}).get("state", "REMOVED") == "REMOVED"}
        for lease in [k for k, (_, g, _) in self._lent.items() if g in gone]:
            _end([self._forget(w) for w in self._lent.pop(lease)[2]])


def _alive(workers: list[Any]) -> list[Any]:
    """``workers`` less those whose process died (a worker still starting counts as alive)."""
    pings = [w.ping.remote() for w in workers]
    ready, _ = ray.wait(pings, num_returns=len(pings), timeout=0.5)
    dead = set()
    for ref in ready:
        try:
            ray.get(ref)
        except ray.exceptions.RayActorError:
            dead.add(ref)
    return [w for w, ref in zip(workers, pings, strict=True) if ref not in dead]


def _new_worker(node_id: str) -> Any:
    return DDPWorker.options(
        num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
    ).remote()


def _end(workers: list[Any]) -> None:
    for worker in workers:
        ray.kill(worker)


def start_pool(node_slots: dict[str, int]) -> Any:
    """The sweep's pool, already starting ``node_slots[node]`` workers on every node."""
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
    pool = WorkerPool.options(scheduling_strategy=here, max_restarts=-1).remote()  # on the driver's node
    for node_id, slots in node_slots.items():
        pool.start.remote(node_id, slots)
    return pool
