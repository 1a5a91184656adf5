"""The trainable the driver hands to ``tune.Tuner``: ``trial.tune_trial.run_trial`` with the
sweep bound, and each trial's placement group sized from its ``num_gpus`` (``placement.py``:
one bundle on one node, or one on each of several whole nodes); and how a trial of each size
runs (``runners``), decided here once for the placement group and the trial alike."""

from __future__ import annotations

import os
from typing import Any

from ray import tune
from ray.tune.trainable import wrap_function

from raysweep.env import ONE_WORKER_TORCHTRAINER
from raysweep.placement import trial_bundles
from raysweep.spec import SweepSpec
from raysweep.trial.entries import kind_of
from raysweep.trial.job import Sweep
from raysweep.trial.runners import RUNNERS, RunnerKind
from raysweep.trial.torchtrainer_runner import stop_trainers
from raysweep.trial.tune_trial import run_trial
from raysweep.words import Runner


def runners(spec: SweepSpec) -> dict[int, Runner]:
    """How a trial of each of the sweep's sizes runs (``trial/runners.RUNNERS``): the runner
    ``ddp_workers`` chooses, its 1-worker trials in the trial's own process where its record says
    so, and a script's too (it runs in a process of its own anyway)."""
    chosen = RUNNERS[spec.ddp_workers]
    # RAYSWEEP_ONE_WORKER_TORCHTRAINER=1: a 1-worker trial runs on the chosen runner too (the GPU
    # suite runs Ray Train's 1-GPU path)
    alone = chosen.one_worker_in_process and os.environ.get(ONE_WORKER_TORCHTRAINER) != "1"
    one_in_process = kind_of(spec).runs_own_process or alone
    return {size: Runner.IN_PROCESS if size == 1 and one_in_process else chosen.word for size in spec.world_sizes}


def kinds(trial_runners: dict[int, Runner]) -> list[RunnerKind]:
    """The records of the runners a sweep's trials use."""
    return [RUNNERS[runner] for runner in set(trial_runners.values())]


def make_trainable(sweep: Sweep, worker_pool: Any) -> Any:
    def resources(flat_config: dict[str, Any]) -> Any:
        try:
            world_size = sweep.spec.world_size(flat_config)
        except ValueError:
            world_size = 1  # the trial itself raises the explanation
        runner = sweep.runner_for(world_size)
        bundles, strategy = trial_bundles(world_size, sweep.capacity, holds_workers=RUNNERS[runner].holds_workers)
        return tune.PlacementGroupFactory(bundles, strategy=strategy)

    trial = tune.with_resources(tune.with_parameters(run_trial, sweep=sweep, worker_pool=worker_pool), resources)
    return _stopping_ranks(trial)


def _stopping_ranks(function: Any) -> type:
    """Tune's function trainable of ``function``, whose stop lets a TorchTrainer run's ranks end at
    their next report (``torchtrainer_runner.stop_trainers``) before Tune ends the trial's process. It keeps
    Tune's class name (``ImplicitFunc``: what the dashboard and process titles call a trial), and
    the resources ``tune.with_resources`` gave the function."""
    base = wrap_function(function)

    def cleanup(self: Any) -> None:
        try:
            base.cleanup(self)
        finally:
            stop_trainers()

    return type(base.__name__, (base,), {"cleanup": cleanup, "__doc__": _stopping_ranks.__doc__})
