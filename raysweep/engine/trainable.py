"""One trial: the Tune function trainable that runs a train loop on ``num_gpus`` workers.

The loop runs on as many of the sweep's warm DDP workers (``pool.py``, ``gang.py``) as the trial
has ranks, all on the trial's node, whose CPUs/GPUs the trial's placement group holds. With
``ddp_workers: torchtrainer`` a 2+-worker trial builds a Ray Train ``TorchTrainer`` and calls
``fit`` instead, and a 1-worker trial runs in the Tune trial's own process. A ``program:`` spec
runs its script the same way, as a subprocess of each worker (``program.py``); with one worker
the Tune trial process is that worker. What runs on each rank, with its hang watchdog when
``report_timeout_s`` is set, is in ``rank.py``.
"""

from __future__ import annotations

import contextlib
import numbers
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from ray import tune
from ray.tune.integration.ray_train import TuneReportCallback

from raysweep import trial
from raysweep.engine import gang, pool, rank, watchdog
from raysweep.engine.cluster import Capacity, trial_bundle
from raysweep.engine.program import run_program, write_param_files
from raysweep.spec import SweepSpec, trial_config
from raysweep.spec.space import wandb_config


class InfeasibleTrial(RuntimeError):
    """A trial asks for more workers than any node of the cluster has."""


class TrialHung(RuntimeError):
    """A rank sent no report for report_timeout_s (the watchdog's explanation is the message)."""


def num_workers(spec: SweepSpec, config: dict[str, Any]) -> int:
    """The trial's DDP world size: its ``num_gpus`` parameter, else ``raysweep.num_gpus``, else 1."""
    value = spec.trial_size(config)
    if isinstance(value, bool) or not isinstance(value, numbers.Number) or value < 1 or value != int(value):
        raise ValueError(f"num_gpus must be a whole number >= 1, got {value!r}")
    return int(value)


class RankMeanReportCallback(TuneReportCallback):
    """Forward the *mean over ranks* of every numeric metric to Tune (Ray forwards rank 0's)."""

    def after_report(self, run_context: Any, metrics: list[dict[str, Any]], checkpoint: Any) -> None:
        super().after_report(run_context, [gang.mean_over_ranks(metrics)], checkpoint)


def rank_gpus(assigned: list[Any], workers: int) -> list[str]:
    """Each rank's GPU among those Ray assigned to the trial's bundle, in order: one each, the
    first of each rank's share with ``gpus_per_worker`` > 1, the one shared GPU when packed."""
    ids = sorted((str(g) for g in assigned), key=lambda g: (len(g), g))
    return [ids[(r * len(ids)) // workers] for r in range(workers)] if ids else []


def _run_warm(
    workers: int, capacity: Capacity, worker_pool: Any, fn: Callable[..., None], args: Any, group_backend: str | None
) -> None:  # fmt: skip
    """Run the trial on ``workers`` of the pool's warm workers; rank means go to Tune."""
    gpus = rank_gpus(ray.get_gpu_ids(), workers) if capacity.use_gpu else None

    def forward(metrics: list[dict[str, Any]], checkpoint_dir: str | None) -> None:
        ckpt = tune.Checkpoint.from_directory(checkpoint_dir) if checkpoint_dir else None
        tune.report(gang.mean_over_ranks(metrics), checkpoint=ckpt)  # copies the checkpoint before it returns

    restored = tune.get_checkpoint()
    lease = pool.borrow(worker_pool, workers)
    try:
        with restored.as_directory() if restored else contextlib.nullcontext() as checkpoint_dir:
            gang.run(lease, fn, args, group_backend if workers > 1 else None, checkpoint_dir, gpus,
                     max(1, int(capacity.cpus_per_worker)), forward)  # fmt: skip
    finally:
        pool.give_back(worker_pool, lease)


def _program_job(spec: SweepSpec, flat_config: dict[str, Any], launch: dict[str, Any], trial_dir: str, trial_id: str) -> dict[str, Any]:
    """Everything a worker needs to start the trial's script (plain data: it is shipped to workers)."""
    params = wandb_config(spec, flat_config)  # what wandb agent would hand the script
    yaml_path, json_path = write_param_files(Path(trial_dir), trial_id, params)
    return {
        "program": spec.program,
        "command": spec.command,
        "params": params,
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
        "sweep_id": launch["name"],
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
    flat_config: dict[str, Any], spec: SweepSpec, capacity: Capacity, train_storage: str, launch: dict[str, Any],
    worker_pool: Any,
) -> None:  # fmt: skip
    """The Tune function trainable (bound with ``tune.with_parameters``); ``worker_pool`` is the
    sweep's ``pool.WorkerPool`` (None with ``ddp_workers: torchtrainer``)."""
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
        worker_fn, worker_args = rank.program_worker, job
    else:
        loop_args = {
            "train_loop": spec.train_loop,
            "config": trial_config(spec, flat_config),
            "trial_dir": trial_dir,
            "metric": metric,
            "report_timeout_s": spec.report_timeout_s,
        }
        worker_fn, worker_args = rank.train_worker, loop_args
    if workers == 1 and (spec.runs_program or worker_pool is None):
        if spec.runs_program:
            trial.set_backend("tune", trial_dir, metric)
            master = ("127.0.0.1", rank.free_port())
            run_program(job | {"attempt": uuid.uuid4().hex[:8]}, 0, 0, 1, master, trial.report)
        else:
            rank.run_loop(loop_args, "tune", 0, 1)
        return
    try:
        if worker_pool is None:
            _fit_torchtrainer(workers, capacity, worker_fn, worker_args, spec.max_failures, train_storage)
        elif spec.runs_program:
            _run_warm(workers, capacity, worker_pool, rank.gang_program, job | {"attempt": uuid.uuid4().hex[:8]}, None)
        else:
            _run_warm(workers, capacity, worker_pool, rank.gang_loop, loop_args, "nccl" if capacity.use_gpu else "gloo")
    except Exception as e:
        explanation = watchdog.read_explanation(trial_dir)
        if explanation:
            raise TrialHung(explanation) from e
        early = watchdog.ended_early(trial_dir, workers)  # a TorchTrainer says only that its workers died
        if early and not isinstance(e, gang.RankReports):
            ranks, reports = early
            raise gang.RankReports(watchdog.ended_early_text(ranks, workers, reports)) from e
        raise


def _fit_torchtrainer(
    workers: int, capacity: Capacity, worker_fn: Callable[[dict], None], worker_args: dict[str, Any],
    max_failures: int, train_storage: str,
) -> None:  # fmt: skip
    """``ddp_workers: torchtrainer``: the trial is one Ray Train run on the trial's node."""
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    node_id = ray.get_runtime_context().get_node_id()
    trainer = TorchTrainer(
        worker_fn,
        train_loop_config=worker_args,
        scaling_config=ScalingConfig(
            num_workers=workers,
            use_gpu=capacity.use_gpu,
            resources_per_worker={"CPU": capacity.cpus_per_worker} | ({"GPU": capacity.gpus_per_worker} if capacity.use_gpu else {}),
            placement_strategy="STRICT_PACK",
            label_selector={"ray.io/node-id": node_id},  # the node whose slots this trial holds
        ),
        torch_config=TorchConfig(backend="nccl" if capacity.use_gpu else "gloo"),
        run_config=RunConfig(
            # Same name and storage on a restart: Ray Train resumes from the trial's last checkpoint.
            name=tune.get_context().get_trial_id(),
            storage_path=train_storage,
            callbacks=[RankMeanReportCallback()],
            failure_config=FailureConfig(max_failures=max_failures),
        ),
    )
    trainer.fit()


def make_trainable(spec: SweepSpec, capacity: Capacity, run_dir: Path, launch: dict[str, Any], worker_pool: Any) -> Any:
    """The trainable handed to ``tune.Tuner``: spec and the sweep's worker pool bound, resources sized per trial."""

    def resources(flat_config: dict[str, Any]) -> Any:
        try:
            workers = num_workers(spec, flat_config)
        except ValueError:
            workers = 1  # the trial itself raises the explanation
        bundles = trial_bundle(workers, capacity, warm=worker_pool is not None)
        return tune.PlacementGroupFactory(bundles, strategy="STRICT_PACK")

    fn = tune.with_parameters(
        run_trial, spec=spec, capacity=capacity, train_storage=str(run_dir / "train_runs"), launch=launch,
        worker_pool=worker_pool,
    )  # fmt: skip
    return tune.with_resources(fn, resources)
