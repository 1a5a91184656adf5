"""W&B's own keys: which raysweep honours, which it refuses and why, and raysweep's ``raysweep:`` block.

The keys follow W&B's schema (PyPI ``sweeps``, ``config/schema.json``), and the command macros
its agent renders (``wandb/sdk/launch/sweeps/utils.py``).
"""

from __future__ import annotations

import re
from typing import Any

from raysweep.spec.checks import (
    SchemaViolation,
    choice,
    did_you_mean,
    int_at_least,
    mapping,
    number,
    text,
    unknown_keys,
)
from raysweep.spec.model import GOALS, METHODS, Metric, Scheduler, wandb_bands
from raysweep.values import finite_number

# W&B's sweep keys (its schema, sweeps/config/schema.json); raysweep's own live under `raysweep:`.
WANDB_KEYS = (
    "program",
    "method",
    "metric",
    "parameters",
    "early_terminate",
    "command",
    "run_cap",
    "name",
    "description",
    "project",
    "entity",
    "controller",
    "scheduler",
    "apiVersion",
    "kind",
    "job",
    "image_uri",
    "metrics",
)

RAYSWEEP_KEYS = (
    "train_loop",
    "base_config",
    "num_gpus",
    "scheduler",
    "searcher",
    "max_concurrent",
    "resources",
    "budget",
    "checkpoints",
    "max_failures",
    "max_preemptions",
    "max_initial_failures",
    "report_timeout_s",
    "process_group_timeout_s",
    "worker_start_timeout_s",
    "reuse_actors",
    "ddp_workers",
    "grow",
    "wandb",
    "seed",
    "strict",
)

# W&B Launch keys: a Launch job runs somewhere W&B decides; raysweep runs the program or command here.
LAUNCH_KEYS = ("job", "image_uri")


# W&B's command macros (wandb/sdk/launch/sweeps/utils.py), plus ${envvar:NAME}
COMMAND_MACROS = (
    "env",
    "interpreter",
    "program",
    "args",
    "args_no_hyphens",
    "args_no_boolean_flags",
    "args_json",
    "args_json_file",
    "args_no_equals",
    "args_append_hydra",
    "args_override_hydra",
)

MACRO = re.compile(r"^\$\{([^}]*)\}$")  # a whole chunk: W&B's agent replaces only those (and ${envvar:...})

ENVVAR = re.compile(r"envvar:[A-Za-z0-9_]+")


def split_raysweep_block(doc: dict, problems: list[str], notes: list[str]) -> dict:
    """raysweep's own keys: the ``raysweep:`` block, plus any still written at the top level
    (files from before the block existed: accepted, with a one-line note)."""
    block = doc.get("raysweep", {})
    if mapping(block, "raysweep", problems) is None:
        block = {}
    unknown_keys(block, RAYSWEEP_KEYS, "raysweep", problems)
    block = dict(block)
    legacy = [k for k in RAYSWEEP_KEYS if k in doc and k != "scheduler"]
    scheduler = doc.get("scheduler")
    if isinstance(scheduler, dict) and "engine" not in scheduler:  # raysweep's ASHA, before the block
        legacy.append("scheduler")
    for key in legacy:
        if key in block:
            problems.append(f"{key}: given both at the top level and under raysweep:; keep the one under raysweep:")
        block[key] = doc[key]
    if legacy:
        notes.append(
            f"note: raysweep's own keys belong under `raysweep:` (top-level {', '.join(legacy)} still work, "
            "but W&B's tools reject them and `scheduler` is W&B Launch's key)"
        )
    return block


def check_wandb_only_keys(doc: dict, problems: list[str], notes: list[str]) -> None:
    """W&B keys raysweep accepts but cannot honour, or honours by being what it is."""
    for key in LAUNCH_KEYS:
        if key in doc:
            problems.append(
                f"{key}: a W&B Launch key; raysweep runs the sweep's program or command on its Ray cluster, "
                "not a Launch job"
            )
    controller = doc.get("controller")
    if controller is not None and mapping(controller, "controller", problems) is not None:
        unknown_keys(controller, ("type",), "controller", problems)
        choice(controller.get("type"), ("local", "cloud"), "controller.type", problems)
        notes.append("note: controller is ignored: raysweep is always this sweep's (local) controller")


IMPUTE = ("latest", "best", "worst")


def parse_metric(value: Any, method: str | None, problems: list[str]) -> Metric | None:
    if mapping(value, "metric", problems) is None:
        return None
    unknown_keys(value, ("name", "goal", "target", "impute", "impute_while_running"), "metric", problems)
    name = text(value.get("name"), "metric.name", problems)
    goal = value.get("goal", "minimize")
    if goal not in GOALS:  # W&B's engine minimizes any goal but "maximize"
        problems.append(
            SchemaViolation(
                f"metric.goal: must be minimize or maximize, got {goal!r}{did_you_mean(str(goal), GOALS)} "
                "(W&B's service minimizes any other goal)"
            )
        )
        goal = "minimize"
    target = value.get("target")
    if target is not None:
        target = number(target)
        if not finite_number(target):
            problems.append(f"metric.target: must be a number, got {target!r}")
    # W&B reads both only in bayes search, to give failed and running runs a value in its model.
    learns = method in METHODS and METHODS[method].learns
    if "impute" in value and choice(value["impute"], IMPUTE, "metric.impute", problems) and learns:
        problems.append(
            f"metric.impute: {value['impute']!r} is not honoured: raysweep's bayes search (Optuna TPE) leaves a "
            "failed trial out of its model instead of giving it a value; remove the key"
        )
    running = value.get("impute_while_running", "false")
    if "impute_while_running" in value and choice(
        running, IMPUTE + ("false",), "metric.impute_while_running", problems
    ):
        if running != "false" and learns:
            problems.append(
                f"metric.impute_while_running: {running!r} is not honoured: Optuna's TPE models only finished "
                "trials (running ones are told apart by constant_liar); remove the key or set it to 'false'"
            )
    return Metric(name, goal, target) if name and goal in GOALS else None


def parse_early_terminate(early: Any, problems: list[str]) -> tuple[Scheduler | None, dict[str, Any]]:
    """W&B's ``early_terminate`` (its schema's ``hyperband_stopping``), and the settings it lends
    to a ``raysweep.scheduler`` that picks one of Ray's schedulers instead.

    One W&B's schema refuses is a ``SchemaViolation``: W&B's service still runs the sweep, but
    its stop check fails on it every time, so no run is stopped early; raysweep runs it without
    early termination."""
    found: list[str] = []
    scheduler, lent = _parse_early_terminate(early, found)
    problems += [SchemaViolation(f"{p} (W&B's service runs the sweep but stops no run early with it)") for p in found]
    return scheduler, lent


def _parse_early_terminate(early: Any, problems: list[str]) -> tuple[Scheduler | None, dict[str, Any]]:
    if mapping(early, "early_terminate", problems) is None:
        return None, {}
    before = len(problems)
    unknown_keys(early, ("type", "min_iter", "max_iter", "s", "eta", "strict"), "early_terminate", problems)
    choice(early.get("type"), ("hyperband",), "early_terminate.type", problems)
    eta = number(early.get("eta", 3))
    if not finite_number(eta) or eta <= 1:
        problems.append(f"early_terminate.eta: must be a number > 1, got {eta!r}")
        eta = 3
    min_iter = int_at_least(early["min_iter"], 1, "early_terminate.min_iter", problems) if "min_iter" in early else None
    max_iter = int_at_least(early["max_iter"], 1, "early_terminate.max_iter", problems) if "max_iter" in early else None
    s = int_at_least(early["s"], 1, "early_terminate.s", problems) if "s" in early else None
    strict = early.get("strict", True)
    if not isinstance(strict, bool):
        problems.append(f"early_terminate.strict: must be true or false, got {strict!r}")
    if not ("min_iter" in early or ("max_iter" in early and "s" in early)):
        problems.append("early_terminate: needs min_iter, or max_iter and s")
    if len(problems) > before:
        return None, {}
    bands = wandb_bands(min_iter, max_iter, s, eta)
    if not bands:
        problems.append(
            f"early_terminate: max_iter={max_iter}, s={s}, eta={eta:g} give no band (max_iter / eta^k < 1 for "
            "every k); W&B's engine fails such a sweep when it first checks for stops. Raise max_iter or lower eta"
        )
        return None, {}
    lent = {"reduction_factor": eta, "grace_period": bands[0]} | ({"max_t": max_iter} if max_iter else {})
    return Scheduler(
        "wandb_hyperband", grace_period=bands[0], reduction_factor=eta, bands=tuple(bands), strict=strict is not False
    ), lent


def check_command(command: Any, problems: list[str]) -> list[str] | None:
    """W&B's ``command``: a list whose whole-chunk macros are W&B's own. Numbers and booleans
    (``--epochs, 10``) become strings as ``wandb agent`` makes them (``str(c)``: ``True``)."""
    if command is None:
        return None
    if not isinstance(command, list) or not all(isinstance(c, (str, int, float)) or c is None for c in command):
        problems.append(f"command: must be a list of strings (or numbers), got {command!r}")
        return None
    command = [str(c) for c in command]
    for i, chunk in enumerate(command):
        # `hydra.run.dir=out/${now:%H}` passes to the script as written, as under wandb agent
        for name in MACRO.findall(chunk):
            if name not in COMMAND_MACROS and not ENVVAR.fullmatch(name):
                problems.append(
                    f"command.{i}: unknown macro ${{{name}}}{did_you_mean(name, COMMAND_MACROS)}; "
                    f"W&B's macros are {', '.join('${' + m + '}' for m in COMMAND_MACROS)} and ${{envvar:NAME}}"
                )
    return command
