"""``TrialJob``: one trial as its ranks run it, built once where the trial comes in from Tune.

Everything downstream (the runner that starts the ranks, each rank's entry point, the loop's
backend, a ``program:`` script's launch) reads this one typed, plain-data object; it is shipped
as is to every worker.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from raysweep.placement import Capacity
from raysweep.spec import SweepSpec, trial_config
from raysweep.spec.space import wandb_config
from raysweep.words import Runner

# Set to 1, a 1-worker trial under ddp_workers: torchtrainer is a TorchTrainer run too, not the
# trial's own process (the GPU suite runs Ray Train's 1-GPU path with it).
ONE_WORKER_TORCHTRAINER_ENV = "RAYSWEEP_ONE_WORKER_TORCHTRAINER"


class InfeasibleTrial(RuntimeError):
    """A trial asks for more workers than any node of the cluster has."""


@dataclass(frozen=True)
class Sweep:
    """What the driver binds into every trial of a sweep (``engine/trainable.py``)."""

    spec: SweepSpec
    capacity: Capacity
    run_dir: str
    name: str
    workdir: str  # where program: scripts are resolved and run
    wandb_mode: str
    function: Callable[..., Any] | None = None  # raysweep.run's function (spec.function says its style)
    wandb_sweep_id: str | None = None  # the sweep W&B created for it (online); never an id W&B did not return


@dataclass(frozen=True)
class ProgramLaunch:
    """How a ``program:`` trial starts its script, as ``wandb agent`` would; for a W&B-style
    function, the same variables its ``wandb.init`` meets (``program`` and ``command`` None)."""

    program: str | None
    command: tuple[str, ...] | None
    params: dict[str, Any]  # the trial's values as W&B hands them to the script
    param_file: str  # the YAML wandb.init reads (WANDB_SWEEP_PARAM_PATH)
    args_json_file: str
    workdir: str
    wandb_mode: str
    project: str
    entity: str | None
    group: str
    sweep_id: str | None  # a sweep W&B created; never one it did not

    @property
    def label(self) -> str:
        """The script's name in messages."""
        return self.program or (self.command or ("command",))[0]


@dataclass(frozen=True)
class TrialJob:
    trial_id: str
    trial_dir: str  # the trial's own files: the loop's trial_dir, watchdog notes, a script's logs
    world_size: int  # its DDP ranks: the spec's num_gpus (spec.world_size)
    runner: Runner  # how its ranks run (tune_trial.RUNNERS)
    metric: str | None  # the spec's metric.name: every report must carry it
    report_timeout_s: float | None
    capacity: Capacity
    max_failures: int
    train_loop: str | None = None  # "module:function"; None means the function, or else the spec's program
    function: Callable[..., Any] | None = None  # raysweep.run's function, shipped by value
    config: dict[str, Any] = field(default_factory=dict)  # the nested config the loop receives
    program: ProgramLaunch | None = None
    wandb_function: ProgramLaunch | None = None  # set when ``function`` is W&B-style: what its wandb.init meets
    attempt: str = ""  # this start of the trial's ranks: a script's metrics files are per attempt
    restored_checkpoint: str | None = None  # torchtrainer: the Ray Train checkpoint Tune restored the trial from

    @property
    def group_backend(self) -> str | None:
        """The process group warm workers set up for a loop, a world of one included (a loop's
        collectives work at every size, and packed trials each get their own); a script sets up its own."""
        if self.program is not None:
            return None
        return "nccl" if self.capacity.use_gpu else "gloo"

    def new_attempt(self) -> TrialJob:
        return replace(self, attempt=uuid.uuid4().hex[:8])


def build_job(sweep: Sweep, flat_config: dict[str, Any], trial_id: str, staging_dir: str, pooled: bool) -> TrialJob:
    """The job of the trial Tune started with ``flat_config`` (its files go in its run-dir dir);
    ``pooled``: the sweep has warm DDP workers (else 2+-worker trials are TorchTrainer runs)."""
    spec, capacity = sweep.spec, sweep.capacity
    workers = spec.world_size(flat_config)
    if workers > capacity.largest_node:
        raise InfeasibleTrial(
            f"num_gpus={workers} can never be placed: the cluster has {capacity.describe()}. "
            "DDP workers of one trial run on one node."
        )
    trial_dir = trial_files_dir(staging_dir, sweep.run_dir)
    runner = choose_runner(spec, workers, pooled)
    common = {
        "trial_id": trial_id,
        "trial_dir": trial_dir,
        "world_size": workers,
        "runner": runner,
        "metric": spec.metric.name if spec.metric else None,
        "report_timeout_s": spec.report_timeout_s,
        "capacity": capacity,
        "max_failures": spec.max_failures,
    }
    if spec.function == "wandb":
        return TrialJob(
            function=sweep.function, wandb_function=_program_launch(sweep, flat_config, trial_dir, trial_id), **common
        )
    if not spec.runs_program:
        return TrialJob(
            train_loop=spec.train_loop, function=sweep.function, config=trial_config(spec, flat_config), **common
        )
    return TrialJob(program=_program_launch(sweep, flat_config, trial_dir, trial_id), **common).new_attempt()


def choose_runner(spec: SweepSpec, workers: int, pooled: bool) -> Runner:
    """How a trial of ``workers`` ranks runs (``tune_trial.RUNNERS``); the driver sizes its
    placement group by the same answer."""
    one_in_process = spec.runs_program or (not pooled and os.environ.get(ONE_WORKER_TORCHTRAINER_ENV) != "1")
    if workers == 1 and one_in_process:
        return Runner.IN_PROCESS
    return Runner.WARM if pooled else Runner.TORCHTRAINER


def _program_launch(sweep: Sweep, flat_config: dict[str, Any], trial_dir: str, trial_id: str) -> ProgramLaunch:
    from raysweep.trial.program import write_param_files

    spec = sweep.spec
    params = wandb_config(spec, flat_config)  # what wandb agent would hand the script
    yaml_path, json_path = write_param_files(Path(trial_dir), trial_id, params)
    return ProgramLaunch(
        program=spec.program,
        command=spec.command,
        params=params,
        param_file=str(yaml_path),
        args_json_file=str(json_path),
        workdir=sweep.workdir,
        wandb_mode=sweep.wandb_mode,
        project=spec.wandb.project_name,
        entity=spec.wandb.entity,
        group=spec.wandb.group or sweep.name,
        sweep_id=sweep.wandb_sweep_id,
    )


def trial_files_dir(staging_dir: str, run_dir: str) -> str:
    """Where a trial's own files go.

    Its dir in the run dir when this node sees the run dir (the driver's node, or shared
    storage), so they sit next to its results and W&B run from the first write and outlive
    Ray's session; else Ray's staging dir on this node.
    """
    target = Path(run_dir) / Path(staging_dir).name
    if not target.parent.is_dir():
        return staging_dir
    target.mkdir(parents=True, exist_ok=True)
    return str(target)
