"""The trials a scheduler promoted that go on at their next size (``growth.py``, ``raysweep.grow``).

At a rung where ASHA (or W&B's hyperband) lets a trial go on, the admission asks ``decide``; a
trial that grows is paused by its scheduler (Tune saves the checkpoint it reported with that
result and ends its actor), and the admission starts it again before any waiting trial, with
``num_gpus`` set to its next size in its config: Tune restores it from that checkpoint, and
each rank takes ``global / world`` of its batch (``trial/job_builder.py``). The slots it goes to
were free when it was promoted, and no trial is started while it pauses.

The same pause takes a trial past its first rung to twice its size while nothing waits (the
sweep's tail: ``growth.fills``), and back to its own size at its next checkpointed report once a
trial waits (``growth.gives_back``); ``own`` keeps each filling trial's own size.

A restart's cost is measured where it happens, the same way in the driver and the simulator
(``restarting``, ``reported``): the seconds from the report it paused at to its next report, less
the reports' own seconds at its new size. The fill weighs the median of those (``restart_seconds``).
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ray.tune.experiment import Trial

from raysweep.backfill import Holding, Waiting, free_slots, place
from raysweep.driver.estimates import Estimates
from raysweep.growth import Promoted, fill_size, fills, gives_back, global_batch, grows, holding_size
from raysweep.spec import SweepSpec
from raysweep.spec.model import SIZE

log = logging.getLogger("raysweep")


class Promotions:
    def __init__(self, spec: SweepSpec, estimates: Estimates) -> None:
        self.spec, self.estimates = spec, estimates
        self.growing: dict[str, tuple[int, dict[str, int]]] = {}  # trial id -> (its next size, where)
        self.own: dict[str, int] = {}  # a trial filling idle slots -> its own size, which it goes back to
        self.resized_here: set[str] = set()  # trials this driver started again at another size
        self.paused_at: dict[str, tuple[float, int]] = {}  # a trial restarting -> (when, at its report)
        self.restarts: list[float] = []  # the seconds each restart cost (``reported``)

    def decide(
        self,
        trial: Any,
        result: Mapping[str, Any],
        slots: Mapping[str, int],
        holdings: list[Holding],
        queue: list[Waiting],
        shape_of: Callable,
        room_s: float | None,
        restart_s: float,
    ) -> bool:
        """Whether ``trial``, at the checkpointed report ``result``, goes on at another size now:
        its next one where the scheduler promoted it at a rung, else twice its size into idle
        slots, or back to its own once a trial waits."""
        made = int(result.get("training_iteration", 0))
        if self.spec.grow is None or self.spec.scheduler is None:
            return False
        size = self.spec.world_size(trial.config)
        queue = [w for w in queue if w.trial_id not in self.growing]
        # a trial decided to resize holds the slots it goes to (two trials at a rung at once both
        # grew onto one node: the second waited for the first's end)
        holdings = [
            replace(h, nodes=self.growing[h.trial_id][1]) if h.trial_id in self.growing else h for h in holdings
        ]
        now = time.time()
        self.reported(trial.trial_id, made, size, now)
        if made in self.spec.scheduler.rungs:
            nodes = self.where(now, trial.trial_id, trial.config, made, slots, holdings, queue, shape_of, room_s)
            if nodes is not None:
                to = self.spec.grow.next_size(size)
                log.info("admission: %s promoted at %d, grows to %d workers on %s", trial.trial_id, made, to, nodes)
                self.growing[trial.trial_id] = (to, nodes)
                self.own.pop(trial.trial_id, None)
                self.restarting(trial.trial_id, made, now)
                return True
            if self.spec.grow.next_size(size) is not None:
                log.info(
                    "admission: %s promoted at %d, goes on at %d workers (no room for more)", trial.trial_id, made, size
                )
        restart_s = self.restart_seconds(restart_s)
        resized = self.refit(trial.trial_id, trial.config, made, slots, holdings, queue, shape_of, room_s, restart_s)
        if resized is None:
            return False
        to, nodes = resized
        why = "fills idle slots" if to > size else "gives its idle slots back, a trial waits"
        log.info("admission: %s at report %d %s: %d workers on %s", trial.trial_id, made, why, to, nodes)
        self.growing[trial.trial_id] = resized
        self.restarting(trial.trial_id, made, now)
        return True

    def restarting(self, trial_id: str, made: int, now: float) -> None:
        """The trial pauses at its report ``made`` to go on at another size."""
        self.paused_at[trial_id] = (now, made)

    def reported(self, trial_id: str, made: int, size: int, now: float) -> None:
        """A report: the first since the trial restarted measures what the restart cost."""
        paused = self.paused_at.get(trial_id)
        if paused is None or made <= paused[1]:
            return
        del self.paused_at[trial_id]
        per = self.estimates.report_seconds(size)
        if per is not None:
            self.restarts.append(max(0.0, now - paused[0] - (made - paused[1]) * per))

    def restart_seconds(self, before_any: float) -> float:
        """What a restart costs: the median of those measured, else ``before_any``."""
        return statistics.median(self.restarts) if self.restarts else before_any

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

    def refit(
        self,
        trial_id: str,
        config: Mapping[str, Any],
        made: int,
        slots: Mapping[str, int],
        holdings: list[Holding],
        queue: list[Waiting],
        shape_of: Callable,
        room_s: float | None,
        restart_s: float,
    ) -> tuple[int, dict[str, int]] | None:
        """The size and the slots a trial goes on at from report ``made`` outside its rungs, or None:
        back to its own once a trial waits, in the queue or started ahead of its slots
        (``growth.gives_back``), else twice its size on idle
        slots (``growth.fills``) past its first rung, where its global batch divides, its rest and
        a restart (``restart_s``) are expected shorter and the budget's room holds the difference.
        The decision the driver (``decide``) and the simulator both act on."""
        grow, scheduler = self.spec.grow, self.spec.scheduler
        if grow is None or not grow.fill or scheduler is None:
            return None
        size = self.spec.world_size(config)
        own = self.own.get(trial_id, size)
        others = [h for h in holdings if h.trial_id != trial_id]
        # a trial started ahead of its slots waits for them as much as one in the queue
        queue = queue + [Waiting(h.trial_id, holding_size(h), None) for h in others if not h.placed]
        if gives_back(size, own, queue):
            self.own.pop(trial_id, None)
            return own, place(own, free_slots(slots, others), slots, shape_of)
        to = fill_size(size, slots, shape_of)
        if to is None or made < min(scheduler.rungs) or not self._divides(config, to):
            return None
        mine = next((h for h in holdings if h.trial_id == trial_id), None)
        left = self.estimates.reports_left(config, made)
        at_size, at_to = (self.estimates.scaled_report_seconds(s) for s in (size, to))
        if mine is None or left is None or at_size is None or at_to is None:
            return None
        if room_s is not None and to * at_to * left - size * at_size * left > room_s:
            return None
        nodes = fills(mine, to, at_size * left, at_to * left, restart_s, slots, holdings, queue, shape_of)
        if not nodes:
            return None
        self.own[trial_id] = own
        return to, nodes

    def _divides(self, config: Mapping[str, Any], size: int) -> bool:
        """Whether the trial's global batch divides among ``size`` ranks (none known: it does)."""
        value = global_batch(self.spec.grow, config, self.spec.base_config)
        return not isinstance(value, int) or isinstance(value, bool) or value % size == 0

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
            if trial.trial_id in self.resized_here:
                continue  # this driver set its size (it may have given idle slots back): its row lags
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
        self.resized_here.add(trial.trial_id)
        trial.config = {**trial.config, SIZE: to}
        return trial, nodes
