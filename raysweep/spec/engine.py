"""W&B's new sweep format (wandb/sweeps #135-#138, Aug 2026): several objectives (``metrics:``)
and a custom scheduler (``scheduler: {engine, source, optimizer, search_space}``), checked with
W&B's rules, one sentence per violation:

* ``metrics`` is a list of at least 2 metrics (name, goal: minimize by default, target); it
  excludes ``metric`` and requires ``method: custom``.
* ``scheduler.engine`` is optuna, ax or wandb; ``source`` is required when ``optimizer`` or
  ``search_space`` is set; ``scheduler`` and ``early_terminate`` exclude each other; engine
  wandb keeps W&B's grid, random and bayes (not ``custom``).
* ``parameters`` is still required without a scheduler, or when the scheduler has no
  ``search_space``.

Where W&B's service creates the sweep with a warning and its scheduler can still run it (a
``metrics`` list of one; ``early_terminate`` beside a scheduler, which the scheduler ignores),
raysweep runs it with the same warning (``checks.SchemaViolation``; ``--strict`` refuses).
The rest leaves nothing to run, and is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from raysweep.spec.checks import SchemaViolation, did_you_mean, mapping, text, unknown_keys
from raysweep.spec.model import Engine, Metric

ENGINES = ("optuna", "ax", "wandb")
ENGINE_KEYS = ("engine", "source", "optimizer", "search_space")
WANDB_ENGINE_METHODS = ("grid", "random", "bayes")
COST = "cost_hours"  # raysweep's measured cost, an objective a sweep may name (each trial's workers x hours held)


def is_engine_block(value: Any) -> bool:
    """W&B's top-level ``scheduler:`` of its new format (anything but raysweep's early stopping
    written at the top level before the ``raysweep:`` block: a mapping without ``engine``)."""
    return value is not None and not (isinstance(value, dict) and "engine" not in value)


def parse_objectives(value: Any, problems: list[str]) -> tuple[Metric, ...]:
    """``metrics:``: each a metric as ``metric:`` is one (name, goal, target)."""
    from raysweep.spec.wandb_keys import parse_metric

    if not isinstance(value, list):
        problems.append(f"metrics: must be a list of at least 2 metrics (name, goal), got {value!r}")
        return ()
    found = []
    for i, item in enumerate(value):
        before = len(problems)
        metric = parse_metric(item, "custom", problems)
        problems[before:] = [_prefix(p, f"metrics.{i}") for p in problems[before:]]
        if metric is not None:
            found.append(metric)
    names = [m.name for m in found]
    if len(set(names)) < len(names):
        problems.append(f"metrics: each metric once, got {names}")
    if len(value) < 2:
        problems.append(
            SchemaViolation(
                f"metrics: at least 2 metrics for several objectives, got {len(value)} (one is `metric:`); "
                "W&B's service creates the sweep, and its scheduler runs it with one objective"
            )
        )
    return tuple(found)


def _prefix(problem: str, where: str) -> str:
    """A metric's problem said at its place in the list (``metric.goal`` -> ``metrics.1.goal``)."""
    said = problem.replace("metric.", f"{where}.", 1).replace("metric:", f"{where}:", 1)
    return SchemaViolation(said) if isinstance(problem, SchemaViolation) else said


def parse_engine(value: Any, base_dir: Path, problems: list[str]) -> Engine | None:
    """``scheduler:`` with an ``engine``: W&B's custom scheduler block."""
    if mapping(value, "scheduler", problems) is None:
        return None
    unknown_keys(value, ENGINE_KEYS, "scheduler", problems)
    kind = value.get("engine")
    if kind not in ENGINES:
        problems.append(
            f"scheduler.engine: must be one of {', '.join(ENGINES)}, got {kind!r}{did_you_mean(str(kind), ENGINES)}"
        )
        return None
    fields = {
        k: text(value[k], f"scheduler.{k}", problems) for k in ("source", "optimizer", "search_space") if k in value
    }
    for key in ("optimizer", "search_space"):
        if key in value and "source" not in value:
            problems.append(f"scheduler.{key}: needs scheduler.source, the Python file that defines {value[key]!r}")
    source = fields.get("source")
    if source:
        path = (base_dir / source).resolve()
        if not path.is_file():
            problems.append(
                f"scheduler.source: {source!r} is not a file (resolved against the sweep file's directory: {path})"
            )
        elif path.suffix != ".py":
            problems.append(f"scheduler.source: {source!r} must be a Python file (.py)")
        fields["source"] = str(path)
    if kind == "wandb" and (fields.get("optimizer") or fields.get("search_space")):
        problems.append(
            "scheduler: engine wandb runs W&B's own grid, random and bayes; its optimizer and search_space are for "
            "engine optuna (or ax): set engine: optuna to use them"
        )
    return Engine(kind, fields.get("source"), fields.get("optimizer"), fields.get("search_space"))


def check_rules(
    doc: dict[str, Any], method: str | None, engine: Engine | None, objectives: tuple[Metric, ...], problems: list[str]
) -> None:
    """W&B's rules between ``method``, ``metric``/``metrics``, ``scheduler`` and ``early_terminate``."""
    if "metric" in doc and "metrics" in doc:
        problems.append("metric and metrics: cannot both be set: `metric` for one objective, `metrics` for several")
    elif "metrics" in doc and method not in (None, "custom"):
        problems.append(
            f"metrics: several objectives need method: custom (got method: {method}), with a scheduler of engine "
            "optuna: W&B's grid, random and bayes take one metric"
        )
    if method == "custom" and (engine is None or engine.kind == "wandb"):
        problems.append(
            "method: custom needs scheduler: {engine: optuna} (or ax), the engine that searches"
            + ("; engine wandb keeps grid, random and bayes" if engine is not None else "")
        )
    if engine is not None and engine.kind in ("optuna", "ax") and method not in (None, "custom"):
        problems.append(
            SchemaViolation(
                f"scheduler.engine {engine.kind}: searches with method: custom, got method: {method}; W&B's service "
                f"runs method {method} itself and creates the sweep with this warning, and so does raysweep (the "
                "scheduler is not used)"
            )
        )
    if engine is not None and engine.kind == "wandb" and method not in (None, *WANDB_ENGINE_METHODS):
        problems.append(
            f"scheduler.engine wandb: method must be one of {', '.join(WANDB_ENGINE_METHODS)}, got {method!r}"
        )
    if engine is not None and "early_terminate" in doc:
        problems.append(
            SchemaViolation(
                "early_terminate: cannot be used beside scheduler: the custom scheduler stops runs itself; "
                "W&B's service creates the sweep and its scheduler ignores early_terminate, and so does raysweep"
            )
        )
    if "parameters" not in doc and not (engine is not None and engine.search_space):
        problems.append("parameters: required, unless scheduler.search_space defines the space")
