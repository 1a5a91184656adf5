"""The trainable the driver hands to ``tune.Tuner``: ``trial.tune_trial.run_trial`` with the
sweep bound, and each trial's placement group sized from its ``num_gpus`` (``placement.py``:
one bundle on one node, or one on each of several whole nodes)."""

from __future__ import annotations

from typing import Any

from ray import tune

from raysweep.placement import trial_bundles
from raysweep.trial.job import Sweep
from raysweep.trial.job_builder import choose_runner
from raysweep.trial.tune_trial import run_trial
from raysweep.words import Runner


def make_trainable(sweep: Sweep, worker_pool: Any) -> Any:
    def resources(flat_config: dict[str, Any]) -> Any:
        try:
            workers = sweep.spec.world_size(flat_config)
        except ValueError:
            workers = 1  # the trial itself raises the explanation
        runner = choose_runner(sweep.spec, workers, worker_pool is not None)
        bundles, strategy = trial_bundles(workers, sweep.capacity, holds_workers=runner != Runner.TORCHTRAINER)
        return tune.PlacementGroupFactory(bundles, strategy=strategy)

    return tune.with_resources(tune.with_parameters(run_trial, sweep=sweep, worker_pool=worker_pool), resources)
