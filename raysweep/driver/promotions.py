"""The trials a scheduler promoted that go on at their next size (``growth.py``, ``raysweep.grow``).

At a rung where ASHA (or W&B's hyperband) lets a trial go on, the admission asks ``decide``; a
trial that grows is paused by its scheduler (Tune saves the checkpoint it reported with that
result and ends its actor), and the admission starts it again before any waiting trial, with
``num_gpus`` set to its next size in its config: Tune restores it from that checkpoint, and
each rank takes ``global / world`` of its batch (``trial/job_builder.py``). The slots it goes to
were free when it was promoted, and no trial is started while it pauses.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from ray.tune.experiment import Trial

from raysweep.backfill import Holding, Waiting
from raysweep.driver.estimates import Estimates
from raysweep.growth import Promoted, grows
from raysweep.spec import SweepSpec
from raysweep.spec.model import SIZE

log = logging.getLogger("raysweep")


class Promotions:
    def __init__(self, spec: SweepSpec, estimates: Estimates) -> None:
        self.spec, self.estimates = spec, estimates
        self.growing: dict[str, tuple[int, dict[str, int]]] = {}  # trial id -> (its next size, where)

    def decide(
        self,
        trial: Any,
        result: Mapping[str, Any],
        slots: Mapping[str, int],
        holdings: list[Holding],
        queue: list[Waiting],
        shape_of: Callable,
        room_s: float | None,
    ) -> bool:
        """Whether ``trial``, promoted at the rung of ``result``, goes on at its next size now."""
        made = int(result.get("training_iteration", 0))
        if self.spec.grow is None or self.spec.scheduler is None or made not in self.spec.scheduler.rungs:
            return False
        size = self.spec.world_size(trial.config)
        nodes = self.where(time.time(), trial.trial_id, trial.config, made, slots, holdings, queue, shape_of, room_s)
        if nodes is None:
            log.info(
                "admission: %s promoted at %d, goes on at %d workers (no room for more)", trial.trial_id, made, size
            )
            return False
        to = self.spec.grow.next_size(size)
        log.info("admission: %s promoted at %d, grows to %d workers on %s", trial.trial_id, made, to, nodes)
        self.growing[trial.trial_id] = (to, nodes)
        return True

    def where(
        self,
        now: float,
        trial_id: str,
        config: Mapping[str, Any],
        made: int,
        slots: Mapping[str, int],
        holdings: list[Holding],
        queue: list[Waiting],
        shape_of: Callable,
        room_s: float | None,
    ) -> dict[str, int] | None:
        """Where a trial promoted at report ``made`` goes on at its next size now, or None (it goes on
        at its size): ``growth.grows``, its gain weighed with the estimates and the budget's room.
        The decision the driver (``decide``) and the simulator (``bench/simulate.py``) both act on."""
        grow, scheduler = self.spec.grow, self.spec.scheduler
        if grow is None or scheduler is None or made not in scheduler.rungs:
            return None
        size = self.spec.world_size(config)
        to = grow.next_size(size)
        mine = next((h for h in holdings if h.trial_id == trial_id), None)
        if to is None or mine is None:
            return None
        left = self.estimates.reports_left(config, made)
        at_size, at_to = (self.estimates.report_seconds(s) for s in (size, to))
        seconds_at_to = at_to * left if at_to is not None and left is not None else None
        seconds_at_size = at_size * left if at_size is not None and left is not None else None
        promoted = Promoted(mine, size, to, seconds_at_to)
        return grows(now, promoted, slots, holdings, queue, shape_of, room_s, seconds_at_size)

    def saving(self, trials: list[Any]) -> bool:
        """Whether a trial that grows has not paused yet (Tune saves its checkpoint first); one that
        ended meanwhile is no longer growing."""
        status = {t.trial_id: t.status for t in trials}
        for trial_id in list(self.growing):
            if status.get(trial_id) not in (Trial.RUNNING, Trial.PAUSED):
                del self.growing[trial_id]
        return any(status[t] == Trial.RUNNING for t in self.growing)

    def resized(self, queue: list[Any], rows: Mapping[str, Any]) -> list[Any]:
        """Waiting trials whose row says they grew past the size in their config (a resumed sweep:
        the driver was killed before Tune saved its state with the new size), set to the size
        they reached."""
        out = []
        for trial in queue:
            row = rows.get(trial.trial_id)
            if row is not None and row.sizes and row.world_size > self.spec.world_size(trial.config):
                trial.config = {**trial.config, SIZE: row.world_size}
                out.append(trial)
        return out

    def paused(self, queue: list[Any]) -> tuple[Any, dict[str, int]] | None:
        """A paused trial that grows, its config now at its next size, and where it goes."""
        trial = next((t for t in queue if t.trial_id in self.growing and t.status == Trial.PAUSED), None)
        if trial is None:
            return None
        to, nodes = self.growing.pop(trial.trial_id)
        trial.config = {**trial.config, SIZE: to}
        return trial, nodes
