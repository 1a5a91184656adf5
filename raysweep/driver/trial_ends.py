"""When a trial ends: the sweep's record of what it held forgets it, its Ray Train ranks are told to
end at their next report, and no placement group outlives it.

* A trial that completed (it ran to its end, or Tune stopped it) lets its Ray Train ranks end at
  their next report (``holdings.stop``): a W&B-style function's run is finished and written, as
  on warm workers, before Ray Train removes its workers' group.
* A trial that failed, or is about to be retried, has the groups the record knows of removed at
  once (its Ray Train workers', a warm trial's own slots) by their ids.
* Every few seconds, and when the sweep ends, the groups of the sweep's own job whose creator actor
  has died are removed (``private_api.orphaned_groups``): Ray removes such a group only once the job
  has ended too, so the group of a Ray Train run whose trial failed before its workers started
  (Ray never told raysweep its id) was granted later and held its CPUs for the rest of the sweep,
  and on Ray 2.56 a stopped TorchTrainer trial's group did the same. Never another job's group.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import ray
from ray.tune import Callback
from ray.util.placement_group import remove_placement_group

from raysweep import private_api

log = logging.getLogger("raysweep")
ORPHANS_EVERY_S = 2.0
END_WAIT_S = 20.0  # at the sweep's end, for the last trials' processes (and their actors' groups) to end
QUIET_S = 3.0


class ReleaseHoldings(Callback):
    def __init__(self, holdings: Any) -> None:
        self.holdings = holdings
        self.freed = 0  # groups this driver removed
        self._checked = 0.0

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles its callbacks with the run: the record is this driver's (a resumed one has its own)."""
        return self.__dict__ | {"holdings": None}

    def _release(self, trial: Any) -> list[Any]:
        """The record forgets the trial; returns the groups it knew the trial held."""
        try:
            return ray.get(self.holdings.release.remote(trial.trial_id), timeout=30)
        except ray.exceptions.RayError as e:  # the record is gone with its node: the orphans are found below
            log.warning("trial %s: its placement groups are unknown (%s)", trial.trial_id, e)
            return []

    def _free(self, groups: list[Any], why: str) -> None:
        for group in groups:
            if ray.util.placement_group_table(group).get("state", "REMOVED") != "REMOVED":
                remove_placement_group(group)
                self.freed += 1
                log.info("freed placement group %s: %s", group.id.hex(), why)

    def free_orphans(self) -> int:
        """Removes the groups of this job whose creator actor died; returns how many groups of this
        job's actors there were."""
        self._checked = time.monotonic()
        groups = private_api.actor_groups(ray.get_runtime_context().get_job_id())
        self._free([group for group, dead in groups if dead], "its creator died")
        return len(groups)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.holdings.stop.remote(trial.trial_id)  # its Ray Train ranks end at their next report
        self._release(trial)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._free(self._release(trial), f"trial {trial.trial_id} failed")

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._free(self._release(trial), f"trial {trial.trial_id} restarts")

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        if time.monotonic() - self._checked >= ORPHANS_EVERY_S:
            self.free_orphans()

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        """Every trial has ended: the groups their actors made go as those actors end (``END_WAIT_S``
        at most: the trials' processes are ending now). Once a group was removed, until none has
        been seen for ``QUIET_S``: a Ray Train controller whose trial died runs on for a moment,
        already counted dead, and makes a new group the moment its own is removed (Ray 2.60)."""
        deadline, quiet_since = time.monotonic() + END_WAIT_S, None
        while time.monotonic() < deadline:
            if self.free_orphans():
                quiet_since = None
            elif not self.freed:
                return
            else:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= QUIET_S:
                    return
            time.sleep(0.2)
