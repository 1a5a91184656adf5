"""The order in which the admission's waiting trials take their turns, and who was passed over:
the trials waiting when the sweep starts go largest first (``backfill.largest_first``), later
ones as Tune made them, the trials ahead of a larger one longest first
(``backfill.longest_first``); a smaller trial a larger one went ahead of is never passed again
(``backfill.goes_first``). driver.log says each change once."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from raysweep.backfill import Waiting, first_larger, largest_first, longest_first

log = logging.getLogger("raysweep")


class Turns:
    def __init__(self, reserved_at: dict[str, float]) -> None:
        self.reserved_at = reserved_at  # the board's first reservation times: a passed trial's is dropped
        self.passed: set[str] = set()  # trials a larger one went ahead of (``backfill.goes_first``)
        self.first: dict[str, int] | None = None  # the trials waiting when the sweep started -> their turn
        self._made: list[str] = []  # the waiting trials in Tune's order (the first batch's turns), at the last step
        self._overtaken: set[str] = set()  # trials a later-made one started before (``backfill.longest_first``)
        self._logged_larger: str | None = None  # the larger trial driver.log last named
        self._last: Any = None  # the last decision driver.log told

    def order(self, waits: list[Waiting]) -> list[Waiting]:
        """The waiting trials in the order the admission considers them."""
        if self.first is None:
            self.first = self._largest_first(waits)
            waits = [replace(w, passed=w.trial_id in self.passed) for w in waits]
        return self._longest_first(self.in_turn(waits))

    def in_turn(self, waits: list[Waiting]) -> list[Waiting]:
        """The first batch in its turns, the rest as Tune made them (none before the first step)."""
        if self.first is None:
            return waits
        first = self.first
        return sorted(waits, key=lambda w: first.get(w.trial_id, len(first)))

    def passed_over(self, trial_ids: tuple[str, ...]) -> None:
        """A larger trial started ahead of these: none may again, and a reservation one of them held
        went to it (it is not counted late for that)."""
        self.passed.update(trial_ids)
        for trial_id in trial_ids:
            self.reserved_at.pop(trial_id, None)

    def started(self, trial_id: str) -> None:
        """Those made before a started trial that still wait: none passes them again."""
        if trial_id in self._made:
            self._overtaken.update(self._made[: self._made.index(trial_id)])

    def _largest_first(self, waits: list[Waiting]) -> dict[str, int]:
        """The turns of the trials waiting when the sweep starts; the smaller ones a larger one now
        goes before count as passed."""
        order, passed = largest_first(waits)
        if passed:
            log.info(
                "admission: the %d trials waiting at the start run largest first: %s",
                len(order),
                ", ".join(f"{w.trial_id} ({w.size})" for w in order),
            )
            self.passed_over(passed)
        return {w.trial_id: turn for turn, w in enumerate(order)}

    def _longest_first(self, waits: list[Waiting]) -> list[Waiting]:
        """The trials ahead of a larger waiting one, longest first; driver.log says so once per larger trial."""
        self._made = [w.trial_id for w in waits]
        order = longest_first(waits, self._overtaken)
        if order == waits:
            return order
        ahead = first_larger(waits)  # the order changed, so there is one
        larger = order[ahead]
        if larger.trial_id != self._logged_larger:
            self._logged_larger = larger.trial_id
            log.info(
                "admission: the %d trials ahead of %s (%d workers) run longest first: %s",
                ahead,
                larger.trial_id,
                larger.size,
                ", ".join(f"{w.trial_id} (~{w.seconds:.0f} s)" for w in order[:ahead]),
            )
        return order

    def log(self, decision: Any, now: float, running: int, waiting: int) -> None:
        """driver.log: each start, and each new reservation."""
        reserved = decision.reservation
        key = (decision.start, reserved.trial_id if reserved else None)
        if key == self._last:
            return
        self._last = key
        if decision.start is not None:
            if decision.backfilled:
                how = "behind a reservation"
            elif decision.went_ahead_of:
                how = f"its slots free now{passing(decision.went_ahead_of)}"
            else:
                how = "at the head of the queue"
            log.info("admission: start %s (%s; %d running, %d waiting)", decision.start, how, running, waiting)
        elif reserved is not None:
            when = f"in ~{reserved.at - now:.0f} s" if reserved.at else "when estimates exist"
            log.info("admission: %s (%d workers) reserved, starts %s", reserved.trial_id, reserved.size, when)


def passing(trial_ids: tuple[str, ...]) -> str:
    """driver.log's note of the smaller trials a larger one went ahead of (``backfill.goes_first``)."""
    return f", ahead of {len(trial_ids)} smaller trial(s): {', '.join(trial_ids)}" if trial_ids else ""
