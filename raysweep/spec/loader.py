"""Read a W&B-style sweep file (plus raysweep's own keys) into a frozen ``SweepSpec``.

Everything is checked here, before any cluster starts, and every problem is reported at
once with its key path (``parameters.lr.min: ...``). Unknown keys are errors with a
did-you-mean. The spec records what ran: ``SweepSpec.to_json`` is written to the run dir.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from raysweep import paths
from raysweep.errors import SpecError
from raysweep.spec.distributions import DISTRIBUTIONS, FIELDS, NUMERIC_FIELDS, Param, infer_distribution

METHODS = ("grid", "random", "bayes")
GOALS = ("minimize", "maximize")
SCHEDULERS = ("asha", "hyperband", "fifo")
WANDB_MODES = ("offline", "online", "disabled")
USE_GPU = ("auto", True, False)
DDP_WORKERS = ("warm", "torchtrainer")
# W&B's command macros (wandb/sdk/launch/sweeps/utils.py), plus ${envvar:NAME}
COMMAND_MACROS = (
    "env", "interpreter", "program", "args", "args_no_hyphens", "args_no_boolean_flags", "args_json",
    "args_json_file", "args_no_equals", "args_append_hydra", "args_override_hydra",
)  # fmt: skip
_MACRO = re.compile(r"\$\{([^}]*)\}")
_ENVVAR = re.compile(r"envvar:[A-Za-z0-9_]+")


@dataclass(frozen=True)
class Metric:
    name: str
    goal: str = "minimize"
    target: float | None = None

    @property
    def mode(self) -> str:
        """Ray Tune's and Optuna's word for the goal."""
        return "min" if self.goal == "minimize" else "max"


@dataclass(frozen=True)
class Scheduler:
    """An early-stopping scheduler; ``rungs`` are the iterations where trials are compared."""

    type: str
    grace_period: int
    max_t: int
    reduction_factor: float

    @property
    def rungs(self) -> list[int]:
        rf = self.reduction_factor
        if self.type == "asha":  # as Ray's ASHAScheduler places them
            count = int(math.log(self.max_t / self.grace_period) / math.log(rf) + 1)
            return [int(self.grace_period * rf**k) for k in range(count)]
        s_max = int(math.log(self.max_t) / math.log(rf) + 1e-9)
        return sorted({max(1, int(self.max_t / rf**k)) for k in range(1, s_max + 1)})


@dataclass(frozen=True)
class Resources:
    cpus_per_worker: float = 1.0
    use_gpu: str | bool = "auto"


@dataclass(frozen=True)
class Searcher:
    """Optuna TPE settings for ``method: bayes``."""

    n_startup_trials: int = 10
    constant_liar: bool = True
    skip_duplicates: bool = True  # never run a configuration again once it has a result (engine/search.py)


@dataclass(frozen=True)
class WandbSettings:
    project: str | None = None
    entity: str | None = None
    group: str | None = None
    mode: str | None = None  # None: offline unless an API key is configured


@dataclass(frozen=True)
class SweepSpec:
    method: str
    parameters: tuple[Param, ...]
    metric: Metric | None = None
    scheduler: Scheduler | None = None
    name: str | None = None
    description: str | None = None
    train_loop: str | None = None
    program: str | None = None
    command: tuple[str, ...] | None = None
    base_config: dict = field(default_factory=dict)
    run_cap: int | None = None
    max_concurrent: int | None = None
    max_failures: int = 0
    report_timeout_s: float | None = None
    reuse_actors: bool = True  # trials of one size run one after another in one Tune actor process
    ddp_workers: str = "warm"  # 2+ workers: warm DDP workers kept across trials, or a TorchTrainer run per trial
    seed: int = 0
    resources: Resources = Resources()
    searcher: Searcher = Searcher()
    wandb: WandbSettings = WandbSettings()
    source: str | None = None

    @property
    def runs_program(self) -> bool:
        """Trials run the W&B ``program:`` script (a ``train_loop`` takes precedence)."""
        return self.train_loop is None and self.program is not None

    def param(self, name: str) -> Param | None:
        return next((p for p in self.parameters if p.name == name), None)

    @property
    def grid_size(self) -> int | None:
        if self.method != "grid":
            return None
        return math.prod(len(p.grid_values()) for p in self.parameters)

    def trial_budget(self, count: int | None = None) -> int | None:
        """``--count``, else ``run_cap``, else the grid size; None when unbounded."""
        return count or self.run_cap or self.grid_size

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["parameters"] = {p.name: p.to_json() for p in self.parameters}
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SweepSpec:
        """Rebuild the spec a run dir recorded (``resume`` uses this)."""
        data = dict(data)
        params = tuple(
            Param(name=n, **{k: tuple(v) if isinstance(v, list) and k in ("values", "probabilities") else v for k, v in d.items()})
            for n, d in data.pop("parameters").items()
        )
        nested = {"metric": Metric, "scheduler": Scheduler, "resources": Resources, "searcher": Searcher, "wandb": WandbSettings}
        for key, kind in nested.items():
            if data.get(key) is not None:
                data[key] = kind(**data[key])
        if data.get("command") is not None:
            data["command"] = tuple(data["command"])
        return cls(parameters=params, **data)


# --- YAML ---------------------------------------------------------------------------------


class _SweepLoader(yaml.SafeLoader):
    """SafeLoader that also reads ``1e-5`` as a float (YAML 1.1 wants ``1.0e-5``)."""


_SweepLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def read_yaml(path: str | Path) -> Any:
    """Load a YAML file safely; a missing file or a syntax error is a ``SpecError``."""
    path = Path(path)
    if not path.is_file():
        raise SpecError([f"file not found: {path}" + (" (it is a directory)" if path.is_dir() else "")])
    try:
        return yaml.load(path.read_text(), Loader=_SweepLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise SpecError([f"YAML syntax error at {where}{e.problem or e}"], source=str(path)) from None
    except yaml.YAMLError as e:
        raise SpecError([f"YAML error: {e}"], source=str(path)) from None


def load_spec(path: str | Path, overrides: Iterable[str] = ()) -> SweepSpec:
    """Read, override (``--set key.path=value``) and validate a sweep file."""
    doc = read_yaml(path)
    problems: list[str] = []
    if isinstance(doc, dict):
        for item in overrides:
            apply_set(doc, item, problems)
    if problems:
        raise SpecError(problems, source=str(path))
    return parse_spec(doc, source=str(path), base_dir=Path(path).parent)


def apply_set(doc: dict, item: str, problems: list[str]) -> None:
    """Apply one ``path=value`` to the raw document; the value is read as YAML.

    Dotted parameter names (``parameters.arch.stages.0.repeat.values=[1,2]``) are matched
    against the keys the document already has, longest first.
    """
    key, sep, raw = item.partition("=")
    if not sep or not key:
        problems.append(f"--set {item!r}: expected path=value, e.g. base_config.epochs=2")
        return
    try:
        value = yaml.load(raw, Loader=_SweepLoader)  # noqa: S506
    except yaml.YAMLError:
        value = raw
    parts = key.split(".")
    node = doc
    while len(parts) > 1:
        for n in range(len(parts) - 1, 0, -1):
            head = ".".join(parts[:n])
            if isinstance(node, dict) and isinstance(node.get(head), dict):
                node, parts = node[head], parts[n:]
                break
        else:
            node = node.setdefault(parts[0], {}) if isinstance(node, dict) else None
            parts = parts[1:]
        if not isinstance(node, dict):
            problems.append(f"--set {key}: {'.'.join(key.split('.')[:-len(parts)])} is not a mapping")
            return
    node[parts[0]] = value


# --- validation -----------------------------------------------------------------------------


def _did_you_mean(key: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(key), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _unknown_keys(block: Mapping, allowed: Iterable[str], where: str, problems: list[str]) -> None:
    allowed = list(allowed)
    for key in block:
        if key not in allowed:
            prefix = f"{where}." if where else ""
            problems.append(
                f"{prefix}{key}: unknown key{_did_you_mean(key, allowed)}; valid keys: {', '.join(allowed)}"
            )


def _number(value: Any) -> Any:
    """Numbers pass; numeric strings become numbers (YAML 1.1 reads ``1e-5`` as a string)."""
    if isinstance(value, str):
        for kind in (int, float):
            try:
                return kind(value.strip())
            except ValueError:
                pass
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _choice(value: Any, choices: tuple, where: str, problems: list[str]) -> Any:
    if value not in choices:
        names = ", ".join(str(c).lower() if isinstance(c, bool) else str(c) for c in choices)
        problems.append(f"{where}: must be one of {names}, got {value!r}{_did_you_mean(value, map(str, choices))}")
    return value


def _int_at_least(value: Any, low: int, where: str, problems: list[str]) -> int | None:
    value = _number(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        problems.append(f"{where}: must be an integer >= {low}, got {value!r}")
        return None
    return value


def _positive(value: Any, where: str, problems: list[str]) -> float | None:
    value = _number(value)
    if not _is_number(value) or value <= 0:
        problems.append(f"{where}: must be a number > 0, got {value!r}")
        return None
    return value


def _text(value: Any, where: str, problems: list[str]) -> str | None:
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{where}: must be a non-empty string, got {value!r}")
        return None
    return value


def _mapping(value: Any, where: str, problems: list[str]) -> dict | None:
    if not isinstance(value, dict):
        problems.append(f"{where}: must be a mapping, got {type(value).__name__} {value!r}")
        return None
    return value


def _parse_param(name: str, entry: dict, problems: list[str]) -> Param | None:
    where = f"parameters.{name}"
    _unknown_keys(entry, FIELDS + ("distribution",), where, problems)
    fields = {k: v for k, v in entry.items() if k in FIELDS}
    for key in NUMERIC_FIELDS:
        if key in fields:
            fields[key] = _number(fields[key])
            if not _is_number(fields[key]):
                problems.append(f"{where}.{key}: must be a number, got {fields[key]!r}")
                return None
    for key in ("values", "probabilities"):
        if key in fields:
            if not isinstance(fields[key], list):
                problems.append(f"{where}.{key}: must be a list, got {fields[key]!r}")
                return None
            fields[key] = tuple(_number(v) if key == "probabilities" else v for v in fields[key])
    if "values" in fields and ({"min", "max"} & fields.keys()):
        problems.append(f"{where}: give either values or min/max, not both")
        return None

    dist = entry.get("distribution")
    if dist is None:
        dist = infer_distribution(fields)
        if dist is None:
            problems.append(f"{where}: needs value, values, or min and max (or a distribution)")
            return None
    elif dist not in DISTRIBUTIONS:
        problems.append(
            f"{where}.distribution: unknown distribution {dist!r}{_did_you_mean(dist, DISTRIBUTIONS)}; "
            f"valid: {', '.join(DISTRIBUTIONS)}"
        )
        return None

    law = DISTRIBUTIONS[dist]
    allowed = law.required + law.optional
    stray = [k for k in fields if k not in allowed]
    missing = [k for k in law.required if k not in fields]
    if stray:
        takes = ", ".join(allowed) or "no fields"
        hint = f"; set distribution: q_{dist}" if "q" in stray and f"q_{dist}" in DISTRIBUTIONS else ""
        problems.append(f"{where}: {', '.join(stray)} not used by distribution {dist} (it takes {takes}){hint}")
    if missing:
        problems.append(f"{where}: distribution {dist} needs {' and '.join(missing)}")
    if stray or missing:
        return None
    param = Param(name=name, distribution=dist, **(law.defaults | fields))
    problems.extend(f"{where}: {p}" for p in law.check(param))
    return param


def _parse_parameters(block: Any, problems: list[str], prefix: str = "") -> list[Param]:
    """Flatten nested ``parameters:`` blocks into dotted names."""
    where = f"parameters{'.' + prefix.rstrip('.') if prefix else ''}"
    if not isinstance(block, dict) or not block:
        problems.append(f"{where}: must be a non-empty mapping of parameter names, got {block!r}")
        return []
    params: list[Param] = []
    for key, entry in block.items():
        name = f"{prefix}{key}"
        if not isinstance(key, (str, int)) or "/" in str(key) or not str(key).strip():
            problems.append(f"parameters.{name}: parameter names are words or indices joined by '.', no '/'")
            continue
        if not isinstance(entry, dict):
            problems.append(
                f"parameters.{name}: must be a mapping such as {{values: [...]}} or {{min: 0, max: 1}}, got {entry!r}"
            )
            continue
        if "parameters" in entry:
            if len(entry) > 1:
                others = ", ".join(k for k in entry if k != "parameters")
                problems.append(f"parameters.{name}: a nested parameters block takes no other keys, got {others}")
            params += _parse_parameters(entry["parameters"], problems, prefix=f"{name}.")
        else:
            param = _parse_param(name, entry, problems)
            if param is not None:
                params.append(param)
    return params


def _check_paths(params: list[Param], base_config: dict, problems: list[str]) -> None:
    names = [p.name for p in params]
    for name in names:
        if names.count(name) > 1:
            problems.append(f"parameters.{name}: given twice (nested blocks and dotted names address the same path)")
        for other in names:
            if other.startswith(name + "."):
                problems.append(f"parameters.{name}: also the parent of parameters.{other}; a path can't be both")
    for name in dict.fromkeys(names):
        try:
            paths.apply_overrides(base_config, {name: None})
        except KeyError as e:
            problems.append(f"parameters.{name}: {e.args[0]} in base_config")


def _parse_scheduler(doc: dict, problems: list[str]) -> Scheduler | None:
    settings: dict[str, Any] = {}
    kind = None
    early = doc.get("early_terminate")
    if early is not None and _mapping(early, "early_terminate", problems) is not None:
        _unknown_keys(early, ("type", "min_iter", "max_iter", "s", "eta", "strict"), "early_terminate", problems)
        _choice(early.get("type"), ("hyperband",), "early_terminate.type", problems)
        eta = _number(early.get("eta", 3))
        if not _is_number(eta) or eta <= 1:
            problems.append(f"early_terminate.eta: must be a number > 1, got {eta!r}")
            eta = 3
        settings["reduction_factor"] = eta
        if "max_iter" in early:
            max_iter = _int_at_least(early["max_iter"], 1, "early_terminate.max_iter", problems)
            settings["max_t"] = max_iter
        if "min_iter" in early:
            settings["grace_period"] = _int_at_least(early["min_iter"], 1, "early_terminate.min_iter", problems)
        elif "max_iter" in early and "s" in early:
            s = _int_at_least(early["s"], 0, "early_terminate.s", problems)
            if settings.get("max_t") and s is not None:
                settings["grace_period"] = max(1, int(round(settings["max_t"] / eta**s)))
        else:
            problems.append("early_terminate: needs min_iter, or max_iter and s")
        if "strict" in early and not isinstance(early["strict"], bool):
            problems.append(f"early_terminate.strict: must be true or false, got {early['strict']!r}")
        kind = "asha"
    block = doc.get("scheduler")
    if block is not None and _mapping(block, "scheduler", problems) is not None:
        _unknown_keys(block, ("type", "grace_period", "max_t", "reduction_factor"), "scheduler", problems)
        kind = _choice(block.get("type", kind or "asha"), SCHEDULERS, "scheduler.type", problems)
        for key in ("grace_period", "max_t"):
            if key in block:
                settings[key] = _int_at_least(block[key], 1, f"scheduler.{key}", problems)
        if "reduction_factor" in block:
            rf = _number(block["reduction_factor"])
            if not _is_number(rf) or rf <= 1:
                problems.append(f"scheduler.reduction_factor: must be a number > 1, got {rf!r}")
            settings["reduction_factor"] = rf
    if kind in (None, "fifo") or None in settings.values():
        return None
    settings = {"grace_period": 1, "max_t": 100, "reduction_factor": 3} | settings
    if settings["max_t"] < settings["grace_period"]:
        problems.append(
            f"scheduler: max_t >= grace_period must hold, got max_t={settings['max_t']}, "
            f"grace_period={settings['grace_period']}"
        )
    return Scheduler(type=kind, **settings)


def _parse_metric(value: Any, problems: list[str]) -> Metric | None:
    if _mapping(value, "metric", problems) is None:
        return None
    _unknown_keys(value, ("name", "goal", "target"), "metric", problems)
    name = _text(value.get("name"), "metric.name", problems)
    goal = _choice(value.get("goal", "minimize"), GOALS, "metric.goal", problems)
    target = value.get("target")
    if target is not None:
        target = _number(target)
        if not _is_number(target):
            problems.append(f"metric.target: must be a number, got {target!r}")
    return Metric(name, goal, target) if name and goal in GOALS else None


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
            problems.extend(f"base_config: {p}" for p in e.problems)
            return {}
        value = {} if value is None else value
    return _mapping(value, "base_config", problems) or {}


def _parse_block(value: Any, where: str, kind: type, checks: dict[str, Callable], problems: list[str]) -> Any:
    if _mapping(value, where, problems) is None:
        return kind()
    _unknown_keys(value, checks, where, problems)
    parsed = {k: checks[k](v, f"{where}.{k}", problems) for k, v in value.items() if k in checks}
    return kind(**{k: v for k, v in parsed.items() if v is not None})


def _bool(value: Any, where: str, problems: list[str]) -> bool | None:
    if not isinstance(value, bool):
        problems.append(f"{where}: must be true or false, got {value!r}")
        return None
    return value


TOP_LEVEL = (
    # W&B sweep keys
    "program", "method", "metric", "parameters", "early_terminate", "command", "run_cap",
    "name", "description", "project", "entity",
    # raysweep's own
    "train_loop", "base_config", "scheduler", "searcher", "max_concurrent", "resources",
    "max_failures", "report_timeout_s", "reuse_actors", "ddp_workers", "wandb", "seed",
)  # fmt: skip


def parse_spec(doc: Any, source: str | None = None, base_dir: Path = Path()) -> SweepSpec:
    """Validate a loaded document; raise one ``SpecError`` listing every problem."""
    problems: list[str] = []
    if not isinstance(doc, dict):
        raise SpecError([f"the sweep file must be a mapping of keys (method, parameters, ...), got {doc!r}"], source)
    _unknown_keys(doc, TOP_LEVEL, "", problems)

    method = _choice(doc.get("method"), METHODS, "method", problems) if "method" in doc else None
    if "method" not in doc:
        problems.append(f"method: required, one of {', '.join(METHODS)}")
    metric = _parse_metric(doc["metric"], problems) if "metric" in doc else None
    base_config = _parse_base_config(doc.get("base_config", {}), base_dir, problems)
    params = _parse_parameters(doc.get("parameters"), problems) if "parameters" in doc else []
    if "parameters" not in doc:
        problems.append("parameters: required, a mapping of parameter names to distributions")
    _check_paths(params, base_config, problems)
    scheduler = _parse_scheduler(doc, problems)

    if method == "grid":
        for p in params:
            if not p.is_discrete:
                problems.append(
                    f"parameters.{p.name}: grid search needs discrete parameters (constant, categorical, "
                    f"int_uniform, q_uniform), got {p.distribution}"
                )
    if metric is None and "metric" not in doc:
        if method == "bayes":
            problems.append("metric: required for method bayes (Optuna needs a metric name and goal)")
        if "early_terminate" in doc or scheduler is not None:
            problems.append("metric: required for early termination (the scheduler compares trials on it)")

    train_loop = _parse_train_loop(doc["train_loop"], problems) if "train_loop" in doc else None
    program = _text(doc["program"], "program", problems) if "program" in doc else None
    if "train_loop" not in doc and "program" not in doc:
        problems.append("train_loop: required (module:function), or a W&B program: script")
    command = doc.get("command")
    if command is not None and (not isinstance(command, list) or not all(isinstance(c, str) for c in command)):
        problems.append(f"command: must be a list of strings, got {command!r}")
    elif command is not None:
        for i, chunk in enumerate(command):
            for name in _MACRO.findall(chunk):
                if name not in COMMAND_MACROS and not _ENVVAR.fullmatch(name):
                    problems.append(
                        f"command.{i}: unknown macro ${{{name}}}{_did_you_mean(name, COMMAND_MACROS)}; "
                        f"W&B's macros are {', '.join('${' + m + '}' for m in COMMAND_MACROS)} and ${{envvar:NAME}}"
                    )

    def optional(key: str, check: Callable, *args: Any) -> Any:
        return check(doc[key], *args, key, problems) if key in doc else None

    run_cap = optional("run_cap", _int_at_least, 1)
    max_concurrent = optional("max_concurrent", _int_at_least, 1)
    max_failures = optional("max_failures", _int_at_least, 0)
    seed = optional("seed", _int_at_least, 0)
    report_timeout_s = optional("report_timeout_s", _positive)
    reuse_actors = optional("reuse_actors", _bool)
    ddp_workers = optional("ddp_workers", _choice, DDP_WORKERS)
    for key in ("name", "description", "project", "entity"):
        optional(key, _text)

    resources = Resources()
    if "resources" in doc:
        resources = _parse_block(
            doc["resources"], "resources", Resources,
            {"cpus_per_worker": _positive,
             "use_gpu": lambda v, w, pr: _choice(v, USE_GPU, w, pr)},
            problems,
        )  # fmt: skip
    searcher = Searcher()
    if "searcher" in doc:
        searcher = _parse_block(
            doc["searcher"], "searcher", Searcher,
            {"n_startup_trials": lambda v, w, pr: _int_at_least(v, 0, w, pr), "constant_liar": _bool,
             "skip_duplicates": _bool},
            problems,
        )  # fmt: skip
    wandb = WandbSettings(project=doc.get("project"), entity=doc.get("entity"))
    if "wandb" in doc:
        block = _parse_block(
            doc["wandb"], "wandb", WandbSettings,
            {"project": _text, "entity": _text, "group": _text,
             "mode": lambda v, w, pr: _choice(v, WANDB_MODES, w, pr)},
            problems,
        )  # fmt: skip
        wandb = replace(block, project=block.project or wandb.project, entity=block.entity or wandb.entity)

    if problems:
        raise SpecError(problems, source)
    return SweepSpec(
        method=method,
        parameters=tuple(params),
        metric=metric,
        scheduler=scheduler,
        name=doc.get("name"),
        description=doc.get("description"),
        train_loop=train_loop,
        program=program,
        command=tuple(command) if command else None,
        base_config=base_config,
        run_cap=run_cap,
        max_concurrent=max_concurrent,
        max_failures=max_failures or 0,
        report_timeout_s=report_timeout_s,
        reuse_actors=reuse_actors is not False,
        ddp_workers=ddp_workers or "warm",
        seed=seed or 0,
        resources=resources,
        searcher=searcher,
        wandb=wandb,
        source=source,
    )
