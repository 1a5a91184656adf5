"""A GPU-hour budget (``raysweep.budget.gpu_hours``, ``--budget-gpu-hours``): a sweep never
spends more than it, and a trial starts only if it fits.

A trial costs its workers x the time it held them, start-up included (worker-hours on CPUs).
``Ledger`` reads what was spent from the driver's record (``SweepMonitor``: every driver's, so
``resume`` counts on), and what a trial will cost from the trials that ran (``estimates.py``):
the seconds a report took per size, times the reports the scheduler lets a trial make at most. ``AdmittedSearch``
hands Tune a new trial only when the spend, what the trials it handed before will still use
(running or waiting to start) and the new trial's own cost fit the budget (``admitted_search.py``), and otherwise holds it until trials end; ``BudgetStopper`` ends
the sweep when the budget is spent, or when the trial held cannot fit even once every other has ended. The
running trials then stop at their report and wait, resumable, like the held one: ``resume
--budget-gpu-hours`` with a larger budget goes on.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

from ray.tune.stopper import Stopper

from raysweep.driver.estimates import Estimates
from raysweep.runs.rows import TrialRow, worker_seconds
from raysweep.search.plan import cost_unit
from raysweep.search.stoppers import SweepStoppers
from raysweep.values import HOUR
from raysweep.words import TrialStatus


class Ledger:
    """What a sweep spent and will spend, in worker-seconds, from the driver's rows and their
    estimates (``estimates.py``: a trial's reports at most, its size's seconds per report)."""

    def __init__(self, estimates: Estimates, limit_hours: float, use_gpu: bool):
        self.estimates, self.rows = estimates, estimates.rows
        self.limit_s = limit_hours * HOUR
        self.unit = cost_unit(use_gpu)
        self.exhausted = False  # a trial that cannot fit even alone is waiting: the budget is spent for it
        self.handed: dict[str, dict[str, Any]] = {}  # trial id -> config: the trials the search handed Tune

    def spent_s(self) -> float:
        return worker_seconds(self.rows.values(), time.time())

    def unfinished(self) -> list[TrialRow]:
        """The trials handed to Tune that have not ended: running, or waiting to start."""
        return [r for r in self.rows.values() if r.status in (TrialStatus.RUNNING, TrialStatus.PENDING)]

    def hand(self, trial_id: str, config: dict[str, Any]) -> None:
        """The search handed Tune this trial: it counts from now, though it has no row until it starts."""
        self.handed[trial_id] = config

    def waiting(self) -> list[dict[str, Any]]:
        """The configs of the trials handed to Tune that have not started (Tune holds them); a
        trial that started is forgotten here (its row counts it)."""
        self.handed = {trial_id: config for trial_id, config in self.handed.items() if trial_id not in self.rows}
        return list(self.handed.values())

    def cost_s(self, config: dict[str, Any]) -> float:
        """A new trial's expected worker-seconds at most (0 while nothing tells, no report and no
        ``--epoch-seconds``: the first trials run)."""
        return self._left_s(self.estimates.spec.world_size(config), config, 0)

    def committed_s(self) -> float:
        """Spent, plus what every unfinished trial will still use at most: running ones, and those
        waiting to start, which were admitted against the budget too. A trial gets its row only
        when it starts: counting rows alone let the trials the admission queued each fit alone
        and overspend together."""
        waiting = sum(self.cost_s(config) for config in self.waiting())
        return self.spent_s() + waiting + self._still_used_s(self.unfinished())

    def start_room_s(self, starting: list[dict[str, Any]]) -> float:
        """What a waiting trial may cost to start now: the budget less the spend and what the
        running trials and those ``starting`` will still use. The first trials are handed to Tune
        before any estimate exists (they cost 0 then), and the admission queues some: judged only
        when handed, they started after the estimates said they did not fit (the budget test
        spent 0.0071 of 0.005 GPU-hours on a loaded machine)."""
        running = [r for r in self.rows.values() if r.status == TrialStatus.RUNNING]
        used = self.spent_s() + self._still_used_s(running) + sum(self.cost_s(c) for c in starting)
        return self.limit_s - used

    def _still_used_s(self, rows: list[TrialRow]) -> float:
        """What these trials, started, will still use at most."""
        return sum(self._left_s(r.world_size, r.config, r.iterations or 0) for r in rows)

    def _left_s(self, size: int, config: dict[str, Any], made: int) -> float:
        per, most = self.estimates.report_seconds(size), self.estimates.most_reports(config)
        return size * max(0.0, per * (most - made)) if per and most else 0.0

    def fits(self, config: dict[str, Any]) -> bool:
        return self.committed_s() + self.cost_s(config) <= self.limit_s

    def sentence(self) -> str:
        return f"budget spent: {self.spent_s() / HOUR:.4g} of {self.limit_s / HOUR:g} {self.unit}"


class BudgetStopper(Stopper):
    """Ends the sweep once its budget is spent (the running trials stop at their report and stay
    resumable), or once a held trial cannot fit even with nothing running.

    Tune ends every trial of a sweep that a stopper stops, and its searcher with it: nothing
    would be left to resume. Tune's own interrupt (SIGINT, which it catches) leaves them as they
    are, so the stopper interrupts the sweep that way, once, and ``fired`` says it did. Run from
    a thread, where Tune catches no signal, it stops the sweep as other stoppers do.
    """

    resumable = True  # what it leaves unfinished, resume runs

    def __init__(self, ledger: Ledger):
        self.ledger = ledger
        self.fired = False

    def __setstate__(self, state: dict[str, Any]) -> None:
        """One pickled with Tune's state by a version before ``SweepStoppers``, put back by a resume
        over this driver's: it shares the state of this driver's (its ledger; it had fired, and the
        resume could never stop for its budget), so the driver sees it fire."""
        current = SweepStoppers.current
        mine = [s for s in (current.stoppers if current else ()) if isinstance(s, BudgetStopper)]
        self.__dict__ = mine[0].__dict__ if mine else state

    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        if self.fired or not (self.ledger.exhausted or self.ledger.spent_s() >= self.ledger.limit_s):
            return False
        self.fired = True
        if threading.current_thread() is not threading.main_thread():
            return True
        os.kill(os.getpid(), signal.SIGINT)
        return False

    @property
    def reason(self) -> str:
        return self.ledger.sentence()
