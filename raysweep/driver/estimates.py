"""How long the driver expects its trials to run, from the trials that ran: the budget's ledger
(``budget.py``) and the admission's reservations (``admission.py``) read the same estimates.

* One report's seconds, per trial size: a trial's seconds held (start-up included) over its
  reports, the median over the trials of that size that reported (``conservative``: the
  slowest). A size with none yet takes the slowest size's; before any trial reported, the
  spec's ``raysweep.budget.epoch_seconds`` (``--epoch-seconds``, the plan's figure: start-up not
  counted), else there is no estimate.
* The reports a trial makes at most: the scheduler's ``max_t``, else ``epochs`` (the trial's own,
  or ``base_config``'s), else the most any trial made so far.
* Under early stopping, the reports a trial is still expected to make: the plan's share of trials
  that reach each rung (``search/plan.py``), given the reports it has made.
* A chosen trial's lead: the seconds from the admission choosing it to its start (Tune starts its
  actor first, 3-7 s for a new one on 2 cores; none when it reuses one), which no trial's
  seconds held count: the median over the trials that started, else ``START_LEAD_S``.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Mapping
from typing import Any

from raysweep.runs.rows import TrialRow
from raysweep.spec import SweepSpec

START_LEAD_S = 5.0  # before any trial started: a new Tune actor's start, four at once on 2 cores


class Estimates:
    def __init__(self, spec: SweepSpec, rows: Mapping[str, TrialRow], rungs: list[tuple[int, float]] | None = None):
        self.spec, self.rows = spec, rows  # the driver's rows, which its monitor keeps current
        self.rungs = sorted(rungs or [])  # (rung, share of trials that reach it), from the plan
        eta = spec.scheduler.reduction_factor if spec.scheduler else 1
        self.beyond = (self.rungs[-1][1] / eta) if self.rungs else 1.0  # share going on past the last rung
        self._per_size: dict[int, tuple[float, float]] = {}  # size -> (median, slowest) report seconds
        self._version: int | None = None  # of ``rows`` (a ``Rows``) when they were computed
        self._left: dict[tuple[int, int], float] = {}  # (most, made) -> reports left: the rungs are fixed

    def report_seconds(self, size: int, conservative: bool = False) -> float | None:
        """The seconds one report of a trial of ``size`` takes, start-up shared out."""
        per_size = self._report_seconds_per_size()
        pick = 1 if conservative else 0
        if size in per_size:
            return per_size[size][pick]
        return max((v[pick] for v in per_size.values()), default=self.spec.budget.epoch_seconds)

    def scaled_report_seconds(self, size: int) -> float | None:
        """``report_seconds``, and for a size no trial ran at, the two largest sizes' scaling carried
        on to it (each doubling gains what the last one did): how long a report would take larger."""
        per_size = self._report_seconds_per_size()
        if size in per_size or len(per_size) < 2:
            return self.report_seconds(size)
        (small, at_small), (large, at_large) = sorted((s, v[0]) for s, v in per_size.items())[-2:]
        doublings = math.log2(size / large) / math.log2(large / small)
        return at_large * (at_large / at_small) ** doublings

    def _report_seconds_per_size(self) -> dict[int, tuple[float, float]]:
        """Each size's (median, slowest) seconds per report over the rows, recomputed when a row
        changed (plain dict rows: every time)."""
        version = getattr(self.rows, "version", None)
        if version is not None and version == self._version:
            return self._per_size
        by_size: dict[int, list[float]] = {}
        for row in self.rows.values():
            for at_size, seconds in row.report_seconds():
                by_size.setdefault(at_size, []).append(seconds)
        self._per_size = {s: (statistics.median(v), max(v)) for s, v in by_size.items()}
        self._version = version
        return self._per_size

    def most_reports(self, config: dict[str, Any]) -> int | None:
        """The reports a trial of ``config`` makes at most."""
        most = expected_reports(self.spec, config)
        if most is None:
            return max((r.iterations or 0 for r in self.rows.values()), default=0) or None
        return most

    def reports_left(self, config: dict[str, Any], made: int) -> float | None:
        """The reports a trial that made ``made`` and still runs is expected to make yet."""
        most = self.most_reports(config)
        if most is None:
            return None
        if not self.rungs:
            return float(max(0, most - made))
        if (most, made) not in self._left:
            reach = [self._share(x) for x in range(made + 1, most + 1)]
            self._left[most, made] = sum(reach) / reach[0] if reach and reach[0] > 0 else 0.0
        return self._left[most, made]

    def _share(self, report: int) -> float:
        """The share of trials that make report number ``report`` (1 up to the first rung)."""
        for rung, share in self.rungs:
            if report <= rung:
                return share
        return self.beyond

    def trial_seconds(self, config: dict[str, Any]) -> float | None:
        """A new trial's expected seconds, start to end, on the slowest estimate of its size."""
        per = self.report_seconds(self.spec.world_size(config), conservative=True)
        left = self.reports_left(config, 0)
        return per * left if per is not None and left is not None else None

    def start_lead(self, chosen_at: Mapping[str, float]) -> float:
        """The seconds from choosing a trial to its start (``chosen_at``: trial id -> when it was chosen)."""
        leads = [
            row.start - chosen_at[trial_id]
            for trial_id, row in self.rows.items()
            if row.start is not None and trial_id in chosen_at
        ]
        return max(0.0, statistics.median(leads)) if leads else START_LEAD_S

    def end(self, row: TrialRow, now: float | None = None) -> float | None:
        """When a running trial is expected to end (now, if it is past its estimate)."""
        now = time.time() if now is None else now
        per, left = self.report_seconds(row.world_size), self.reports_left(row.config, row.iterations or 0)
        if per is None or left is None:
            return None
        since_report = now - row.since if row.since is not None else 0.0
        return now + max(0.0, per * left - min(since_report, per))


def expected_reports(spec: SweepSpec, config: dict[str, Any]) -> int | None:
    """The reports a trial of ``config`` makes at most, as far as the spec says: the scheduler's
    ``max_t``, else an ``epochs`` in the trial's values or ``base_config``."""
    if spec.scheduler is not None and spec.scheduler.max_t:
        return int(spec.scheduler.max_t)
    for source in (config, spec.base_config):
        value = source.get("epochs") if isinstance(source, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 1:
            return int(value)
    return None
