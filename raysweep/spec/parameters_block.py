"""The ``parameters:`` block: each entry into a ``Param``, and the checks on their names.

W&B's rules for a ``program:`` sweep (names are opaque strings) differ from a ``train_loop``'s
(names are paths in its nested config); both are here so ``parse.py`` reads as the document's outline.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from raysweep import config_keys
from raysweep.spec.checks import SchemaViolation, did_you_mean, non_finite, number, unknown_keys
from raysweep.spec.distributions import DISTRIBUTIONS
from raysweep.spec.model import EXPONENT_LAWS
from raysweep.spec.param import FIELDS, NUMERIC_FIELDS, Param, infer_distribution
from raysweep.values import finite_number


def _mixed_bounds(fields: dict) -> bool:
    """min and max, one an int and the other a float: W&B's client cannot tell uniform from int_uniform."""
    kinds = {type(fields[k]) for k in ("min", "max") if k in fields and not isinstance(fields[k], bool)}
    return kinds == {int, float}


def _parse_param(name: str, entry: dict, problems: list[str], nest: tuple[str, ...] = ()) -> Param | None:
    where = f"parameters.{name}"
    fields = _fields_of(entry, where, problems)
    if fields is None:
        return None
    dist = _distribution_of(name, entry.get("distribution"), fields, nest, problems)
    if dist is None:
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


def _fields_of(entry: dict, where: str, problems: list[str]) -> dict | None:
    """A parameter's fields, numbers as numbers and lists as tuples; None where one is wrong."""
    unknown_keys(entry, FIELDS + ("distribution",), where, problems)
    fields = {k: v for k, v in entry.items() if k in FIELDS}
    for key in NUMERIC_FIELDS:
        if key in fields:
            fields[key] = number(fields[key])
            if not finite_number(fields[key]):
                problems.append(f"{where}.{key}: must be a number, got {fields[key]!r}")
                return None
    for key in ("values", "probabilities"):
        if key in fields:
            if not isinstance(fields[key], list):
                problems.append(f"{where}.{key}: must be a list, got {fields[key]!r}")
                return None
            fields[key] = tuple(number(v) if key == "probabilities" else v for v in fields[key])
    before = len(problems)
    for key in ("value", "values"):
        if key in fields:
            non_finite(list(fields[key]) if key == "values" else fields[key], f"{where}.{key}", problems)
    if len(problems) > before:
        return None
    if "values" in fields and ({"min", "max"} & fields.keys()):
        problems.append(f"{where}: give either values or min/max, not both")
        return None
    return fields


def _distribution_of(name: str, dist: Any, fields: dict, nest: tuple[str, ...], problems: list[str]) -> str | None:
    """The parameter's distribution, given or inferred as W&B infers it; None where it cannot be."""
    where = f"parameters.{name}"
    if dist is None and not nest and _mixed_bounds(fields):  # `wandb sweep` refuses it before upload
        problems.append(
            f"{where}: Parameter {name} is ambiguous, please specify bounds as both floats (for a float_uniform "
            "distribution) or ints (for an int_uniform distribution). (W&B's own sentence; or set distribution)"
        )
        return None
    if dist is None:
        dist = infer_distribution(fields)
        if dist is None:
            problems.append(f"{where}: needs value, values, or min and max (or a distribution)")
        return dist
    if dist not in DISTRIBUTIONS:
        problems.append(
            f"{where}.distribution: unknown distribution {dist!r}{did_you_mean(dist, DISTRIBUTIONS)}; "
            f"valid: {', '.join(DISTRIBUTIONS)}"
        )
        return None
    if dist in EXPONENT_LAWS:  # W&B's schema flags these (sweeps' PARAM_DEPRECATION_MAP); its engine runs them
        problems.append(
            SchemaViolation(
                f"{where}.distribution: {dist} takes base-e exponents as min/max (e^{fields.get('min')} to "
                f"e^{fields.get('max')}); W&B's schema flags it: use {dist}_values to give the limits themselves"
            )
        )
    return dist


def parse_parameters(block: Any, problems: list[str], prefix: str = "", nest: tuple[str, ...] = ()) -> list[Param]:
    """Flatten nested ``parameters:`` blocks into dotted names."""
    where = f"parameters{'.' + prefix.rstrip('.') if prefix else ''}"
    if not isinstance(block, dict) or not block:
        problems.append(f"{where}: must be a non-empty mapping of parameter names, got {block!r}")
        return []
    params: list[Param] = []
    for key, entry in sorted(block.items(), key=lambda item: str(item[0])):  # W&B's order, nested blocks too
        name = f"{prefix}{key}"
        if not isinstance(key, (str, int)) or not str(key).strip():
            problems.append(f"parameters.{name!r}: a parameter name is a non-empty string")
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
            params += parse_parameters(entry["parameters"], problems, prefix=f"{name}.", nest=nest + (str(key),))
        else:
            param = _parse_param(name, entry, problems, nest)
            if param is not None:
                params.append(param)
    return params


def check_program_names(params: list[Param], problems: list[str]) -> None:
    """A ``program:`` sweep's names are W&B's: opaque strings the script receives, so dotted names,
    integer parts and a name beside its dotted child are all fine; only a repeat is not."""
    names = [p.name for p in params]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"parameters.{name}: given twice (a nested block and a dotted name spell the same name)")


def check_paths(params: list[Param], base_config: dict, has_base_config: bool, problems: list[str]) -> None:
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
            config_keys.apply_overrides(base_config, {name: None})
        except KeyError as e:
            where = (
                "in raysweep.base_config"
                if has_base_config
                else "(a list must be defined in raysweep.base_config, and this file has none)"
            )
            problems.append(f"parameters.{name}: {e.args[0]} {where}")


def check_size_param(param: Param, problems: list[str]) -> None:
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
