"""``TrialJob``: one trial as its ranks run it, built once where the trial comes in from Tune
(``job_builder.build_job``).

Everything downstream (the runner that starts the ranks, each rank's entry point, the loop's
backend, a ``program:`` script's launch) reads this one typed, plain-data object; it is shipped
as is to every worker.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol

from raysweep.env import GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME
from raysweep.placement import Capacity, RankPlace, Shape
from raysweep.spec import SweepSpec
from raysweep.spec.model import PROCESS_GROUP_TIMEOUT_S, WORKER_START_TIMEOUT_S
from raysweep.words import Runner


class EntryPoint(Protocol):
    """What a job needs of its entry point (``entries.Entry`` and its kinds, which import this module)."""

    runs_own_process: ClassVar[bool]

    def run(
        self,
        job: TrialJob,
        backend: Any,
        rank: int,
        place: RankPlace,
        *,
        master: tuple[str, int] | None = None,
        visible_devices: str | None = None,
    ) -> None: ...


@dataclass(frozen=True, kw_only=True)
class Sweep:
    """What the driver binds into every trial of a sweep (``driver/trainable.py``)."""

    spec: SweepSpec
    capacity: Capacity
    run_dir: str
    name: str
    workdir: str  # where program: scripts are resolved and run
    wandb_mode: str
    function: Callable[..., Any] | None = None  # raysweep.run's function (spec.function says its style)
    wandb_sweep_id: str | None = None  # the sweep W&B created for it (online); never an id W&B did not return
    wandb_dir: str = ""  # WANDB_DIR of scripts and W&B-style functions ("" : the workdir)
    # how a trial of each world size runs, decided once by the driver (``driver/trainable.runners``)
    runners: dict[int, Runner] = field(default_factory=dict)
    holdings: Any = None  # the sweep's record of what each trial holds: its pool, or an actor (trial/holdings.py)
    storage: str | None = None  # the run dir's URI where it lives on a URI storage (runs/storage.py); None: run_dir

    def runner_for(self, size: int) -> Runner:
        return runner_of(self.runners, size)

    @property
    def home(self) -> str:
        """Where the run dir is for every node: its URI, or the (shared) local path."""
        return self.storage or self.run_dir

    def uri_of(self, fs_path: str) -> str:
        """A path on the storage's filesystem (as Ray Train names its checkpoints) as a URI every node opens."""
        if not self.storage:
            return fs_path
        scheme = self.storage.partition("://")[0]
        head, sep, query = self.storage.partition("?")
        return f"{scheme}://{fs_path.lstrip('/')}{sep}{query}"

    def in_home(self, *parts: str) -> str:
        from raysweep.runs.storage import join

        return join(self.home, *parts)


@dataclass(frozen=True)
class WandbSetup:
    """What a trial's ``wandb.init`` meets, as under ``wandb agent``: where it runs and the
    variables it reads (``program_wandb.wandb_variables``). A W&B-style function's whole launch."""

    param_file: str  # the YAML wandb.init reads (WANDB_SWEEP_PARAM_PATH)
    workdir: str  # where it runs (wandb.agent's caller's directory)
    wandb_mode: str
    wandb_dir: str  # WANDB_DIR, as wandb.agent sets it: the user's, else the working directory
    project: str
    entity: str | None
    group: str
    sweep_id: str | None  # a sweep W&B created; never one it did not


@dataclass(frozen=True)
class ProgramLaunch:
    """How a ``program:`` trial starts its script, as ``wandb agent`` would."""

    program: str | None
    command: tuple[str, ...] | None
    params: dict[str, Any]  # the trial's values as W&B hands them to the script
    args_json_file: str
    wandb: WandbSetup

    @property
    def label(self) -> str:
        """The script's name in messages."""
        return self.program or (self.command or ("command",))[0]


@dataclass(frozen=True)
class TrialJob:
    trial_id: str
    trial_dir: str  # the trial's own files: the loop's trial_dir, watchdog notes, a script's logs
    world_size: int  # its DDP ranks: the spec's num_gpus (spec.world_size)
    shape: Shape  # its nodes, and ranks on each (placement.shape)
    runner: Runner  # how its ranks run (tune_trial.RUNNERS)
    metric: str | None  # the spec's metric.name: every report must carry it
    report_timeout_s: float | None
    capacity: Capacity
    max_failures: int
    entry: EntryPoint  # what each rank runs (entries.py: a loop, a function, a W&B-style function, a script)
    group_timeout_s: float = PROCESS_GROUP_TIMEOUT_S  # the process group's: set-up and every collective
    start_timeout_s: float = (
        WORKER_START_TIMEOUT_S  # from holding its resources to every worker started (start_bound.py)
    )
    holdings: Any = None  # the sweep's Holdings actor: told the trial's nodes, and each Train worker's start
    max_preemptions: int = 10  # restarts after a draining or lost node (preemption.py)
    network_interface: str | None = None  # GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME of every rank
    attempt: str = ""  # this start of the trial's ranks: a script's metrics files are per attempt
    restored_checkpoint: str | None = None  # torchtrainer: the Ray Train checkpoint Tune restored the trial from

    @property
    def group_backend(self) -> str | None:
        """The process group warm workers set up for a loop, a world of one included (a loop's
        collectives work at every size, and packed trials each get their own); a script sets up its own."""
        if self.entry.runs_own_process:
            return None
        return "nccl" if self.capacity.use_gpu else "gloo"

    def network_env(self) -> dict[str, str]:
        """What every rank's process (and a script's) sets so that gloo and NCCL use the chosen interface."""
        if not self.network_interface:
            return {}
        return {GLOO_SOCKET_IFNAME: self.network_interface, NCCL_SOCKET_IFNAME: self.network_interface}

    def new_attempt(self) -> TrialJob:
        return replace(self, attempt=uuid.uuid4().hex[:8])


def runner_of(runners: dict[int, Runner], size: int) -> Runner:
    """How a trial of ``size`` runs; a size the spec does not list (a growing trial filling idle
    slots at twice its size, ``growth.fills``) runs as the largest listed one does."""
    return runners.get(size) or runners[max(runners)]
