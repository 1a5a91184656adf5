"""Validate a W&B-style sweep document (plus raysweep's own keys) into a frozen ``SweepSpec``.

Everything is checked here, before any cluster starts, and every problem is reported at
once with its key path (``parameters.lr.min: ...``). Unknown keys are errors with a
did-you-mean. The spec records what ran: ``SweepSpec.to_json`` is written to the run dir.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from raysweep.errors import SpecError
from raysweep.spec.checks import (
    SchemaViolation,
    boolean,
    choice,
    gpu_share,
    int_at_least,
    mapping,
    non_finite,
    number,
    parse_block,
    positive,
    text,
    unknown_keys,
    walk_size,
)
from raysweep.spec.distributions import DISTRIBUTIONS
from raysweep.spec.engine import check_rules, is_engine_block, objectives_of, parse_engine
from raysweep.spec.grow_block import parse_grow
from raysweep.spec.model import (
    DDP_WORKERS,
    METHODS,
    PROCESS_GROUP_TIMEOUT_S,
    SAMPLERS,
    SCHEDULER_KINDS,
    SCHEDULERS,
    SIZE,
    USE_GPU,
    WANDB_MODES,
    WORKER_START_TIMEOUT_S,
    Budget,
    Objectives,
    Resources,
    Scheduler,
    Searcher,
    SweepSpec,
    WandbSettings,
    world_sizes,
)
from raysweep.spec.param import Param
from raysweep.spec.parameters_block import check_paths, check_program_names, check_size_param, parse_parameters
from raysweep.spec.reading import MAX_VALUES, apply_set, read_yaml
from raysweep.spec.wandb_keys import (
    RAYSWEEP_KEYS,
    WANDB_KEYS,
    check_command,
    check_wandb_only_keys,
    parse_early_terminate,
    split_raysweep_block,
)
from raysweep.values import finite_number
from raysweep.words import Runner


def _parse_scheduler(early: Any, block: Any, problems: list[str]) -> Scheduler | None:
    """``early_terminate`` means W&B's hyperband; ``raysweep.scheduler`` picks Ray's ASHA or
    HyperBand (or fifo: none) instead, taking what ``early_terminate`` gives as its defaults."""
    scheduler, settings = parse_early_terminate(early, problems) if early is not None else (None, {})
    if block is None or mapping(block, "raysweep.scheduler", problems) is None:
        return scheduler
    unknown_keys(block, ("type", "grace_period", "max_t", "reduction_factor"), "raysweep.scheduler", problems)
    kind = choice(block.get("type", "asha"), SCHEDULERS, "raysweep.scheduler.type", problems)
    for key in ("grace_period", "max_t"):
        if key in block:
            settings[key] = int_at_least(block[key], 1, f"raysweep.scheduler.{key}", problems)
    if "reduction_factor" in block:
        rf = number(block["reduction_factor"])
        if not finite_number(rf) or rf <= 1:
            problems.append(f"raysweep.scheduler.reduction_factor: must be a number > 1, got {rf!r}")
        settings["reduction_factor"] = rf
    if kind not in SCHEDULER_KINDS or None in settings.values():
        return None
    settings = {"grace_period": 1, "max_t": 100, "reduction_factor": 3} | settings
    if settings["max_t"] < settings["grace_period"]:
        problems.append(
            f"raysweep.scheduler: max_t >= grace_period must hold, got max_t={settings['max_t']}, "
            f"grace_period={settings['grace_period']}"
        )
    return Scheduler(type=kind, **settings)


def _parse_train_loop(value: Any, problems: list[str]) -> str | None:
    pattern = r"[A-Za-z_][\w.]*:[A-Za-z_]\w*"
    if not isinstance(value, str) or not re.fullmatch(pattern, value):
        problems.append(f"train_loop: must be module:function, e.g. train_loops.smoke:train, got {value!r}")
        return None
    return value


def _parse_base_config(value: Any, base_dir: Path, problems: list[str]) -> dict:
    if isinstance(value, str):
        path = (base_dir / value) if not Path(value).is_absolute() else Path(value)
        try:
            value = read_yaml(path)
        except SpecError as e:
            problems.extend(f"raysweep.base_config: {p}" for p in e.problems)
            return {}
        value = {} if value is None else value
        walk_size(value, MAX_VALUES, "raysweep.base_config", problems)
        if problems:
            return {}
    return mapping(value, "raysweep.base_config", problems) or {}


def _check_packing(resources: Resources, size_param: Param | None, num_gpus: int | None, problems: list[str]) -> None:
    """A GPU share below 1 packs 1-worker trials; a DDP rank needs a GPU of its own (NCCL)."""
    if resources.gpus_per_worker >= 1:
        return
    sizes = world_sizes(size_param, num_gpus)
    if max(sizes) > 1:
        problems.append(
            f"raysweep.resources.gpus_per_worker: {resources.gpus_per_worker:g} packs 1-worker trials onto one GPU, "
            f"but this sweep has trials with num_gpus up to {max(sizes)}: each DDP rank "
            "needs a GPU of its own (NCCL refuses two ranks on one device)"
        )


def _local_controller(doc: dict) -> bool:
    controller = doc.get("controller")
    return isinstance(controller, dict) and controller.get("type") == "local"


def load_spec(
    path: str | Path, overrides: Iterable[str] = (), strict: bool = False, function: str | None = None
) -> SweepSpec:
    """Read, override (``--set key.path=value``) and validate a sweep file."""
    doc = read_yaml(path)
    problems: list[str] = []
    if isinstance(doc, dict):
        for item in overrides:
            apply_set(doc, item, problems)
    if problems:
        raise SpecError(problems, source=str(path))
    return parse_spec(doc, source=str(path), base_dir=Path(path).parent, strict=strict, function=function)


def _parse_entry_point(
    doc: dict, own: dict, function: str | None, problems: list[str]
) -> tuple[str | None, str | None, list[str] | None]:
    """What each trial runs: ``raysweep.train_loop``, else W&B's ``program``/``command``; a
    Python function given to raysweep.run replaces them all."""
    if function is None:
        train_loop = _parse_train_loop(own["train_loop"], problems) if "train_loop" in own else None
        program = text(doc["program"], "program", problems) if "program" in doc else None
        command = check_command(doc.get("command"), problems)
    else:  # the function replaces them, as wandb.agent(function=...) ignores program and command
        train_loop = program = command = None
    uses_program = command is None or any("${program}" in c for c in command)
    if function is None and train_loop is None and "train_loop" not in own:
        if program is None and "program" not in doc and uses_program:
            problems.append(
                "program: required (the script W&B's agent runs), unless command runs something without "
                "${program}, or raysweep.train_loop names a module:function"
            )
    return train_loop, program, command


def _check_method_needs(
    method: str | None,
    params: list[Param],
    objectives: Objectives,
    doc: dict,
    scheduler: Scheduler | None,
    problems: list[str],
    notes: list[str],
) -> Scheduler | None:
    """Grid search needs discrete parameters; bayes and raysweep's own early stopping need a metric;
    W&B's ``early_terminate`` without one stops no run (W&B's hyperband needs ``metric``), and an
    engine without one learns nothing. Returns the scheduler the sweep keeps."""
    needs = METHODS.get(method)
    if needs is not None and needs.enumerates:
        for p in params:
            if not p.is_discrete:
                problems.append(
                    f"parameters.{p.name}: grid search needs discrete parameters "
                    f"({', '.join(n for n, law in DISTRIBUTIONS.items() if law.discrete)}), got {p.distribution}"
                )
            elif p.probabilities is not None:
                problems.append(
                    f"parameters.{p.name}: probabilities can't be used with grid search (W&B refuses them too)"
                )
    if method == "bayes" and "metric" not in doc:
        problems.append(
            "metric: required for method bayes (W&B's engine: 'Bayesian search requires \"metric\" section')"
            + ("; metrics: is read by a scheduler of engine optuna or ax" if "metrics" in doc else "")
        )
    if method == "custom" and not objectives:
        notes.append(
            "warning: the sweep has no metric: W&B's optimizer is told no result of any trial (W&B's scheduler "
            "fails each tell), so it searches blind; trials are shown in creation order"
        )
    if scheduler is None:
        return None
    if scheduler.type != "wandb_hyperband" and objectives.single is None:
        problems.append(
            "raysweep.scheduler: early stopping compares trials on one metric, and this sweep has "
            + (
                f"several objectives (metrics: {', '.join(objectives.names)}): Optuna's pruners take one objective, "
                "as W&B's scheduler does; remove the scheduler, or optimize one metric"
                if objectives
                else "none: give metric.name, or remove the scheduler"
            )
        )
    if scheduler.type == "wandb_hyperband" and "metric" not in doc:
        notes.append(
            "warning: early_terminate: W&B's hyperband compares runs on metric.name, and this sweep has no metric: "
            "W&B's service stops no run, and neither does raysweep"
        )
        return None
    return scheduler


def _parse_size(params: list[Param], own: dict, problems: list[str]) -> tuple[Param | None, int | None, bool]:
    """A trial's size: the ``num_gpus`` parameter or ``raysweep.num_gpus`` (one of them), and
    whether the parameter's values are known good (whole numbers >= 1)."""
    size_param = next((p for p in params if p.name == SIZE), None)
    sizes_known = True
    if size_param is not None:
        before = len(problems)
        check_size_param(size_param, problems)
        sizes_known = len(problems) == before
    num_gpus = int_at_least(own[SIZE], 1, f"raysweep.{SIZE}", problems) if SIZE in own else None
    if num_gpus is not None and size_param is not None:
        problems.append(
            f"raysweep.{SIZE}: the file also sweeps parameters.{SIZE}; size trials with one of them "
            "(the parameter reaches the script, raysweep's key does not)"
        )
    return size_param, num_gpus, sizes_known


def _parse_blocks(doc: dict, own: dict, problems: list[str]) -> tuple[Resources, Budget, Searcher, WandbSettings]:
    """``raysweep.resources``, ``raysweep.searcher`` and ``raysweep.wandb`` (with W&B's own
    ``project`` and ``entity`` as the defaults)."""
    resources = Resources()
    if "resources" in own:
        resources = parse_block(
            own["resources"],
            "raysweep.resources",
            Resources,
            {
                "cpus_per_worker": positive,
                "gpus_per_worker": gpu_share,
                "memory_per_worker_gb": positive,
                "network_interface": text,
                "use_gpu": lambda v, w, pr: choice(v, USE_GPU, w, pr),
            },
            problems,
        )
    budget = Budget()
    if "budget" in own:
        budget = parse_block(
            own["budget"], "raysweep.budget", Budget, {"gpu_hours": positive, "epoch_seconds": positive}, problems
        )
    searcher = Searcher()
    if "searcher" in own:
        searcher = parse_block(
            own["searcher"],
            "raysweep.searcher",
            Searcher,
            {
                "sampler": lambda v, w, pr: choice(v, SAMPLERS, w, pr),
                "n_startup_trials": lambda v, w, pr: int_at_least(v, 0, w, pr),
                "constant_liar": boolean,
                "skip_duplicates": boolean,
            },
            problems,
        )
    wandb = WandbSettings(project=doc.get("project"), entity=doc.get("entity"))
    if isinstance(own.get("wandb"), str):  # the mode alone, as --wandb takes it: `wandb: disabled`
        wandb = replace(wandb, mode=choice(own["wandb"], WANDB_MODES, "raysweep.wandb", problems))
    elif "wandb" in own:
        block = parse_block(
            own["wandb"],
            "raysweep.wandb",
            WandbSettings,
            {"project": text, "entity": text, "group": text, "mode": lambda v, w, pr: choice(v, WANDB_MODES, w, pr)},
            problems,
        )
        wandb = replace(block, project=block.project or wandb.project, entity=block.entity or wandb.entity)
    return resources, budget, searcher, wandb


def _apply_strictness(problems: list[str], notes: list[str], strict: bool) -> list[str]:
    """W&B's schema violations stay problems when ``strict``; else each becomes a warning in
    ``notes``, as W&B's service runs such a file."""
    violations = [p for p in problems if isinstance(p, SchemaViolation)]
    if len(violations) < len(problems):  # the file is refused anyway: its unknown keys may be why (`methd:`)
        return problems
    if violations and not strict:
        problems = [p for p in problems if not isinstance(p, SchemaViolation)]
        notes += [f"warning: {v}" for v in violations]
        notes.append(
            "warning: W&B's sweep service runs this file despite the above (its engine proposes runs without "
            "validating), and so does raysweep; `raysweep validate --strict` refuses it as W&B's local controller does"
        )
    return problems


def _parse_settings(doc: dict, own: dict, problems: list[str]) -> dict[str, Any]:
    """``run_cap`` and raysweep's scalar settings, each checked, with its default."""

    def optional(key: str, check: Callable, *args: Any) -> Any:
        return check(own[key], *args, f"raysweep.{key}", problems) if key in own else None

    settings = {
        "run_cap": int_at_least(doc["run_cap"], 1, "run_cap", problems) if "run_cap" in doc else None,
        "max_concurrent": optional("max_concurrent", int_at_least, 1),
        "max_failures": optional("max_failures", int_at_least, 0) or 0,
        "max_initial_failures": optional("max_initial_failures", int_at_least, 0),
        "seed": optional("seed", int_at_least, 0),
        "report_timeout_s": optional("report_timeout_s", positive),
        "process_group_timeout_s": optional("process_group_timeout_s", positive) or PROCESS_GROUP_TIMEOUT_S,
        "worker_start_timeout_s": optional("worker_start_timeout_s", positive) or WORKER_START_TIMEOUT_S,
        "reuse_actors": optional("reuse_actors", boolean) is not False,
        "ddp_workers": optional("ddp_workers", choice, DDP_WORKERS) or Runner.WARM,
    }
    if settings["max_initial_failures"] is None:
        settings["max_initial_failures"] = 5
    optional("strict", boolean)
    for key in ("name", "description", "project", "entity"):
        if key in doc:
            text(doc[key], key, problems)
    return settings


def parse_spec(
    doc: Any, source: str | None = None, base_dir: Path = Path(), strict: bool = False, function: str | None = None
) -> SweepSpec:
    """Validate a loaded document; raise one ``SpecError`` listing every problem. ``function``:
    the trials run a Python function of that style (``SweepSpec.function``) instead of the
    document's program or train_loop.

    As W&B's service does, a file that breaks W&B's schema where W&B's engine still runs it
    (``checks.SchemaViolation``) runs, with a warning per violation. ``strict`` (or the file's
    ``raysweep.strict: true`` or ``controller: {type: local}``) refuses them, as W&B's local
    controller does.
    """
    problems: list[str] = []
    notes: list[str] = []
    if not isinstance(doc, dict):
        raise SpecError([f"the sweep file must be a mapping of keys (method, parameters, ...), got {doc!r}"], source)
    walk_size(doc, MAX_VALUES, "the sweep file", problems)
    if problems:
        raise SpecError(problems, source)
    unknown: list[str] = []
    unknown_keys(doc, WANDB_KEYS + ("raysweep",) + RAYSWEEP_KEYS, "", unknown)
    problems += [SchemaViolation(f"{p} (W&B's service ignores it)") for p in unknown]
    own = split_raysweep_block(doc, problems, notes)
    check_wandb_only_keys(doc, problems, notes)

    method = choice(doc.get("method"), METHODS, "method", problems) if "method" in doc else None
    engine = (
        parse_engine(doc["scheduler"], base_dir, problems, notes) if is_engine_block(doc.get("scheduler")) else None
    )
    method = check_rules(doc, method, engine, problems)  # custom where the engine's optimizer searches
    objectives = objectives_of(doc, engine, method, problems)
    base_config = _parse_base_config(own.get("base_config", {}), base_dir, problems)
    non_finite(base_config, "raysweep.base_config", problems)
    params = parse_parameters(doc.get("parameters"), problems) if "parameters" in doc else []
    early = doc.get("early_terminate") if engine is None else None  # a custom scheduler stops runs itself
    scheduler = _parse_scheduler(early, own.get("scheduler"), problems)

    train_loop, program, command = _parse_entry_point(doc, own, function, problems)
    if train_loop is None and function != "raysweep":
        check_program_names(params, problems)
    else:
        check_paths(params, base_config, "base_config" in own, problems)

    scheduler = _check_method_needs(method, params, objectives, doc, scheduler, problems, notes)

    size_param, num_gpus, sizes_known = _parse_size(params, own, problems)
    runs_program = train_loop is None and function is None
    grow = (
        parse_grow(own["grow"], params, base_config, scheduler, runs_program, num_gpus, problems)
        if "grow" in own
        else None
    )

    settings = _parse_settings(doc, own, problems)

    resources, budget, searcher, wandb = _parse_blocks(doc, own, problems)
    if sizes_known:  # the size parameter's values are whole numbers >= 1
        _check_packing(resources, size_param, num_gpus, problems)

    problems = _apply_strictness(problems, notes, strict or own.get("strict") is True or _local_controller(doc))
    if problems:
        raise SpecError(problems, source)
    return SweepSpec(
        method=method,
        parameters=tuple(params),
        objectives=objectives,
        scheduler=scheduler,
        name=doc.get("name"),
        description=doc.get("description"),
        train_loop=train_loop,
        function=function,
        program=program,
        command=tuple(command) if command else None,
        base_config=base_config,
        num_gpus=num_gpus,
        **settings,
        resources=resources,
        budget=budget,
        searcher=searcher,
        wandb=wandb,
        source=source,
        wandb_document={key: value for key, value in doc.items() if key in WANDB_KEYS},
        notes=tuple(notes),
        engine=engine,
        grow=grow,
    )
