"""W&B's new sweep format as wandb 0.31 released it: several objectives (``metrics:``) and a
scheduler block (``scheduler: {engine, source, optimizer, search_space}``) that ``wandb
sweep-scheduler`` runs, with W&B's verdicts:

* W&B's schema (wandb/sweeps #135-#138, PyPI ``sweeps`` 0.3.0) flags, and ``wandb sweep`` creates
  the sweep anyway: ``metric`` beside ``metrics``; ``metrics`` without ``method: custom``;
  ``early_terminate`` or ``controller: local`` beside a ``scheduler``; engine optuna or ax with a
  method other than custom, or none; no ``parameters`` and no ``search_space``. raysweep runs
  what W&B then runs, with W&B's warning (``checks.SchemaViolation``; ``--strict`` refuses, as
  W&B's local controller does).
* What runs: a sweep whose engine is optuna or ax is searched by that engine's optimizer
  whatever its ``method`` (W&B's service leaves such a sweep to its scheduler), on ``metrics``
  when given, else ``metric``. Any other sweep is searched by W&B's own engine (raysweep's grid,
  random and bayes), on ``metric``.
* What is refused: what nothing runs (``method: custom`` without an engine that searches, or with
  engine wandb; an unknown engine), and, when the sweep starts, what W&B's scheduler refuses
  there (``search/wandb_engine.build_optimizer`` calls W&B's own code: a ``search_space`` that
  returns no dict, an ``optimizer`` that returns no Study or Client, directions that disagree).

The engine's own warnings (engine wandb ignores ``optimizer`` and ``search_space``, Ax ignores
``search_space``) are warnings here too, not schema violations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from raysweep.spec.checks import SchemaViolation, did_you_mean, mapping, text, unknown_keys
from raysweep.spec.engines import ENGINE_KINDS
from raysweep.spec.model import Engine
from raysweep.spec.objectives import COST, Metric, Objectives  # noqa: F401 - COST: the measured objective

ENGINES = tuple(ENGINE_KINDS)
ENGINE_KEYS = ("engine", "source", "optimizer", "search_space")
WANDB_ENGINE_METHODS = ("grid", "random", "bayes")


def is_engine_block(value: Any) -> bool:
    """W&B's top-level ``scheduler:`` of its new format (anything but raysweep's early stopping
    written at the top level before the ``raysweep:`` block: a mapping without ``engine``)."""
    return value is not None and not (isinstance(value, dict) and "engine" not in value)


def searches(engine: Engine | None) -> bool:
    """The engine's own optimizer proposes the trials (optuna, ax), not W&B's grid, random or bayes."""
    return engine is not None and engine.record.searches


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


def parse_engine(value: Any, base_dir: Path, problems: list[str], notes: list[str]) -> Engine | None:
    """``scheduler:`` with an ``engine``: W&B's scheduler block."""
    if mapping(value, "scheduler", problems) is None:
        return None
    unknown_keys(value, ENGINE_KEYS, "scheduler", problems)
    kind = value.get("engine")
    if kind not in ENGINES:
        problems.append(
            f"scheduler.engine: must be one of {', '.join(ENGINES)}, got {kind!r}{did_you_mean(str(kind), ENGINES)} "
            "(W&B's sweep scheduler stops at start on any other: 'Unsupported engine')"
        )
        return None
    fields = {
        k: text(value[k], f"scheduler.{k}", problems) for k in ("source", "optimizer", "search_space") if k in value
    }
    record = ENGINE_KINDS[kind]
    for key in ("optimizer", "search_space"):
        if key in fields and key not in record.uses:
            notes.append(record.ignored_note.format(key=key))
            fields.pop(key)
    for key in ("optimizer", "search_space"):
        if key in fields and "source" not in value:
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
    return Engine(kind, fields.get("source"), fields.get("optimizer"), fields.get("search_space"))


def _beside_scheduler(doc: dict[str, Any], method: str | None, engine: Engine | None, problems: list[str]) -> None:
    """W&B's schema between ``metric``/``metrics`` and the method, and what cannot sit beside a
    ``scheduler`` block (``controller: local``, ``early_terminate``): each a ``SchemaViolation``."""
    own = searches(engine)
    if "metric" in doc and "metrics" in doc:
        reads = "its engine's optimizer reads metrics" if own else "its engine reads metric"
        problems.append(
            SchemaViolation(
                "metric and metrics: cannot both be set in W&B's schema (`metric` for one objective, `metrics` for "
                f"several); W&B creates the sweep and {reads}, and so does raysweep"
            )
        )
    elif "metrics" in doc and method not in (None, "custom"):
        problems.append(
            SchemaViolation(
                f"metrics: W&B's schema wants method: custom (a scheduler of engine optuna or ax) for several "
                f"objectives, got method: {method}; W&B's service runs method {method} anyway, and so does raysweep"
            )
        )
    if engine is not None and isinstance(doc.get("controller"), dict) and doc["controller"].get("type") == "local":
        problems.append(
            SchemaViolation("controller: type local cannot be used together with scheduler (W&B's schema, #137)")
        )
    if engine is not None and "early_terminate" in doc:
        problems.append(
            SchemaViolation(
                "early_terminate: cannot be used beside scheduler: the custom scheduler stops runs itself; "
                "W&B's service creates the sweep and its scheduler ignores early_terminate, and so does raysweep"
            )
        )


def check_rules(doc: dict[str, Any], method: str | None, engine: Engine | None, problems: list[str]) -> str | None:
    """W&B's rules between ``method``, ``metric``/``metrics``, ``scheduler``, ``controller`` and
    ``early_terminate``; returns the method that searches (``custom`` when the engine does)."""
    own = searches(engine)
    _beside_scheduler(doc, method, engine, problems)
    if own:
        if method != "custom":
            problems.append(
                SchemaViolation(
                    f"scheduler.engine {engine.kind}: W&B's schema wants method: custom, got "
                    f"{'no method' if method is None else f'method: {method}'}; W&B's sweep scheduler searches "
                    f"with {engine.kind} whatever the method, and so does raysweep"
                )
            )
        method = "custom"
    elif method is None and "method" not in doc:
        problems.append(
            "method: required, one of grid, random, bayes (or custom, with scheduler.engine optuna or ax): "
            "W&B's service cannot run a sweep without it"
        )
    elif method == "custom":
        problems.append(
            "method: custom needs scheduler: {engine: optuna} (or ax), the engine that searches"
            + ("; engine wandb keeps grid, random and bayes" if engine is not None else "")
            + " (W&B's engine: 'Invalid search type custom')"
        )
    if "parameters" not in doc and not (engine is not None and engine.search_space):
        if own:
            problems.append(
                SchemaViolation(
                    "parameters: W&B's schema requires it unless scheduler.search_space defines the space; W&B's "
                    f"{engine.kind} engine then searches an empty space (every trial's config is empty), and so "
                    "does raysweep"
                )
            )
        else:
            problems.append(
                "parameters: required, unless scheduler.search_space defines the space (W&B's engine: "
                "'Sweep config must contain parameters section')"
            )
    return method


def objectives_of(doc: dict[str, Any], engine: Engine | None, method: str | None, problems: list[str]) -> Objectives:
    """What the sweep optimizes, as what searches it reads: the engine's optimizer ``metrics``
    (else ``metric``), W&B's grid, random and bayes ``metric`` (else ``metrics``, which W&B's
    random and grid run beside; bayes cannot)."""
    from raysweep.spec.wandb_keys import parse_metric

    metric = parse_metric(doc["metric"], method, problems) if "metric" in doc else None
    several = parse_objectives(doc["metrics"], problems) if "metrics" in doc else ()
    if searches(engine):
        return Objectives(several or ((metric,) if metric else ()))
    return Objectives((metric,) if metric else several)
