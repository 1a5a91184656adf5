"""When a trial ends: the sweep's record of what it held forgets it, and what its Ray Train run
left holding is freed: the placement group of its workers (``trial/holdings.py`` says why; Ray
2.56 left it), or the group a warm trial placed its slots in, if its process died first.

A Tune callback: when a trial completes, fails or is about to be retried, the groups its
workers were placed in are removed, by their ids, unless Ray Train already removed them.
"""

from __future__ import annotations

import logging
from typing import Any

import ray
from ray.tune import Callback
from ray.util.placement_group import remove_placement_group

log = logging.getLogger("raysweep")


class ReleaseHoldings(Callback):
    def __init__(self, holdings: Any) -> None:
        self.holdings = holdings
        self.freed = 0  # groups this driver removed (Ray Train had left them)

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles its callbacks with the run: the record is this driver's (a resumed one has its own)."""
        return self.__dict__ | {"holdings": None}

    def _release(self, trial: Any) -> None:
        try:
            groups = ray.get(self.holdings.release.remote(trial.trial_id), timeout=30)
        except ray.exceptions.RayError as e:  # the record is gone with its node: nothing to free by id
            log.warning("trial %s: its Ray Train placement groups are unknown (%s)", trial.trial_id, e)
            return
        for group in groups:
            if ray.util.placement_group_table(group).get("state", "REMOVED") != "REMOVED":
                remove_placement_group(group)
                self.freed += 1
                log.info("trial %s ended; freed its placement group %s", trial.trial_id, group.id.hex())

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._release(trial)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._release(trial)

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._release(trial)
