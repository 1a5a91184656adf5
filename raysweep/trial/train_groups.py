"""The sweep's record of its TorchTrainer runs: which ranks of each run have started, and the
placement group Ray Train made for each trial's workers.

Each Ray Train worker tells it when it enters the trial's loop (``rank.on_train_worker``): the
trial counts its started ranks against ``worker_start_timeout_s`` (``start_bound.py``). The
driver frees a trial's groups when the trial ends (``driver/leftover_groups.py``): on Ray 2.56,
the group of a TorchTrainer run whose trial Tune stopped outlived the trial, holding its CPUs,
and the next trial's workers waited for them forever. Only groups this record was told of are
freed, by their ids: never another job's.

One small actor per sweep on the driver's node, owned by the driver: it ends with the sweep.
"""

from __future__ import annotations

from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


@ray.remote(num_cpus=0)
class TrainGroups:
    def __init__(self) -> None:
        self._started: dict[str, set[int]] = {}  # Train run name -> ranks that entered the loop
        self._groups: dict[str, dict[str, Any]] = {}  # trial id -> placement group id (hex) -> group

    def started(self, trial_id: str, run: str, rank: int, group: Any) -> None:
        self._started.setdefault(run, set()).add(rank)
        if group is not None:
            self._groups.setdefault(trial_id, {})[group.id.hex()] = group

    def count(self, run: str) -> int:
        """How many ranks of the Train run ``run`` have started."""
        return len(self._started.get(run, ()))

    def take(self, trial_id: str) -> list[Any]:
        """The trial's groups, forgotten here (its run ended)."""
        for run in [r for r in self._started if r.startswith(f"{trial_id}-")]:
            del self._started[run]
        return list(self._groups.pop(trial_id, {}).values())


def start_train_groups() -> Any:
    """The sweep's record, on the driver's node."""
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
    return TrainGroups.options(scheduling_strategy=here).remote()
