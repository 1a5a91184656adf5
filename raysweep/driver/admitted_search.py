"""Tune's search algorithm, wrapped: a new trial is made only while the admission's queue has room
(``admission.py``), and handed to Tune only when it fits the budget (``budget.py``).

Everything else is the inner search's. The admission and the ledger are this driver's: they are
left out of what Tune pickles, and a resumed driver attaches its own (``experiment.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ray import cloudpickle
from ray.tune.search import SearchAlgorithm

from raysweep.driver.budget import Ledger

HELD_FILE = "raysweep-held-trial.pkl"


class AdmittedSearch(SearchAlgorithm):
    def __init__(self, inner: SearchAlgorithm, ledger: Ledger | None = None, admission: Any = None):
        super().__init__()
        self.inner, self.ledger, self.admission = inner, ledger, admission
        self.held: Any = None  # the next trial, made by the inner search, not yet handed to Tune
        self.stopped = False  # Tune ended the sweep (``set_finished``): no trial is made or waited for
        self.searcher = getattr(inner, "searcher", None)  # Tune looks for a ConcurrencyLimiter here

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"ledger": None, "admission": None}

    def next_trial(self) -> Any:
        if self.stopped:
            return None
        if self.held is None:
            if self.admission is not None and not self.admission.room():
                return None  # enough trials wait: the search is asked again when one starts
            self.held = self.inner.next_trial()
            if self.held is None:
                return None
        if self.ledger is not None and not self.ledger.fits(self.held.config):
            if self.ledger.unfinished() or self.ledger.waiting():
                return None  # it may fit once they end (the scheduler can stop them early)
            self.ledger.exhausted = True  # it cannot fit even alone: handed to Tune, it waits for resume
        trial, self.held = self.held, None
        if self.ledger is not None:
            self.ledger.hand(trial.trial_id, trial.config)
        return trial

    # everything else is the inner search's
    @property
    def metric(self) -> Any:
        return self.inner.metric

    def set_search_properties(self, metric: Any, mode: Any, config: dict, **spec: Any) -> bool:
        return self.inner.set_search_properties(metric, mode, config, **spec)

    @property
    def total_samples(self) -> int:
        return self.inner.total_samples

    def add_configurations(self, experiments: Any) -> None:
        self.inner.add_configurations(experiments)

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        self.inner.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        self.inner.on_trial_complete(trial_id, result=result, error=error)

    def is_finished(self) -> bool:
        """Not while the admission holds trials back (PAUSED, so not staged): Tune keeps an ended
        trial's actor for the next trial only while the search goes on or a trial is staged, and
        the admission stages one at a time. Once the last trial was made, each later one waited
        for a new actor (4-5 s on 2 cores) and took its slots late (docs/benchmarks.md). The
        admission counts its waiting trials at every step of Tune's, so this ends with them.

        Once Tune has ended the sweep (a stopper: the first trials failed, a metric target, a spent
        budget), it is over: Tune stops every trial then, the admission is not asked again, and its
        count of waiting trials stayed as it was. Tune waited for a next trial forever (seen with
        every warm worker failing to start, 16 trials on 2 slots; docs/benchmarks.md, 2026-12-05)."""
        if self.stopped:
            return True
        holding = self.admission is not None and self.admission.waiting > 0
        return self.held is None and self.inner.is_finished() and not holding

    def set_finished(self) -> None:
        """Tune ends the sweep (``TuneController._stop_experiment_if_needed``)."""
        self.stopped = True
        self.inner.set_finished()

    def has_checkpoint(self, dirpath: str) -> bool:
        return self.inner.has_checkpoint(dirpath)

    def save_to_dir(self, dirpath: str, **kwargs: Any) -> None:
        """The held trial too: the inner search has moved past it, and a grid without it is short
        of a point (a resumed budget-capped grid of 8 ran 7 and ended "interrupted")."""
        self.inner.save_to_dir(dirpath, **kwargs)
        held = Path(dirpath) / HELD_FILE
        if self.held is None:
            held.unlink(missing_ok=True)
        else:
            self.held.create_placement_group_factory()  # as Tune does on adding it; a Trial pickles only with it
            held.write_bytes(cloudpickle.dumps(self.held))

    def restore_from_dir(self, dirpath: str) -> None:
        self.inner.restore_from_dir(dirpath)
        held = Path(dirpath) / HELD_FILE
        self.held = cloudpickle.loads(held.read_bytes()) if held.exists() else None
