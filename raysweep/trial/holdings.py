"""The sweep's record of what its trials hold: the slots each running trial holds on each node,
and for a TorchTrainer run, which of its ranks have started and the placement group Ray Train
made for its workers.

* Each trial tells it its nodes when it starts (``tune_trial.run_trial``): the driver's admission
  (``driver/admission.py``) reads them to see which slots free when a trial ends.
* Each Ray Train worker tells it when it enters the trial's loop (``rank.on_train_worker``): the
  trial counts its started ranks against ``worker_start_timeout_s`` (``start_bound.py``). A trial
  Tune stopped says so here, and its Ray Train ranks stop at their next report (``TrainBackend``).
* A warm trial that places its own slots (``slots.py``) tells it its group, and when it holds them:
  the driver counts the trial's time from then (``monitor.py``).
* The driver frees a trial's Ray Train groups (and its own) when the trial ends (``driver/trial_ends.py``):
  on Ray 2.56 the group of a TorchTrainer run whose trial Tune stopped outlived the trial, holding
  its CPUs, and the next trial's workers waited for them forever. Only groups this record was
  told of are freed, by their ids: never another job's.

It lives in the sweep's one small actor on the driver's node, owned by the driver, and ends with
the sweep: the warm workers' pool where the sweep has one (``pool.WorkerPool`` is a ``Holdings``:
one actor process fewer per sweep, about 1 CPU-second), else an actor of its own. Its methods run
in a concurrency group of their own, so a pool busy ending workers never delays the admission's
reads.
"""

from __future__ import annotations

import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

RECORD = "record"  # the concurrency group of the record's methods
GROUPS = {RECORD: 1}  # one thread: the record's methods one at a time, beside the pool's


class Holdings:
    def __init__(self) -> None:
        self._nodes: dict[str, dict[str, int]] = {}  # trial id -> node id -> the workers it holds there
        self._started: dict[str, set[int]] = {}  # Train run name -> ranks that entered the loop
        self._groups: dict[str, dict[str, Any]] = {}  # trial id -> placement group id (hex) -> group
        self._since: dict[str, float] = {}  # trial id -> when it began to hold its nodes
        self._stopping: set[str] = set()  # trials Tune stopped whose Ray Train ranks stop at their next report
        self._preempted: dict[str, int] = {}  # trial id -> the times it left a draining or lost node

    @ray.method(concurrency_group=RECORD)
    def hold(self, trial_id: str, nodes: dict[str, int]) -> None:
        self._nodes[trial_id] = nodes
        self._since[trial_id] = time.time()
        self._stopping.discard(trial_id)  # a retried trial starts afresh

    @ray.method(concurrency_group=RECORD)
    def nodes(self) -> dict[str, dict[str, int]]:
        """What every trial that started, and has not been released, holds."""
        return self._nodes

    @ray.method(concurrency_group=RECORD)
    def since(self) -> dict[str, float]:
        """When each trial that holds its nodes began to (its process may have started before)."""
        return self._since

    @ray.method(concurrency_group=RECORD)
    def placed(self, trial_id: str, group: Any) -> None:
        """``group`` holds slots of the trial: one it placed itself (``slots.py``), or its Ray Train run's."""
        self._groups.setdefault(trial_id, {})[group.id.hex()] = group

    @ray.method(concurrency_group=RECORD)
    def started(self, trial_id: str, run: str, rank: int, group: Any) -> None:
        self._started.setdefault(run, set()).add(rank)
        if group is not None:
            self.placed(trial_id, group)

    @ray.method(concurrency_group=RECORD)
    def count(self, run: str) -> int:
        """How many ranks of the Train run ``run`` have started."""
        return len(self._started.get(run, ()))

    @ray.method(concurrency_group=RECORD)
    def stop(self, trial_id: str) -> None:
        """Tune stopped the trial: its Ray Train ranks stop at their next report, as warm ranks do
        at theirs (a W&B-style function's run is then finished and written, not killed)."""
        self._stopping.add(trial_id)

    @ray.method(concurrency_group=RECORD)
    def stopping(self, trial_id: str) -> bool:
        return trial_id in self._stopping

    @ray.method(concurrency_group=RECORD)
    def preempted(self, trial_id: str) -> int:
        """The trial left a draining or lost node once more: how many times now (``max_preemptions``)."""
        self._preempted[trial_id] = self._preempted.get(trial_id, 0) + 1
        return self._preempted[trial_id]

    @ray.method(concurrency_group=RECORD)
    def nudge(self) -> None:
        """Nudge Ray's scheduler after a trial removed its slots' group (``slots.release``), from
        this actor, which outlives the trial's process."""
        from raysweep.trial.slots import start_nudging

        start_nudging()

    @ray.method(concurrency_group=RECORD)
    def release(self, trial_id: str) -> list[Any]:
        """The trial ended (or will start again): forget what it held; returns its Ray Train groups."""
        self._nodes.pop(trial_id, None)
        self._since.pop(trial_id, None)
        for run in [r for r in self._started if r.startswith(f"{trial_id}-")]:
            del self._started[run]
        return list(self._groups.pop(trial_id, {}).values())


def on_driver_node() -> NodeAffinitySchedulingStrategy:
    """Where the sweep's record lives: the driver's node, held to it. With ``soft=True`` Ray put an
    actor of no resources on another node 3 times in 4 (two loopback nodes, Ray 2.60), and losing
    that node lost the record: the driver ended with a traceback (``make test-slow``'s chaos test)."""
    return NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)


def start_holdings() -> Any:
    """The sweep's record in an actor of its own, on the driver's node (a sweep without a pool)."""
    actor = ray.remote(num_cpus=0, concurrency_groups=GROUPS)(Holdings)
    return actor.options(scheduling_strategy=on_driver_node()).remote()
