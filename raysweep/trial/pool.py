"""The sweep's warm DDP workers: started once per node, lent to every trial, whatever its size.

Starting a worker is most of a short trial's cost: a Ray worker process, then torch and
torch._dynamo imported (docs/benchmarks.md). So the driver starts one pool per sweep, and the
pool starts each node's workers (as many as the node hosts) while Tune is still starting. A
trial borrows as many workers as it has ranks on each of its nodes (one node, or several whole
nodes), and gives them back when it ends: 1-worker and 2-worker trials run on the same
processes, and a trial of a new size waits for no process to start.

Resources stay with Tune: a trial's placement group holds its CPUs/GPUs and worker slots (the
admission control of ``placement.py``); the workers hold none of their own, and compute only
while lent to a trial that holds them. A worker serves one GPU for its whole life (the first it
was lent for): a rank that needs GPU g gets an idle worker of g, else one that has served no GPU
yet, else a new worker that replaces an idle one of another GPU. So a worker never holds a
second CUDA context, and N workers on an N-GPU node hold at most N contexts.

The rules are ``Lending``'s, plain bookkeeping with no Ray (tests drive it by hand); the
``WorkerPool`` actor adds what needs Ray: starting and ending workers, checking that an idle one
is alive, finding trials that ended without giving theirs back. It runs on the driver's node, so
it and its workers end with the sweep; it is the sweep's ``Holdings`` too. A worker whose trial
failed, or whose borrower ended without giving it back (that trial's placement group is gone), is
ended rather than lent again: its state is unknown.
"""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raysweep.trial.cpu_threads import ThreadCount, ThreadShare, threads_on_node
from raysweep.trial.holdings import GROUPS, Holdings, on_driver_node
from raysweep.trial.program import GRACE_S
from raysweep.trial.warm_rank import DDPWorker

W = TypeVar("W")
log = logging.getLogger("raysweep")


class Lending(Generic[W]):
    """Which worker serves which rank: the pool's rules, over workers of any type.

    ``new_worker(node_id)`` starts one, ``end(workers)`` ends some; neither is called for a
    decision that an idle worker satisfies.
    """

    def __init__(self, new_worker: Callable[[str], W], end: Callable[[list[W]], None]) -> None:
        self._new, self._end = new_worker, end
        self.slots: dict[str, int] = {}  # node id -> most workers it may have (the workers it hosts)
        self.idle: dict[str, list[W]] = {}  # node id -> workers waiting for a trial
        self.lent: dict[
            int, tuple[str | None, list[tuple[str, W]]]
        ] = {}  # lease -> (borrower's group, (node, worker)s)
        self.gpu: dict[W, str] = {}  # worker -> the one GPU it serves (workers that served one)
        self.shares: dict[int, ThreadShare | None] = {}  # lease -> its CPU ranks' share (None: GPU ranks)
        self.told: dict[W, int] = {}  # lent CPU worker -> the threads it was last told to compute with
        self._ids = itertools.count()
        self._words = itertools.count(1)  # orders what the pool tells workers (ThreadCount.seq)

    def start(self, node_id: str, count: int, hosts: int | None = None) -> None:
        """Start workers on ``node_id`` until it has ``count``; it may have ``hosts`` (default ``count``)."""
        self.slots[node_id] = count if hosts is None else hosts
        self.idle.setdefault(node_id, []).extend(self._new(node_id) for _ in range(count - self.have(node_id)))

    def have(self, node_id: str) -> int:
        """The node's workers, idle and lent."""
        lent = sum(1 for _, ranks in self.lent.values() for node, _ in ranks if node == node_id)
        return len(self.idle.get(node_id, [])) + lent

    def lend(
        self, ranks: list[tuple[str, str | None]], group: str | None, share: ThreadShare | None = None
    ) -> tuple[int, list[W]]:
        """One worker per rank, rank r on node ``ranks[r][0]`` using GPU ``ranks[r][1]`` (None: the
        CPU), for the trial holding placement group ``group``, whose CPU ranks have ``share``. A
        trial's placement group holds its slots, so a lend never waits; the count of lent workers
        can lag behind a node's failure, so extra workers are made now and ended on return."""
        workers = [self.take(node_id, gpu) for node_id, gpu in ranks]
        lease = next(self._ids)
        self.lent[lease] = (group, [(node_id, w) for (node_id, _), w in zip(ranks, workers, strict=True)])
        self.shares[lease] = share
        for worker in workers:
            self.told.pop(worker, None)
        return lease, workers

    def share_threads(self, node_ids: Iterable[str]) -> dict[W, ThreadCount]:
        """The lent CPU workers on ``node_ids`` whose threads changed (``cpu_threads.threads_on_node``),
        each with its new count; a worker just lent is always among them."""
        seq = next(self._words)
        changed: dict[W, ThreadCount] = {}
        for node_id in node_ids:
            leases = [(lease, [w for node, w in ranks if node == node_id]) for lease, (_, ranks) in self.lent.items()]
            leases = [(lease, workers) for lease, workers in leases if workers]
            counts = threads_on_node([(self.shares.get(lease), len(workers)) for lease, workers in leases])
            for (_, workers), count in zip(leases, counts, strict=True):
                for worker in workers:
                    if count is not None and self.told.get(worker) != count:
                        self.told[worker] = count
                        changed[worker] = ThreadCount(count, seq)
        return changed

    def take(self, node_id: str, gpu: str | None) -> W:
        """An idle worker of ``node_id`` for a rank on ``gpu``: one that serves it, else one that
        serves none yet; else a new one, and an idle worker of another GPU is ended in its place."""
        idle = self.idle.setdefault(node_id, [])
        fits = [w for w in idle if gpu is None or self.gpu.get(w) == gpu] or [w for w in idle if w not in self.gpu]
        if fits:
            worker = fits[0]
            idle.remove(worker)
        else:
            if idle:
                self._end([self.forget(idle.pop())])
            worker = self._new(node_id)
        if gpu is not None:
            self.gpu[worker] = gpu
        return worker

    def forget(self, worker: W) -> W:
        self.gpu.pop(worker, None)
        self.told.pop(worker, None)
        return worker

    def drop_dead(self, node_id: str, alive: list[W]) -> None:
        """The node's idle workers are ``alive`` now (the others died while idle)."""
        idle = self.idle.setdefault(node_id, [])
        for dead in set(idle) - set(alive):
            self.forget(dead)
        idle[:] = [w for w in idle if w in set(alive)]

    def give_back(self, lease: int, broken: bool, workers: list[W]) -> list[str]:
        """The lease's ``workers`` come back; ``broken`` (or a node over its count) ends them instead,
        and so does a lease the pool does not know (lent before the pool restarted). Returns the
        nodes it computed on."""
        if lease not in self.lent:
            self._end([self.forget(w) for w in workers])
            return []
        _, ranks = self.lent.pop(lease)
        self.shares.pop(lease, None)
        nodes = list(dict.fromkeys(node for node, _ in ranks))
        for node_id in nodes:
            back = [w for node, w in ranks if node == node_id]
            over = self.have(node_id) + len(back) > self.slots.get(node_id, len(back))
            if broken or over:  # `over`: never more workers on a node than it hosts
                self._end([self.forget(w) for w in back])
            else:  # first in line again, in rank order: a trial of the same size gets the same ranks
                self.idle.setdefault(node_id, [])[:0] = back
        return nodes

    def end_all(self) -> list[W]:
        """End every worker, idle and lent (the sweep is over); returns them."""
        workers = [w for idle in self.idle.values() for w in idle]
        workers += [w for _, ranks in self.lent.values() for _, w in ranks]
        self.idle.clear()
        self.lent.clear()
        self.shares.clear()
        self.gpu.clear()
        self.told.clear()
        self._end(workers)
        return workers

    def end_abandoned(self, gone: Iterable[str]) -> None:
        """End the workers of trials whose placement group is ``gone`` (they ended without giving them back)."""
        gone = set(gone)
        for lease in [k for k, (group, _) in self.lent.items() if group in gone]:
            self.shares.pop(lease, None)
            self._end([self.forget(w) for _, w in self.lent.pop(lease)[1]])


@ray.remote(num_cpus=0, concurrency_groups=GROUPS)
class WorkerPool(Holdings):
    """The pool, and the sweep's record of what its trials hold (``holdings.py``): one actor."""

    def __init__(self, imports: tuple[str, ...] = ()) -> None:
        super().__init__()
        self._lending: Lending[Any] = Lending(functools.partial(_new_worker, imports=imports), _end)

    def start(self, node_id: str, count: int, hosts: int | None = None) -> None:
        """Start workers on ``node_id`` until it has ``count`` (they import torch meanwhile); it
        hosts ``hosts`` (default ``count``), and more are started when trials need them."""
        self._lending.start(node_id, count, hosts)

    def lend(
        self, ranks: list[tuple[str, str | None]], group: str | None, share: ThreadShare | None = None
    ) -> tuple[int, list[Any], ThreadCount | None]:
        """Workers for a trial's ranks (``Lending.lend``), none that died while idle, and the threads
        its CPU ranks start with. A trial already computing on those nodes is told its new count
        now, before the new ranks compute (``cpu_threads.py``)."""
        self._end_abandoned()
        nodes = list(dict.fromkeys(node for node, _ in ranks))
        for node_id in nodes:
            self._lending.drop_dead(node_id, _alive(self._lending.idle.get(node_id, [])))
        lease, workers = self._lending.lend(ranks, group, share)
        changed = self._lending.share_threads(nodes)
        _tell(w for w in changed.items() if w[0] not in workers)
        return lease, workers, changed.get(workers[0])

    def give_back(self, lease: int, broken: bool, workers: list[Any]) -> None:
        _tell(self._lending.share_threads(self._lending.give_back(lease, broken, workers)).items())

    def end_all(self) -> int:
        """End every worker (each after its scripts: ``_end``); how many there were."""
        return len(self._lending.end_all())

    def _end_abandoned(self) -> None:
        groups = {g for g, _ in self._lending.lent.values() if g}
        if not groups:
            return
        table = ray.util.placement_group_table()
        self._lending.end_abandoned(g for g in groups if table.get(g, {}).get("state", "REMOVED") == "REMOVED")


def _tell(changes: Iterable[tuple[Any, ThreadCount]]) -> None:
    """Each worker its new thread count (it takes it in its rank's thread: ``cpu_threads.RankThreads``)."""
    for worker, told in changes:
        worker.use_threads.remote(told)


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


def end_pool(pool: Any) -> None:
    """End the sweep's pool and its workers, their scripts first, before the driver goes on:
    left to Ray's clean-up of an ended driver, the workers of a trial whose process died kept
    their scripts running for over 30 s, then orphaned them (issue 49)."""
    try:
        count = ray.get(pool.end_all.remote(), timeout=GRACE_S + 10)
    except (ray.exceptions.RayError, TimeoutError) as e:
        log.warning("the warm workers' pool did not end its workers: %s", e)
    else:
        log.info("ended the %d warm workers", count)
    ray.kill(pool)


def _new_worker(node_id: str, imports: tuple[str, ...]) -> Any:
    return DDPWorker.options(
        num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
    ).remote(imports)


def _end(workers: list[Any]) -> None:
    """End ``workers``, each after the script it runs (``program.end_running_scripts``; its
    trial may be gone and the rank blocked): ``ray.kill`` alone would orphan the script."""
    if workers:
        ray.wait([w.end_scripts.remote() for w in workers], num_returns=len(workers), timeout=GRACE_S + 5)
    for worker in workers:
        ray.kill(worker)


def start_pool(node_workers: dict[str, tuple[int, int]], imports: tuple[str, ...]) -> Any:
    """The sweep's pool, already starting ``node_workers[node][0]`` workers on every node, of the
    ``node_workers[node][1]`` it hosts; each worker imports ``imports`` before its first trial."""
    pool = WorkerPool.options(scheduling_strategy=on_driver_node(), max_restarts=-1).remote(imports)
    for node_id, (count, hosts) in node_workers.items():
        pool.start.remote(node_id, count, hosts)
    return pool
