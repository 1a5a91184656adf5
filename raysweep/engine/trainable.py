"""One trial: the Tune function trainable that runs a train loop on ``num_gpus`` workers.

1 worker: the loop runs in the Tune trial's own process (no worker-group start-up to pay).
2+ workers: the trial builds a Ray Train ``TorchTrainer`` and calls ``fit``; the loop runs on
every worker with the process group Ray Train set up, all workers on the trial's node.
A ``program:`` spec runs its script the same way, as a subprocess of each worker
(``program.py``). With ``report_timeout_s`` every rank runs a hang watchdog (``watchdog.py``).
"""

from __future__ import annotations

import importlib
import math
import numbers
import os
import socket
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from ray import tune
from ray.tune.integration.ray_train import TuneReportCallback

from raysweep import trial
from raysweep.engine import watchdog
from raysweep.engine.cluster import Capacity, trial_bundle
from raysweep.engine.program import run_program, write_param_files
from raysweep.spec import SweepSpec, trial_config


class InfeasibleTrial(RuntimeError):
    """A trial asks for more workers than any node of the cluster has."""


class TrialHung(RuntimeError):
    """A rank sent no report for report_timeout_s (the watchdog's explanation is the message)."""


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


def _run_loop(loop_args: dict[str, Any], backend: str, rank: int, world_size: int) -> None:
    """Run the train loop as one rank, with the hang watchdog when the spec sets a timeout."""
    guard = None
    if loop_args["report_timeout_s"]:
        guard = watchdog.ReportWatchdog(loop_args["report_timeout_s"], loop_args["trial_dir"], rank, world_size)
        guard.start()
    trial.set_backend(backend, loop_args["trial_dir"], loop_args["metric"], watchdog=guard)
    try:
        import_loop(loop_args["train_loop"])(loop_args["config"])
    finally:
        if guard is not None:
            guard.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _train_worker(loop_args: dict[str, Any]) -> None:
    """Entry point on every TorchTrainer worker."""
    import ray.train

    ctx = ray.train.get_context()
    _run_loop(loop_args, "train", ctx.get_world_rank(), ctx.get_world_size())


def _program_worker(job: dict[str, Any]) -> None:
    """Entry point on every TorchTrainer worker of a ``program:`` trial."""
    import ray.train
    from ray.train.collective import broadcast_from_rank_zero

    ctx = ray.train.get_context()
    rank = ctx.get_world_rank()
    # The script's own process group needs a port of its own (Ray Train's group holds one),
    # and a restarted worker group a fresh metrics file: rank 0 picks both.
    mine = (ray.util.get_node_ip_address(), _free_port(), uuid.uuid4().hex[:8]) if rank == 0 else None
    addr, port, attempt = broadcast_from_rank_zero(mine)
    trial.set_backend("train", job["trial_dir"], job["metric"])
    run_program(job | {"attempt": attempt}, rank, ctx.get_local_rank(), ctx.get_world_size(), (addr, port), trial.report)


def _program_job(spec: SweepSpec, flat_config: dict[str, Any], launch: dict[str, Any], trial_dir: str, trial_id: str) -> dict[str, Any]:
    """Everything a worker needs to start the trial's script (plain data: it is shipped to workers)."""
    yaml_path, json_path = write_param_files(Path(trial_dir), trial_id, flat_config)
    return {
        "program": spec.program,
        "command": spec.command,
        "params": flat_config,
        "metric": spec.metric.name if spec.metric else None,
        "report_timeout_s": spec.report_timeout_s,
        "trial_dir": trial_dir,
        "trial_id": trial_id,
        "param_file": str(yaml_path),
        "args_json_file": str(json_path),
        "workdir": launch["workdir"],
        "wandb_mode": launch["wandb_mode"],
        "project": spec.wandb.project or "raysweep",
        "entity": spec.wandb.entity,
        "group": spec.wandb.group or launch["name"],
    }


def trial_files_dir(staging_dir: str, run_dir: str) -> str:
    """Where a trial's own files go (the loop's ``trial_dir``, watchdog notes, a script's logs).

    Its dir in the run dir when this node sees the run dir (the driver's node, or shared
    storage), so they sit next to its results and W&B run from the first write and outlive
    Ray's session; else Ray's staging dir on this node.
    """
    target = Path(run_dir) / Path(staging_dir).name
    if not target.parent.is_dir():
        return staging_dir
    target.mkdir(parents=True, exist_ok=True)
    return str(target)


def run_trial(
    flat_config: dict[str, Any], spec: SweepSpec, capacity: Capacity, train_storage: str, launch: dict[str, Any]
) -> None:
    """The Tune function trainable (bound with ``tune.with_parameters``)."""
    workers = num_workers(spec, flat_config)
    if workers > capacity.largest_node:
        raise InfeasibleTrial(
            f"num_gpus={workers} can never be placed: the cluster has {capacity.describe()}. "
            "DDP workers of one trial run on one node."
        )
    metric = spec.metric.name if spec.metric else None
    ctx = tune.get_context()
    trial_dir = trial_files_dir(ctx.get_trial_dir(), launch["run_dir"])
    watchdog.clear(trial_dir)  # a retried trial starts without the last attempt's explanation
    if spec.runs_program:
        job = _program_job(spec, flat_config, launch, trial_dir, ctx.get_trial_id())
        worker_fn, worker_args = _program_worker, job
    else:
        loop_args = {
            "train_loop": spec.train_loop,
            "config": trial_config(spec, flat_config),
            "trial_dir": trial_dir,
            "metric": metric,
            "report_timeout_s": spec.report_timeout_s,
        }
        worker_fn, worker_args = _train_worker, loop_args
    if workers == 1:
        if spec.runs_program:
            trial.set_backend("tune", trial_dir, metric)
            master = ("127.0.0.1", _free_port())
            run_program(job | {"attempt": uuid.uuid4().hex[:8]}, 0, 0, 1, master, trial.report)
        else:
            _run_loop(loop_args, "tune", 0, 1)
        return

    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    node_id = ray.get_runtime_context().get_node_id()
    trainer = TorchTrainer(
        worker_fn,
        train_loop_config=worker_args,
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
    try:
        trainer.fit()
    except Exception as e:
        explanation = watchdog.read_explanation(trial_dir)
        if explanation:
            raise TrialHung(explanation) from e
        raise


def make_trainable(spec: SweepSpec, capacity: Capacity, run_dir: Path, launch: dict[str, Any]) -> Any:
    """The trainable handed to ``tune.Tuner``: spec bound, resources sized per trial."""

    def resources(flat_config: dict[str, Any]) -> Any:
        try:
            workers = num_workers(spec, flat_config)
        except ValueError:
            workers = 1  # the trial itself raises the explanation
        return tune.PlacementGroupFactory(trial_bundle(workers, capacity))

    fn = tune.with_parameters(
        run_trial, spec=spec, capacity=capacity, train_storage=str(run_dir / "train_runs"), launch=launch
    )
    return tune.with_resources(fn, resources)
