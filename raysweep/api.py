"""raysweep from Python: ``run``, ``resume`` and ``load``, the way W&B users call ``wandb.agent``.

``raysweep.run(sweep_config, function=main, count=20)`` is ``raysweep run`` (the CLI calls
``start`` below too) and returns the sweep's results. ``function`` takes the place of the
file's ``program`` or ``raysweep.train_loop``, and may be defined anywhere: in ``__main__``, a
notebook cell, a closure (Ray pickles it by value). Its signature says its style:

* ``train(config)``: raysweep's, as a train_loop (``raysweep.report``);
* ``main()``: W&B's, run as ``wandb.agent(function=main)`` runs it (``wandb.init``,
  ``wandb.config``, ``wandb.log``).

A user error raises ``UserError`` (``SpecError`` for the spec) with the CLI's sentence. A
Ctrl-C saves the sweep, as on the command line, and raises KeyboardInterrupt.
"""

from __future__ import annotations

import copy
import inspect
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from raysweep import hints
from raysweep.driver.request import RunRequest
from raysweep.errors import SpecError, UserError
from raysweep.runs.files import read_spec
from raysweep.runs.results import SweepResult, load
from raysweep.runs.trial_result import TrialResult

__all__ = ["SweepResult", "TrialResult", "load", "resume", "run", "start"]


def function_style(function: Callable | None) -> str | None:
    """``"raysweep"`` for ``train(config)``, ``"wandb"`` for ``main()`` (``SweepSpec.function``)."""
    if function is None:
        return None
    if not callable(function):
        raise UserError(f"function must be a function, got {type(function).__name__}")
    try:
        params = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return "raysweep"  # a builtin or C callable: called with the config
    required = [p for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(required) > 1:
        raise UserError(
            f"function {function.__qualname__} takes {len(required)} arguments; a sweep calls it as train(config) "
            "(raysweep's style) or main() (W&B's, reading wandb.config)"
        )
    return "raysweep" if required or any(p.kind == p.VAR_POSITIONAL for p in params) else "wandb"


def _spec(sweep: str | os.PathLike | Mapping, overrides: Iterable[str], strict: bool, style: str | None) -> Any:
    from raysweep.spec import load_spec, parse_spec
    from raysweep.spec.reading import apply_set

    if isinstance(sweep, Mapping):
        doc = copy.deepcopy(dict(sweep))
        problems: list[str] = []
        for item in overrides:
            apply_set(doc, item, problems)
        if problems:
            raise SpecError(problems, source="the sweep dict")
        return parse_spec(doc, source="the sweep dict", strict=strict, function=style)
    if not isinstance(sweep, (str, os.PathLike)):
        raise UserError(f"sweep must be a sweep file's path or a dict in its format, got {type(sweep).__name__}")
    return load_spec(sweep, overrides, strict=strict, function=style)


def _ship_by_value(function: Callable | None) -> None:
    """A function from a module of the user's project (under the current directory) is pickled
    by value like one from ``__main__``: Ray's workers may not find that module on their path."""
    module = sys.modules.get(getattr(function, "__module__", None) or "")
    path = getattr(module, "__file__", None)
    if module is None or module.__name__ == "__main__" or not path:
        return
    if Path(path).resolve().is_relative_to(Path.cwd().resolve()) and "site-packages" not in Path(path).parts:
        from ray import cloudpickle

        cloudpickle.register_pickle_by_value(module)


def start(sweep: str | os.PathLike | Mapping, function: Callable | None, request: RunRequest) -> tuple[int, Path]:
    """What ``raysweep run`` and ``raysweep.run`` both do; returns the exit code and the run dir."""
    from raysweep.driver.cluster import check_embedded_only, select_gpus
    from raysweep.driver.sweep import run_dir_for, run_sweep

    request.check()
    spec = _spec(sweep, request.set, request.strict, function_style(function))
    for note in spec.notes:
        print(note, file=sys.stderr)
    check_embedded_only(request.address, request.gpus, request.dashboard_host)
    if request.gpus is not None:
        select_gpus(request.gpus)  # a GPU that isn't there is an error now, not deep in a worker
    _ship_by_value(function)
    if isinstance(sweep, Mapping) and request.name is None and not spec.name:
        request = replace(request, name=spec.content_name())
    code = run_sweep(spec, request, function)
    return code, run_dir_for(spec, request.name, request.storage)


def run(
    sweep: str | os.PathLike | Mapping,
    function: Callable | None = None,
    *,
    count: int | None = None,
    name: str | None = None,
    storage: str | os.PathLike = "raysweep_runs",
    address: str | None = None,
    max_concurrent: int | None = None,
    wandb: str | None = None,
    seed: int | None = None,
    budget_gpu_hours: float | None = None,
    quiet: bool = False,
    gpus: str | None = None,
    dashboard_host: str | None = None,
    resume_existing: bool = False,
    set: Iterable[str] = (),  # the --set flag's PATH=VALUE overrides
    strict: bool = False,
    warm_start: Iterable[str | os.PathLike] = (),  # the --warm-start flag's run dirs
) -> SweepResult:
    """Run a sweep (a file's path, or a dict in the file's format) and return its results when it
    ends. The keywords are ``raysweep run``'s flags (``RunRequest``); ``function`` replaces the
    file's program."""
    request = RunRequest(
        count=count,
        name=name,
        storage=storage,
        address=address,
        max_concurrent=max_concurrent,
        wandb=wandb,
        seed=seed,
        budget_gpu_hours=budget_gpu_hours,
        quiet=quiet,
        gpus=gpus,
        dashboard_host=dashboard_host,
        resume_existing=resume_existing,
        set=tuple(set),
        strict=strict,
        exit_at_once=False,
        warm_start=tuple(warm_start),
    )
    with hints.from_python(getattr(function, "__qualname__", None)):
        code, run_dir = start(sweep, function, request)
        return _ended(code, run_dir)


def resume(
    run: str | os.PathLike,
    function: Callable | None = None,
    *,
    storage: str | os.PathLike = "raysweep_runs",
    address: str | None = None,
    quiet: bool = False,
    retry_failed: bool = False,
    budget_gpu_hours: float | None = None,
) -> SweepResult:
    """``raysweep resume`` from Python. A sweep of a function needs it again (a run dir stores no code)."""
    from raysweep.driver.sweep import resume_sweep
    from raysweep.runs.show import resolve_run_dir

    style = function_style(function)
    run_dir = resolve_run_dir(run, storage)
    with hints.from_python(getattr(function, "__qualname__", None)):
        _check_style(run_dir, style)
        _ship_by_value(function)
        code = resume_sweep(
            run_dir,
            storage=storage,
            address=address,
            quiet=quiet,
            retry_failed=retry_failed,
            function=function,
            exit_at_once=False,
            budget_gpu_hours=budget_gpu_hours,
        )
        return _ended(code, run_dir)


def _check_style(run_dir: Path, style: str | None) -> None:
    recorded = read_spec(run_dir).function
    if recorded and style and recorded != style:
        shapes = {"raysweep": "train(config)", "wandb": "main(), reading wandb.config"}
        raise UserError(f"sweep {run_dir.name} ran a {shapes[recorded]} function; this one is {shapes[style]}")


def _ended(code: int, run_dir: Path) -> SweepResult:
    if code == 130:
        raise KeyboardInterrupt(
            f"sweep {run_dir.name} interrupted; its state is saved: {hints.command('resume', run_dir)}"
        )
    return SweepResult(run_dir)
