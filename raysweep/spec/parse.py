"""Validate a W&B-style sweep document (plus raysweep's own keys) into a frozen ``SweepSpec``.

Everything is checked here, before any cluster starts, and every problem is reported at
once with its key path (``parameters.lr.min: ...``). Unknown keys are errors with a
did-you-mean. The spec records what ran: ``SweepSpec.to_json`` is written to the run dir.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from raysweep.errors import SpecError
from raysweep.spec.checks import (
    SchemaViolation,
    choice,
    int_at_least,
    mapping,
    non_finite,
    number,
    text,
    unknown_keys,
    walk_size,
)
from raysweep.spec.distributions import DISTRIBUTIONS
from raysweep.spec.engine import check_rules, is_engine_block, objectives_of, parse_engine
from raysweep.spec.grow_block import parse_grow
from raysweep.spec.model import (
    METHODS,
    SCHEDULER_KINDS,
    SCHEDULERS,
    Objectives,
    Scheduler,
    SweepSpec,
)
from raysweep.spec.param import Param
from raysweep.spec.parameters_block import check_paths, check_program_names, parse_parameters
from raysweep.spec.raysweep_block import (
    check_packing,
    parse_blocks,
    parse_checkpoints,
    parse_settings,
    parse_size,
)
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
    if scheduler.kind.in_raysweep_block and objectives.single is None:
        problems.append(
            "raysweep.scheduler: early stopping compares trials on one metric, and this sweep has "
            + (
                f"several objectives (metrics: {', '.join(objectives.names)}): Optuna's pruners take one objective, "
                "as W&B's scheduler does; remove the scheduler, or optimize one metric"
                if objectives
                else "none: give metric.name, or remove the scheduler"
            )
        )
    if not scheduler.kind.in_raysweep_block and "metric" not in doc:
        notes.append(
            "warning: early_terminate: W&B's hyperband compares runs on metric.name, and this sweep has no metric: "
            "W&B's service stops no run, and neither does raysweep"
        )
        return None
    return scheduler


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
    own = _read_document(doc, source, problems, notes)
    method, engine, objectives = _search_of(doc, base_dir, problems, notes)
    base_config = _parse_base_config(own.get("base_config", {}), base_dir, problems)
    non_finite(base_config, "raysweep.base_config", problems)
    params = parse_parameters(doc.get("parameters"), problems) if "parameters" in doc else []
    early = doc.get("early_terminate") if engine is None else None  # a custom scheduler stops runs itself
    scheduler = _parse_scheduler(early, own.get("scheduler"), problems)
    train_loop, program, command = _parse_entry_point(doc, own, function, problems)
    _check_names(params, base_config, "base_config" in own, train_loop is None and function != "raysweep", problems)
    scheduler = _check_method_needs(method, params, objectives, doc, scheduler, problems, notes)
    size_param, num_gpus, sizes_known = parse_size(params, own, problems)
    runs_program = train_loop is None and function is None
    grow = parse_grow(own, params, base_config, scheduler, runs_program, num_gpus, problems)
    settings = parse_settings(doc, own, problems)
    resources, budget, searcher, wandb = parse_blocks(doc, own, problems)
    checkpoints = parse_checkpoints(own, problems)
    if sizes_known:  # the size parameter's values are whole numbers >= 1
        check_packing(resources, size_param, num_gpus, problems)
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
        checkpoints=checkpoints,
        searcher=searcher,
        wandb=wandb,
        source=source,
        wandb_document={key: value for key, value in doc.items() if key in WANDB_KEYS},
        notes=tuple(notes),
        engine=engine,
        grow=grow,
    )


def _search_of(doc: dict, base_dir: Path, problems: list[str], notes: list[str]) -> tuple[str | None, Any, Objectives]:
    """The method, W&B's scheduler-engine block (custom method where its optimizer searches) and the objectives."""
    method = choice(doc.get("method"), METHODS, "method", problems) if "method" in doc else None
    engine = (
        parse_engine(doc["scheduler"], base_dir, problems, notes) if is_engine_block(doc.get("scheduler")) else None
    )
    method = check_rules(doc, method, engine, problems)
    return method, engine, objectives_of(doc, engine, method, problems)


def _check_names(params: list[Param], base_config: dict, has_base: bool, to_script: bool, problems: list[str]) -> None:
    """A script's parameters are named as its flags; a loop's are paths into its config."""
    if to_script:
        check_program_names(params, problems)
    else:
        check_paths(params, base_config, has_base, problems)


def _read_document(doc: Any, source: str | None, problems: list[str], notes: list[str]) -> dict:
    """The document's shape and keys: a mapping of bounded size, W&B's keys and raysweep's (an
    unknown one is W&B's schema violation), and its ``raysweep:`` block, returned."""
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
    return own
