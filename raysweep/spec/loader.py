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
EXPONENT_LAWS = ("log_uniform", "inv_log_uniform", "q_log_uniform")  # W&B refuses them: min/max read as exponents
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
_MACRO = re.compile(r"^\$\{([^}]*)\}$")  # a whole chunk: W&B's agent replaces only those (and ${envvar:...})
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
    """An early-stopping scheduler; ``rungs`` are the iterations where trials are compared.

    ``wandb_hyperband`` is ``early_terminate: hyperband`` with W&B's own rule (``bands``, no
    iteration cap); ``asha`` and ``hyperband`` are Ray's schedulers, chosen in ``raysweep.scheduler``.
    """

    type: str
    grace_period: int | None = None
    max_t: int | None = None
    reduction_factor: float = 3
    bands: tuple[int, ...] = ()  # wandb_hyperband: the iterations W&B compares runs at
    strict: bool = True  # wandb_hyperband: compare the band's value (W&B's default), else the run's best

    @property
    def rungs(self) -> list[int]:
        if self.type == "wandb_hyperband":
            return [b for b in self.bands if b <= MAX_SHOWN_BAND]
        rf = self.reduction_factor
        if self.type == "asha":  # as Ray's ASHAScheduler places them
            count = int(math.log(self.max_t / self.grace_period) / math.log(rf) + 1)
            return [int(self.grace_period * rf**k) for k in range(count)]
        s_max = int(math.log(self.max_t) / math.log(rf) + 1e-9)
        return sorted({max(1, int(self.max_t / rf**k)) for k in range(1, s_max + 1)})


MAX_SHOWN_BAND = 10**6  # W&B's min_iter bands go on for 100 multiples of eta; show the reachable ones


def wandb_bands(min_iter: int | None, max_iter: int | None, s: int | None, eta: float) -> list[int]:
    """W&B's hyperband bands (sweeps' ``hyperband_stop_runs``): ``max_iter / eta^k`` for k = 1..s
    when ``max_iter`` is given (``min_iter`` is then ignored), else ``min_iter * eta^k``, unbounded."""
    bands: list[int] = []
    if max_iter is not None:
        band: float = max_iter
        for _ in range(int(s or 0)):
            band /= eta
            if band < 1:
                break
            bands.append(int(band))
        return sorted(bands)
    band = min_iter or 1
    for _ in range(100):
        bands.append(int(band))
        band *= eta
    return bands


@dataclass(frozen=True)
class Resources:
    cpus_per_worker: float = 1.0
    use_gpu: str | bool = "auto"
    gpus_per_worker: float = 1.0  # < 1 packs that many 1-worker trials onto one GPU (0.25: four)


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
    num_gpus: int | None = None  # raysweep.num_gpus: every trial's size, not passed to the script
    run_cap: int | None = None
    max_concurrent: int | None = None
    max_failures: int = 0
    max_initial_failures: int = 5  # the sweep stops when its first this many trials all fail (W&B's agent: 5)
    report_timeout_s: float | None = None
    reuse_actors: bool = True  # trials of one size run one after another in one Tune actor process
    ddp_workers: str = "warm"  # 2+ workers: warm DDP workers kept across trials, or a TorchTrainer run per trial
    seed: int = 0
    resources: Resources = Resources()
    searcher: Searcher = Searcher()
    wandb: WandbSettings = WandbSettings()
    source: str | None = None
    notes: tuple[str, ...] = ()  # one-line notes for the user (deprecated spellings, ignored keys)

    @property
    def runs_program(self) -> bool:
        """Trials run W&B's ``program:`` script or ``command:`` (a ``train_loop`` takes precedence)."""
        return self.train_loop is None

    @property
    def command_uses_program(self) -> bool:
        return self.command is None or any("${program}" in c for c in self.command)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.parameters if p.name == name), None)

    def trial_size(self, flat_config: Mapping[str, Any]) -> Any:
        """A trial's DDP world size: its ``num_gpus`` parameter, else ``raysweep.num_gpus``, else 1."""
        return flat_config.get(SIZE, self.num_gpus or 1)

    @property
    def trial_sizes(self) -> set[int]:
        """Every size a trial of this sweep can ask for."""
        return trial_sizes(self.param(SIZE), self.num_gpus)

    @property
    def grid_size(self) -> int | None:
        """W&B's grid size: distinct values per parameter, multiplied (never materialised)."""
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
            Param(name=n, **{k: tuple(v) if isinstance(v, list) and k in ("values", "probabilities", "nest") else v for k, v in d.items()})
            for n, d in data.pop("parameters").items()
        )
        nested = {"metric": Metric, "scheduler": Scheduler, "resources": Resources, "searcher": Searcher, "wandb": WandbSettings}
        for key, kind in nested.items():
            if data.get(key) is not None:
                data[key] = kind(**{k: tuple(v) if isinstance(v, list) else v for k, v in data[key].items()})
        for key in ("command", "notes"):
            if data.get(key) is not None:
                data[key] = tuple(data[key])
        return cls(parameters=params, **data)


# --- YAML ---------------------------------------------------------------------------------


class _SweepLoader(yaml.SafeLoader):
    """SafeLoader that also reads ``1e-5`` as a float (YAML 1.1 wants ``1.0e-5``)."""


_SweepLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


MAX_FILE_BYTES = 10 * 2**20  # a sweep file or base_config is a few KiB; refuse to parse a huge one
MAX_VALUES = 1_000_000  # values in a document once YAML aliases are expanded (billion laughs)


def read_yaml(path: str | Path) -> Any:
    """Load a YAML file safely; a missing, binary or huge file or a syntax error is a ``SpecError``."""
    path = Path(path)
    if not path.is_file():
        raise SpecError([f"file not found: {path}" + (" (it is a directory)" if path.is_dir() else "")])
    if path.stat().st_size > MAX_FILE_BYTES:
        raise SpecError([f"{path} is {path.stat().st_size:,} bytes; a sweep file must be under {MAX_FILE_BYTES:,}"])
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    if not text and raw or "\0" in text:
        raise SpecError([f"{path} is not a text file (expected YAML or JSON)"])
    try:
        return yaml.load(text, Loader=_SweepLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise SpecError([f"YAML syntax error at {where}{e.problem or e}"], source=str(path)) from None
    except yaml.YAMLError as e:
        raise SpecError([f"YAML error: {e}"], source=str(path)) from None
    except RecursionError:
        raise SpecError(["YAML nesting too deep"], source=str(path)) from None


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
    if parts[0] in RAYSWEEP_KEYS and parts[0] not in doc and isinstance(doc.get("raysweep"), dict):
        parts.insert(0, "raysweep")  # --set base_config.epochs=2 means raysweep.base_config.epochs
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


def _parse_param(name: str, entry: dict, problems: list[str], nest: tuple[str, ...] = ()) -> Param | None:
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
    before = len(problems)
    for key in ("value", "values"):
        if key in fields:
            _non_finite(list(fields[key]) if key == "values" else fields[key], f"{where}.{key}", problems)
    if len(problems) > before:
        return None
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

    if dist in EXPONENT_LAWS:  # W&B's engine refuses these (sweeps' PARAM_DEPRECATION_MAP)
        problems.append(
            f"{where}.distribution: {dist} takes base-e exponents as min/max, and W&B refuses it; use "
            f"{dist}_values to give the limits themselves (e.g. min: 1e-5, max: 1e-2)"
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
    param = Param(name=name, distribution=dist, nest=nest, **(law.defaults | fields))
    problems.extend(f"{where}: {p}" for p in law.check(param))
    return param


def _parse_parameters(block: Any, problems: list[str], prefix: str = "", nest: tuple[str, ...] = ()) -> list[Param]:
    """Flatten nested ``parameters:`` blocks into dotted names."""
    where = f"parameters{'.' + prefix.rstrip('.') if prefix else ''}"
    if not isinstance(block, dict) or not block:
        problems.append(f"{where}: must be a non-empty mapping of parameter names, got {block!r}")
        return []
    params: list[Param] = []
    for key, entry in sorted(block.items(), key=lambda item: str(item[0])):  # W&B's order, nested blocks too
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
            params += _parse_parameters(entry["parameters"], problems, prefix=f"{name}.", nest=nest + (str(key),))
        else:
            param = _parse_param(name, entry, problems, nest)
            if param is not None:
                params.append(param)
    return params


def _check_program_names(params: list[Param], problems: list[str]) -> None:
    """A ``program:`` sweep's names are W&B's: opaque strings the script receives, so dotted names,
    integer parts and a name beside its dotted child are all fine; only a repeat is not."""
    names = [p.name for p in params]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"parameters.{name}: given twice (a nested block and a dotted name spell the same name)")


def _check_paths(params: list[Param], base_config: dict, has_base_config: bool, problems: list[str]) -> None:
    """A ``train_loop`` sweep's names are paths in the loop's nested config."""
    names = [p.name for p in params]
    for name in names:
        if names.count(name) > 1:
            problems.append(f"parameters.{name}: given twice (nested blocks and dotted names address the same path)")
        for other in names:
            if other.startswith(name + "."):
                problems.append(
                    f"parameters.{name}: also the parent of parameters.{other}; in a train_loop's config a path "
                    "can't be both a value and a mapping (a program: sweep passes such names to its script as they are)"
                )
    for name in dict.fromkeys(names):
        try:
            paths.apply_overrides(base_config, {name: None})
        except KeyError as e:
            where = "in raysweep.base_config" if has_base_config else "(a list must be defined in raysweep.base_config, and this file has none)"
            problems.append(f"parameters.{name}: {e.args[0]} {where}")


def _parse_early_terminate(early: Any, problems: list[str]) -> tuple[Scheduler | None, dict[str, Any]]:
    """W&B's ``early_terminate`` (its schema's ``hyperband_stopping``), and the settings it lends
    to a ``raysweep.scheduler`` that picks one of Ray's schedulers instead."""
    if _mapping(early, "early_terminate", problems) is None:
        return None, {}
    before = len(problems)
    _unknown_keys(early, ("type", "min_iter", "max_iter", "s", "eta", "strict"), "early_terminate", problems)
    _choice(early.get("type"), ("hyperband",), "early_terminate.type", problems)
    eta = _number(early.get("eta", 3))
    if not _is_number(eta) or eta <= 1:
        problems.append(f"early_terminate.eta: must be a number > 1, got {eta!r}")
        eta = 3
    min_iter = _int_at_least(early["min_iter"], 1, "early_terminate.min_iter", problems) if "min_iter" in early else None
    max_iter = _int_at_least(early["max_iter"], 1, "early_terminate.max_iter", problems) if "max_iter" in early else None
    s = _int_at_least(early["s"], 1, "early_terminate.s", problems) if "s" in early else None
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
    return Scheduler("wandb_hyperband", grace_period=bands[0], reduction_factor=eta, bands=tuple(bands),
                     strict=strict is not False), lent  # fmt: skip


def _parse_scheduler(early: Any, block: Any, problems: list[str]) -> Scheduler | None:
    """``early_terminate`` means W&B's hyperband; ``raysweep.scheduler`` picks Ray's ASHA or
    HyperBand (or fifo: none) instead, taking what ``early_terminate`` gives as its defaults."""
    scheduler, settings = _parse_early_terminate(early, problems) if early is not None else (None, {})
    if block is None or _mapping(block, "raysweep.scheduler", problems) is None:
        return scheduler
    _unknown_keys(block, ("type", "grace_period", "max_t", "reduction_factor"), "raysweep.scheduler", problems)
    kind = _choice(block.get("type", "asha"), SCHEDULERS, "raysweep.scheduler.type", problems)
    for key in ("grace_period", "max_t"):
        if key in block:
            settings[key] = _int_at_least(block[key], 1, f"raysweep.scheduler.{key}", problems)
    if "reduction_factor" in block:
        rf = _number(block["reduction_factor"])
        if not _is_number(rf) or rf <= 1:
            problems.append(f"raysweep.scheduler.reduction_factor: must be a number > 1, got {rf!r}")
        settings["reduction_factor"] = rf
    if kind not in ("asha", "hyperband") or None in settings.values():
        return None
    settings = {"grace_period": 1, "max_t": 100, "reduction_factor": 3} | settings
    if settings["max_t"] < settings["grace_period"]:
        problems.append(
            f"raysweep.scheduler: max_t >= grace_period must hold, got max_t={settings['max_t']}, "
            f"grace_period={settings['grace_period']}"
        )
    return Scheduler(type=kind, **settings)


IMPUTE = ("latest", "best", "worst")


def _parse_metric(value: Any, method: str | None, problems: list[str]) -> Metric | None:
    if _mapping(value, "metric", problems) is None:
        return None
    _unknown_keys(value, ("name", "goal", "target", "impute", "impute_while_running"), "metric", problems)
    name = _text(value.get("name"), "metric.name", problems)
    goal = _choice(value.get("goal", "minimize"), GOALS, "metric.goal", problems)
    target = value.get("target")
    if target is not None:
        target = _number(target)
        if not _is_number(target):
            problems.append(f"metric.target: must be a number, got {target!r}")
    # W&B reads both only in bayes search, to give failed and running runs a value in its model.
    if "impute" in value and _choice(value["impute"], IMPUTE, "metric.impute", problems) and method == "bayes":
        problems.append(
            f"metric.impute: {value['impute']!r} is not honoured: raysweep's bayes search (Optuna TPE) leaves a "
            "failed trial out of its model instead of giving it a value; remove the key"
        )
    running = value.get("impute_while_running", "false")
    if "impute_while_running" in value and _choice(running, IMPUTE + ("false",), "metric.impute_while_running", problems):
        if running != "false" and method == "bayes":
            problems.append(
                f"metric.impute_while_running: {running!r} is not honoured: Optuna's TPE models only finished "
                "trials (running ones are told apart by constant_liar); remove the key or set it to 'false'"
            )
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
            problems.extend(f"raysweep.base_config: {p}" for p in e.problems)
            return {}
        value = {} if value is None else value
        _walk_size(value, MAX_VALUES, "raysweep.base_config", problems)
        if problems:
            return {}
    return _mapping(value, "raysweep.base_config", problems) or {}


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


# W&B's sweep keys (its schema, sweeps/config/schema.json); raysweep's own live under `raysweep:`.
WANDB_KEYS = (
    "program", "method", "metric", "parameters", "early_terminate", "command", "run_cap", "name",
    "description", "project", "entity", "controller", "scheduler", "apiVersion", "kind", "job", "image_uri",
    "metrics",
)  # fmt: skip
RAYSWEEP_KEYS = (
    "train_loop", "base_config", "num_gpus", "scheduler", "searcher", "max_concurrent", "resources",
    "max_failures", "max_initial_failures", "report_timeout_s", "reuse_actors", "ddp_workers", "wandb", "seed",
)  # fmt: skip
# W&B Launch keys: a Launch job runs somewhere W&B decides; raysweep runs the program or command here.
LAUNCH_KEYS = ("job", "image_uri")
SIZE = "num_gpus"  # the parameter (or raysweep key) that sizes a trial's DDP world


def _split_raysweep_block(doc: dict, problems: list[str], notes: list[str]) -> dict:
    """raysweep's own keys: the ``raysweep:`` block, plus any still written at the top level
    (files from before the block existed: accepted, with a one-line note)."""
    block = doc.get("raysweep", {})
    if _mapping(block, "raysweep", problems) is None:
        block = {}
    _unknown_keys(block, RAYSWEEP_KEYS, "raysweep", problems)
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


def _check_wandb_only_keys(doc: dict, problems: list[str], notes: list[str]) -> None:
    """W&B keys raysweep accepts but cannot honour, or honours by being what it is."""
    scheduler = doc.get("scheduler")
    if scheduler is not None and not (isinstance(scheduler, dict) and "engine" not in scheduler):
        problems.append(
            "scheduler: W&B Launch's custom sweep scheduler (engine: optuna | ax | wandb) is not supported: "
            "raysweep runs grid, random and bayes search itself; Ray's ASHA goes under raysweep: {scheduler: ...}"
        )
    for key in LAUNCH_KEYS:
        if key in doc:
            problems.append(
                f"{key}: a W&B Launch key; raysweep runs the sweep's program or command on its Ray cluster, "
                "not a Launch job"
            )
    if "metrics" in doc:
        problems.append("metrics: multi-objective sweeps need W&B's method: custom, which raysweep does not have; use metric")
    controller = doc.get("controller")
    if controller is not None and _mapping(controller, "controller", problems) is not None:
        _unknown_keys(controller, ("type",), "controller", problems)
        _choice(controller.get("type"), ("local", "cloud"), "controller.type", problems)
        notes.append("note: controller is ignored: raysweep is always this sweep's (local) controller")


def _walk_size(value: Any, limit: int, where: str, problems: list[str]) -> None:
    """Refuse a document that YAML aliases make huge (billion laughs) or circular."""
    seen = 0
    stack: list[tuple[Any, tuple[int, ...]]] = [(value, ())]
    while stack:
        node, ancestors = stack.pop()
        seen += 1
        if seen > limit:
            problems.append(f"{where}: more than {limit:,} values once YAML aliases are expanded; refusing to expand it")
            return
        if isinstance(node, (dict, list)):
            if id(node) in ancestors:
                problems.append(f"{where}: a YAML alias refers to a mapping or list that contains it (a cycle)")
                return
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, ancestors + (id(node),)) for child in children)


def _non_finite(value: Any, where: str, problems: list[str]) -> None:
    """NaN and infinity can reach neither a script's argv nor a JSON config (``validate --sample``)."""
    if isinstance(value, float) and not math.isfinite(value):
        problems.append(f"{where}: {value} is not a finite number; NaN and infinity can't be swept")
    elif isinstance(value, dict):
        for key, child in value.items():
            _non_finite(child, f"{where}.{key}", problems)
    elif isinstance(value, list):
        for i, child in enumerate(value):
            _non_finite(child, f"{where}.{i}", problems)


def _gpu_share(value: Any, where: str, problems: list[str]) -> float | None:
    """A worker's GPUs: a share of one, in (0, 1], or a whole number of them."""
    value = _number(value)
    if not _is_number(value) or value <= 0 or (value > 1 and value != int(value)):
        problems.append(f"{where}: must be a number in (0, 1] (a share of one GPU) or a whole number of GPUs, got {value!r}")
        return None
    return value


def trial_sizes(size_param: Param | None, num_gpus: int | None) -> set[int]:
    """The sizes a sweep's trials can ask for, from a checked ``num_gpus`` parameter (constant,
    categorical or int_uniform) or ``raysweep.num_gpus``. A wide int_uniform counts its first 65
    sizes and its largest: enough to tell the smallest, the largest and which never fit."""
    if size_param is None:
        return {num_gpus or 1}
    if size_param.distribution == "int_uniform":
        low, high = int(size_param.min), int(size_param.max)
        return set(range(low, min(high, low + 64) + 1)) | {high}
    return {int(v) for v in size_param.grid_values()}


def _check_packing(resources: Resources, size_param: Param | None, num_gpus: int | None, problems: list[str]) -> None:
    """A GPU share below 1 packs 1-worker trials; a DDP rank needs a GPU of its own (NCCL)."""
    if resources.gpus_per_worker >= 1:
        return
    sizes = trial_sizes(size_param, num_gpus)
    if max(sizes) > 1:
        problems.append(
            f"raysweep.resources.gpus_per_worker: {resources.gpus_per_worker:g} packs 1-worker trials onto one GPU, "
            f"but this sweep has trials with num_gpus up to {max(sizes)}: each DDP rank "
            "needs a GPU of its own (NCCL refuses two ranks on one device)"
        )


def _check_size_param(param: Param, problems: list[str]) -> None:
    """A ``num_gpus`` parameter sizes the trial: every value it can take is a whole number >= 1."""
    where = f"parameters.{param.name}"
    expected = "num_gpus is each trial's number of DDP workers: whole numbers >= 1"
    if param.distribution == "constant":
        values: Iterable[Any] = [param.value]
    elif param.distribution == "categorical":
        values = param.values or ()
    elif param.distribution == "int_uniform":
        values = [param.min]
    else:
        problems.append(f"{where}: {expected}, as value, values or int_uniform; got distribution {param.distribution}")
        return
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int) or v < 1]
    if bad:
        problems.append(f"{where}: {expected}, got {bad[0]!r}")


def parse_spec(doc: Any, source: str | None = None, base_dir: Path = Path()) -> SweepSpec:
    """Validate a loaded document; raise one ``SpecError`` listing every problem."""
    problems: list[str] = []
    notes: list[str] = []
    if not isinstance(doc, dict):
        raise SpecError([f"the sweep file must be a mapping of keys (method, parameters, ...), got {doc!r}"], source)
    _walk_size(doc, MAX_VALUES, "the sweep file", problems)
    if problems:
        raise SpecError(problems, source)
    _unknown_keys(doc, WANDB_KEYS + ("raysweep",) + RAYSWEEP_KEYS, "", problems)
    own = _split_raysweep_block(doc, problems, notes)
    _check_wandb_only_keys(doc, problems, notes)

    method = _choice(doc.get("method"), METHODS, "method", problems) if "method" in doc else None
    if "method" not in doc:
        problems.append(f"method: required, one of {', '.join(METHODS)}")
    metric = _parse_metric(doc["metric"], method, problems) if "metric" in doc else None
    base_config = _parse_base_config(own.get("base_config", {}), base_dir, problems)
    _non_finite(base_config, "raysweep.base_config", problems)
    params = _parse_parameters(doc.get("parameters"), problems) if "parameters" in doc else []
    if "parameters" not in doc:
        problems.append("parameters: required, a mapping of parameter names to distributions")
    scheduler = _parse_scheduler(doc.get("early_terminate"), own.get("scheduler"), problems)

    train_loop = _parse_train_loop(own["train_loop"], problems) if "train_loop" in own else None
    program = _text(doc["program"], "program", problems) if "program" in doc else None
    command = doc.get("command")
    if command is not None and (not isinstance(command, list) or not all(isinstance(c, str) for c in command)):
        problems.append(f"command: must be a list of strings, got {command!r}")
        command = None
    elif command is not None:
        for i, chunk in enumerate(command):
            # `hydra.run.dir=out/${now:%H}` passes to the script as written, as under wandb agent
            for name in _MACRO.findall(chunk):
                if name not in COMMAND_MACROS and not _ENVVAR.fullmatch(name):
                    problems.append(
                        f"command.{i}: unknown macro ${{{name}}}{_did_you_mean(name, COMMAND_MACROS)}; "
                        f"W&B's macros are {', '.join('${' + m + '}' for m in COMMAND_MACROS)} and ${{envvar:NAME}}"
                    )
    uses_program = command is None or any("${program}" in c for c in command)
    if train_loop is None and "train_loop" not in own:
        if program is None and "program" not in doc and uses_program:
            problems.append(
                "program: required (the script W&B's agent runs), unless command runs something without "
                "${program}, or raysweep.train_loop names a module:function"
            )
    if train_loop is None:
        _check_program_names(params, problems)
    else:
        _check_paths(params, base_config, "base_config" in own, problems)

    if method == "grid":
        for p in params:
            if not p.is_discrete:
                problems.append(
                    f"parameters.{p.name}: grid search needs discrete parameters (constant, categorical, "
                    f"int_uniform, q_uniform), got {p.distribution}"
                )
            elif p.probabilities is not None:
                problems.append(f"parameters.{p.name}: probabilities can't be used with grid search (W&B refuses them too)")
    if metric is None and "metric" not in doc:
        if method == "bayes":
            problems.append("metric: required for method bayes (Optuna needs a metric name and goal)")
        if "early_terminate" in doc or scheduler is not None:
            problems.append("metric: required for early termination (the scheduler compares trials on it)")

    size_param = next((p for p in params if p.name == SIZE), None)
    sizes_known = True
    if size_param is not None:
        before = len(problems)
        _check_size_param(size_param, problems)
        sizes_known = len(problems) == before
    num_gpus = _int_at_least(own[SIZE], 1, f"raysweep.{SIZE}", problems) if SIZE in own else None
    if num_gpus is not None and size_param is not None:
        problems.append(
            f"raysweep.{SIZE}: the file also sweeps parameters.{SIZE}; size trials with one of them "
            "(the parameter reaches the script, raysweep's key does not)"
        )

    def optional(key: str, check: Callable, *args: Any) -> Any:
        return check(own[key], *args, f"raysweep.{key}", problems) if key in own else None

    run_cap = _int_at_least(doc["run_cap"], 1, "run_cap", problems) if "run_cap" in doc else None
    max_concurrent = optional("max_concurrent", _int_at_least, 1)
    max_failures = optional("max_failures", _int_at_least, 0)
    max_initial_failures = optional("max_initial_failures", _int_at_least, 0)
    seed = optional("seed", _int_at_least, 0)
    report_timeout_s = optional("report_timeout_s", _positive)
    reuse_actors = optional("reuse_actors", _bool)
    ddp_workers = optional("ddp_workers", _choice, DDP_WORKERS)
    for key in ("name", "description", "project", "entity"):
        if key in doc:
            _text(doc[key], key, problems)

    resources = Resources()
    if "resources" in own:
        resources = _parse_block(
            own["resources"], "raysweep.resources", Resources,
            {"cpus_per_worker": _positive, "gpus_per_worker": _gpu_share,
             "use_gpu": lambda v, w, pr: _choice(v, USE_GPU, w, pr)},
            problems,
        )  # fmt: skip
    searcher = Searcher()
    if "searcher" in own:
        searcher = _parse_block(
            own["searcher"], "raysweep.searcher", Searcher,
            {"n_startup_trials": lambda v, w, pr: _int_at_least(v, 0, w, pr), "constant_liar": _bool,
             "skip_duplicates": _bool},
            problems,
        )  # fmt: skip
    if sizes_known:  # the size parameter's values are whole numbers >= 1
        _check_packing(resources, size_param, num_gpus, problems)
    wandb = WandbSettings(project=doc.get("project"), entity=doc.get("entity"))
    if "wandb" in own:
        block = _parse_block(
            own["wandb"], "raysweep.wandb", WandbSettings,
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
        num_gpus=num_gpus,
        run_cap=run_cap,
        max_concurrent=max_concurrent,
        max_failures=max_failures or 0,
        max_initial_failures=5 if max_initial_failures is None else max_initial_failures,
        report_timeout_s=report_timeout_s,
        reuse_actors=reuse_actors is not False,
        ddp_workers=ddp_workers or "warm",
        seed=seed or 0,
        resources=resources,
        searcher=searcher,
        wandb=wandb,
        source=source,
        notes=tuple(notes),
    )
