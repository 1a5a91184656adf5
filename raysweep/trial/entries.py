"""What a trial runs on each of its ranks: one record per kind of entry point.

A sweep's trials run one of four kinds (``KINDS``; exactly one serves each sweep: a function
given to ``raysweep.run`` replaces the file's loop and script, as ``wandb.agent(function=)``
ignores ``program``):

* ``WandbFunction``: a W&B-style ``main()`` given to ``raysweep.run``; it reads ``wandb.config``
  and reports through ``wandb.log``.
* ``Function``: a ``train(config)`` given to ``raysweep.run``; it reports through ``raysweep.report``.
* ``Loop``: the file's ``raysweep.train_loop``, ``module:function``; it reports as ``Function`` does.
* ``Script``: W&B's ``program:``/``command:``, a process per rank as under torchrun; it reports
  through ``wandb.log``, which raysweep's hook in the script's process writes to a metrics file.

Each kind says whether it serves a spec, checks it before a cluster starts (``check``), builds a
trial's entry from the trial's values (``build``), and runs it as one rank (``run``). The driver
reads the two things that differ for it from the kind: ``runs_own_process`` and ``calls_wandb_init``.
Adding a kind is one record here, in ``KINDS``, and its test.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from raysweep import trial
from raysweep.env import env_set
from raysweep.errors import UserError
from raysweep.placement import RankPlace
from raysweep.spec import SweepSpec, trial_config
from raysweep.spec.space import wandb_config
from raysweep.trial import devices, output_marks, torchrun_env, wandb_function, watchdog
from raysweep.trial.backends import Backend
from raysweep.trial.job import ProgramLaunch, Sweep, TrialJob, WandbSetup
from raysweep.trial.ports import free_port
from raysweep.trial.program import run_program
from raysweep.trial.program_wandb import write_param_files, write_wandb_config


class Entry:
    """A trial's entry point: plain data, shipped with its ``TrialJob`` to every rank."""

    # The trial is a process of its own per rank (a script): it sets up its own process group on
    # a port of its own, runs on after Tune stops its trial until the process ends (so the next
    # trial gets a fresh Tune actor), and a 1-worker trial runs it from the Tune trial's process.
    runs_own_process: ClassVar[bool] = False
    # Each rank's own wandb.init logs the trial's W&B run, so the driver logs none for it.
    calls_wandb_init: ClassVar[bool] = False

    @classmethod
    def serves(cls, spec: SweepSpec) -> bool:
        raise NotImplementedError

    @classmethod
    def check(cls, spec: SweepSpec) -> None:
        """Raise ``UserError`` for what would fail every trial (a typo in a name), before a cluster starts."""

    @classmethod
    def build(cls, sweep: Sweep, flat_config: dict[str, Any], trial_dir: str, trial_id: str) -> Entry:
        raise NotImplementedError

    def run(
        self,
        job: TrialJob,
        backend: Backend,
        rank: int,
        place: RankPlace,
        *,
        master: tuple[str, int] | None = None,
        visible_devices: str | None = None,
    ) -> None:
        """Run as ``rank`` of ``job.world_size`` on ``backend``, at ``place`` (its node and index there)."""
        guard = None
        if job.report_timeout_s:
            guard = watchdog.ReportWatchdog(job.report_timeout_s, job.trial_dir, rank, job.world_size)
            guard.start()
        backend.watchdog = guard
        trial.use(backend)
        try:
            if job.capacity.use_gpu:  # a rank that cannot use its GPU fails with a sentence, before the loop
                devices.check_usable(str(backend.context().device))
            body = self.load(job, rank)
            rank_env = torchrun_env.variables(rank, job.world_size, place, master)  # put back when the rank ends
            with env_set(rank_env), output_marks.shown(job.trial_id, job.trial_dir, rank):  # rank 0's prints shown
                body()
        finally:
            if guard is not None:
                guard.stop()

    def load(self, job: TrialJob, rank: int) -> Callable[[], Any]:
        """The Python kinds' body as rank ``rank`` runs it, imported (``run`` calls it inside the
        rank's watchdog, with its output marked). A ``partial``, not a lambda: it adds no frame to
        the traceback a trial's error shows the last lines of."""
        raise NotImplementedError


@dataclass(frozen=True)
class Loop(Entry):
    path: str  # "module:function"
    config: dict[str, Any]  # the nested config the loop receives

    @classmethod
    def serves(cls, spec: SweepSpec) -> bool:
        return spec.function is None and spec.train_loop is not None

    @classmethod
    def check(cls, spec: SweepSpec) -> None:
        try:
            import_loop(spec.train_loop)
        except ImportError as e:
            raise UserError(str(e)) from None

    @classmethod
    def build(cls, sweep: Sweep, flat_config: dict[str, Any], trial_dir: str, trial_id: str) -> Loop:
        return cls(sweep.spec.train_loop, trial_config(sweep.spec, flat_config))

    def load(self, job: TrialJob, rank: int) -> Callable[[], Any]:
        return partial(import_loop(self.path), self.config)


@dataclass(frozen=True)
class Function(Entry):
    function: Callable[[dict], Any]  # shipped by value
    config: dict[str, Any]

    @classmethod
    def serves(cls, spec: SweepSpec) -> bool:
        return spec.function == "raysweep"

    @classmethod
    def build(cls, sweep: Sweep, flat_config: dict[str, Any], trial_dir: str, trial_id: str) -> Function:
        return cls(sweep.function, trial_config(sweep.spec, flat_config))

    def load(self, job: TrialJob, rank: int) -> Callable[[], Any]:
        return partial(self.function, self.config)


@dataclass(frozen=True)
class WandbFunction(Entry):
    function: Callable[[], Any]  # shipped by value
    wandb: WandbSetup  # what its wandb.init meets

    calls_wandb_init: ClassVar[bool] = True

    @classmethod
    def serves(cls, spec: SweepSpec) -> bool:
        return spec.function == "wandb"

    @classmethod
    def build(cls, sweep: Sweep, flat_config: dict[str, Any], trial_dir: str, trial_id: str) -> WandbFunction:
        params = wandb_config(sweep.spec, flat_config)  # what wandb.init would meet under wandb agent
        return cls(sweep.function, _wandb_setup(sweep, write_wandb_config(Path(trial_dir), trial_id, params)))

    def load(self, job: TrialJob, rank: int) -> Callable[[], Any]:
        return partial(wandb_function.call, self.function, self.wandb, job, rank)


@dataclass(frozen=True)
class Script(Entry):
    launch: ProgramLaunch

    runs_own_process: ClassVar[bool] = True
    calls_wandb_init: ClassVar[bool] = True

    @property
    def wandb(self) -> WandbSetup:
        return self.launch.wandb

    @classmethod
    def serves(cls, spec: SweepSpec) -> bool:
        return spec.runs_program

    @classmethod
    def check(cls, spec: SweepSpec) -> None:
        if spec.program is not None and spec.command_uses_program and not Path(spec.program).is_file():
            raise UserError(
                f"program: {spec.program!r} is not a file (it is resolved from {os.getcwd()}, as wandb agent does)"
            )

    @classmethod
    def build(cls, sweep: Sweep, flat_config: dict[str, Any], trial_dir: str, trial_id: str) -> Script:
        return cls(_launch(sweep, flat_config, trial_dir, trial_id))

    def run(
        self,
        job: TrialJob,
        backend: Backend,
        rank: int,
        place: RankPlace,
        *,
        master: tuple[str, int] | None = None,
        visible_devices: str | None = None,
    ) -> None:
        """A script's rank has no watchdog of its own here: ``run_program`` watches the script's reports."""
        trial.use(backend)
        run_program(
            job,
            self.launch,
            rank,
            place,
            master or ("127.0.0.1", free_port()),
            report=trial.report,
            share=backend.share,
            visible_devices=visible_devices,
            report_without_metric=trial.report_without_metric,
            checkpoint=backend.checkpoint(),
        )


KINDS: tuple[type[Entry], ...] = (WandbFunction, Function, Loop, Script)


def kind_of(spec: SweepSpec) -> type[Entry]:
    """The kind of entry point the sweep's trials run: the one of ``KINDS`` that serves it."""
    (kind,) = (kind for kind in KINDS if kind.serves(spec))
    return kind


def import_loop(path: str) -> Callable[[dict], Any]:
    """Resolve ``module:function``; only such imports are ever run as train loops."""
    module_name, _, func_name = path.partition(":")
    if os.getcwd() not in sys.path:  # loops live in the project the sweep is run from
        sys.path.insert(0, os.getcwd())
    try:
        loop = getattr(importlib.import_module(module_name), func_name)
    except Exception as e:  # a module that raises on import, or has a syntax error, is the user's too
        raise ImportError(f"train_loop {path!r} could not be imported: {type(e).__name__}: {e}") from e
    if not callable(loop):
        raise ImportError(f"train_loop {path!r} is a {type(loop).__name__}, not a function taking the trial's config")
    return loop


def _launch(sweep: Sweep, flat_config: dict[str, Any], trial_dir: str, trial_id: str) -> ProgramLaunch:
    """How a script meets the trial, as under ``wandb agent``; writes the param files it reads."""
    spec = sweep.spec
    params = wandb_config(spec, flat_config)  # what wandb agent would hand the script
    yaml_path, json_path = write_param_files(Path(trial_dir), trial_id, params)
    return ProgramLaunch(
        program=spec.program,
        command=spec.command,
        params=params,
        args_json_file=str(json_path),
        wandb=_wandb_setup(sweep, yaml_path),
    )


def _wandb_setup(sweep: Sweep, param_file: Path) -> WandbSetup:
    """What a trial's ``wandb.init`` meets: its config file, mode, dirs, project and group."""
    spec = sweep.spec
    return WandbSetup(
        param_file=str(param_file),
        workdir=sweep.workdir,
        wandb_mode=sweep.wandb_mode,
        wandb_dir=sweep.wandb_dir or sweep.workdir,
        project=spec.wandb.project_name,
        entity=spec.wandb.entity,
        group=spec.wandb.group or sweep.name,
        sweep_id=sweep.wandb_sweep_id,
    )
