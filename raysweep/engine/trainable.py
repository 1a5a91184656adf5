"""One trial: the Tune function trainable that runs a train loop on ``num_gpus`` workers.

1 worker: the loop runs in the Tune trial's own process (no worker-group start-up to pay).
2+ workers: the trial builds a Ray Train ``TorchTrainer`` and calls ``fit``; the loop runs on
every worker with the process group Ray Train set up, all workers on the trial's node.
"""

from __future__ import annotations

import importlib
import math
import numbers
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from ray import tune
from ray.tune.integration.ray_train import TuneReportCallback

from raysweep import trial
from raysweep.engine.cluster import Capacity, trial_bundle
from raysweep.spec import SweepSpec, trial_config


class InfeasibleTrial(RuntimeError):
    """A trial asks for more workers than any node of the cluster has."""


def import_loop(path: str) -> Callable[[dict], Any]:
    """Resolve ``module:function``; only such imports are ever run as train loops."""
    module_name, _, func_name = path.partition(":")
    if os.getcwd() not in sys.path:  # loops live in the project the sweep is run from
        sys.path.insert(0, os.getcwd())
    try:
        return getattr(importlib.import_module(module_name), func_name)
    except (ImportError, AttributeError) as e:
        raise ImportError(f"train_loop {path!r} could not be imported: {e}") from e


def num_workers(spec: SweepSpec, config: dict[str, Any]) -> int:
    """The trial's DDP world size: its ``num_gpus`` value, 1 when the spec has none."""
    value = config.get("num_gpus", 1)
    if isinstance(value, bool) or not isinstance(value, numbers.Number) or value < 1 or value != int(value):
        raise ValueError(f"num_gpus must be a whole number >= 1, got {value!r}")
    return int(value)


class RankMeanReportCallback(TuneReportCallback):
    """Forward the *mean over ranks* of every numeric metric to Tune (Ray forwards rank 0's)."""

    def after_report(self, run_context: Any, metrics: list[dict[str, Any]], checkpoint: Any) -> None:
        keys = [sorted(m) for m in metrics]
        if any(k != keys[0] for k in keys):
            detail = "; ".join(f"rank {r}: {', '.join(k)}" for r, k in enumerate(keys))
            raise ValueError(f"ranks reported different metric names in the same report ({detail})")
        merged = dict(metrics[0])
        for key in merged:
            if all(isinstance(m[key], numbers.Real) and not isinstance(m[key], bool) for m in metrics):
                merged[key] = math.fsum(float(m[key]) for m in metrics) / len(metrics)
        super().after_report(run_context, [merged], checkpoint)


def _train_worker(loop_args: dict[str, Any]) -> None:
    """Entry point on every TorchTrainer worker."""
    trial.set_backend("train", loop_args["trial_dir"], loop_args["metric"])
    import_loop(loop_args["train_loop"])(loop_args["config"])


def run_trial(flat_config: dict[str, Any], spec: SweepSpec, capacity: Capacity, train_storage: str) -> None:
    """The Tune function trainable (bound with ``tune.with_parameters``)."""
    workers = num_workers(spec, flat_config)
    if workers > capacity.largest_node:
        raise InfeasibleTrial(
            f"num_gpus={workers} can never be placed: the cluster has {capacity.describe()}. "
            "DDP workers of one trial run on one node."
        )
    config = trial_config(spec, flat_config)
    metric = spec.metric.name if spec.metric else None
    ctx = tune.get_context()
    trial_dir = ctx.get_trial_dir()
    if workers == 1:
        trial.set_backend("tune", trial_dir, metric)
        import_loop(spec.train_loop)(config)
        return

    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    node_id = ray.get_runtime_context().get_node_id()
    trainer = TorchTrainer(
        _train_worker,
        train_loop_config={"train_loop": spec.train_loop, "config": config, "trial_dir": trial_dir, "metric": metric},
        scaling_config=ScalingConfig(
            num_workers=workers,
            use_gpu=capacity.use_gpu,
            resources_per_worker={"CPU": capacity.cpus_per_worker} | ({"GPU": 1} if capacity.use_gpu else {}),
            placement_strategy="STRICT_PACK",
            label_selector={"ray.io/node-id": node_id},  # the node whose slots this trial holds
        ),
        torch_config=TorchConfig(backend="nccl" if capacity.use_gpu else "gloo"),
        run_config=RunConfig(
            # Same name and storage on a restart: Ray Train resumes from the trial's last checkpoint.
            name=ctx.get_trial_id(),
            storage_path=train_storage,
            callbacks=[RankMeanReportCallback()],
            failure_config=FailureConfig(max_failures=spec.max_failures),
        ),
    )
    trainer.fit()


def make_trainable(spec: SweepSpec, capacity: Capacity, run_dir: Path) -> Any:
    """The trainable handed to ``tune.Tuner``: spec bound, resources sized per trial."""

    def resources(flat_config: dict[str, Any]) -> Any:
        try:
            workers = num_workers(spec, flat_config)
        except ValueError:
            workers = 1  # the trial itself raises the explanation
        return tune.PlacementGroupFactory(trial_bundle(workers, capacity))

    fn = tune.with_parameters(run_trial, spec=spec, capacity=capacity, train_storage=str(run_dir / "train_runs"))
    return tune.with_resources(fn, resources)
