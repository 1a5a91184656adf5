"""How a trial's ranks run: one record per runner (``words.Runner`` names it), as Ray Train's
``BackendConfig`` names its backend. The driver chooses a runner per trial size once
(``driver/trainable.runners``) and reads only these traits, never a runner's name.

Adding a runner is a ``Runner`` word (which ``ddp_workers`` then accepts), its record here and its
test (``tests/trial/test_runners.py``).
``TrialJob`` carries the word, not the record: a warm worker unpickles jobs, and this module imports
Tune and Ray Train.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from raysweep.trial import rank
from raysweep.trial.backends import Backend, TrainBackend, TuneBackend, WarmBackend
from raysweep.trial.job import Sweep, TrialJob
from raysweep.trial.start_bound import StartBound
from raysweep.trial.torchtrainer_runner import run_torchtrainer
from raysweep.trial.warm_runner import run_warm
from raysweep.words import Runner

Start = Callable[[TrialJob, Sweep, Any, StartBound, Any], None]  # (job, sweep, worker pool, bound, slot group)


def run_in_process(job: TrialJob, sweep: Sweep, worker_pool: Any, bound: StartBound, group: Any) -> None:
    rank.in_process(job)  # its one worker is this process: nothing to wait for


@dataclass(frozen=True)
class RunnerKind:
    """One way to run a trial's ranks, and what the driver must know of it."""

    word: Runner
    start: Start  # runs the trial from its Tune trial's process
    rank_entry: Callable[..., None]  # what each rank runs where it is (``rank.py``)
    backend: type[Backend]  # what ``raysweep.report`` does on its ranks
    holds_workers: bool  # the trial's placement group holds its ranks' slots (Ray Train's run places its own)
    needs_pool: bool  # its ranks are the sweep's warm DDP workers
    places_own_slots: bool  # may start ahead on a token, placing its slots itself (``slots.py``)
    reuses_tune_actor: bool  # a stopped trial ends at its report, so the next may reuse its Tune actor
    in_trial_process: bool  # its one rank is the Tune trial's process: its failure is the trial's own
    needs_dashboard: bool  # Ray Train frees a stopped trial's workers through the dashboard's State API
    # chosen by ``ddp_workers``, its 1-worker trials run in the Tune trial's process instead
    # (starting it for one rank costs more than it gives)
    one_worker_in_process: bool


RUNNERS: dict[Runner, RunnerKind] = {
    kind.word: kind
    for kind in (
        RunnerKind(
            Runner.IN_PROCESS,
            run_in_process,
            rank.in_process,
            TuneBackend,
            holds_workers=True,
            needs_pool=False,
            places_own_slots=False,
            reuses_tune_actor=True,
            in_trial_process=True,
            needs_dashboard=False,
            one_worker_in_process=True,
        ),
        RunnerKind(
            Runner.WARM,
            run_warm,
            rank.on_warm_worker,
            WarmBackend,
            holds_workers=True,
            needs_pool=True,
            places_own_slots=True,
            reuses_tune_actor=True,
            in_trial_process=False,
            needs_dashboard=False,
            one_worker_in_process=False,
        ),
        RunnerKind(
            Runner.TORCHTRAINER,
            run_torchtrainer,
            rank.on_train_worker,
            TrainBackend,
            holds_workers=False,
            needs_pool=False,
            places_own_slots=False,
            reuses_tune_actor=False,  # a stopped fit() runs on in the old trial's thread until its process ends
            in_trial_process=False,
            needs_dashboard=True,
            one_worker_in_process=True,
        ),
    )
}
