"""The value checks every part of the spec uses: each appends ``key.path: what is wrong`` to the
problems list and returns the value (or None), so a file's problems are all reported together.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from raysweep.values import finite_number


def did_you_mean(key: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(key), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class SchemaViolation(str):
    """A problem W&B's schema flags but W&B's service runs anyway (its engine proposes runs
    without validating): raysweep runs the file too, with the problem as a warning, unless the
    file asks for W&B's local controller's strictness (``parse.strict``)."""


def unknown_keys(block: Mapping, allowed: Iterable[str], where: str, problems: list[str]) -> None:
    allowed = list(dict.fromkeys(allowed))  # a key both W&B and raysweep own (scheduler) is listed once
    for key in block:
        if key not in allowed:
            prefix = f"{where}." if where else ""
            problems.append(f"{prefix}{key}: unknown key{did_you_mean(key, allowed)}; valid keys: {', '.join(allowed)}")


def number(value: Any) -> Any:
    """Numbers pass; numeric strings become numbers (YAML 1.1 reads ``1e-5`` as a string)."""
    if isinstance(value, str):
        for kind in (int, float):
            try:
                return kind(value.strip())
            except ValueError:
                pass
    return value


def choice(value: Any, choices: tuple, where: str, problems: list[str]) -> Any:
    if value not in choices:
        names = ", ".join(str(c).lower() if isinstance(c, bool) else str(c) for c in choices)
        problems.append(f"{where}: must be one of {names}, got {value!r}{did_you_mean(value, map(str, choices))}")
    return value


def int_at_least(value: Any, low: int, where: str, problems: list[str]) -> int | None:
    value = number(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        problems.append(f"{where}: must be an integer >= {low}, got {value!r}")
        return None
    return value


def positive(value: Any, where: str, problems: list[str]) -> float | None:
    value = number(value)
    if not finite_number(value) or value <= 0:
        problems.append(f"{where}: must be a number > 0, got {value!r}")
        return None
    return value


def text(value: Any, where: str, problems: list[str]) -> str | None:
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{where}: must be a non-empty string, got {value!r}")
        return None
    return value


def mapping(value: Any, where: str, problems: list[str]) -> dict | None:
    if not isinstance(value, dict):
        problems.append(f"{where}: must be a mapping, got {type(value).__name__} {value!r}")
        return None
    return value


def boolean(value: Any, where: str, problems: list[str]) -> bool | None:
    if not isinstance(value, bool):
        problems.append(f"{where}: must be true or false, got {value!r}")
        return None
    return value


def parse_block(value: Any, where: str, kind: type, checks: dict[str, Callable], problems: list[str]) -> Any:
    if mapping(value, where, problems) is None:
        return kind()
    unknown_keys(value, checks, where, problems)
    parsed = {k: checks[k](v, f"{where}.{k}", problems) for k, v in value.items() if k in checks}
    return kind(**{k: v for k, v in parsed.items() if v is not None})


def walk_size(value: Any, limit: int, where: str, problems: list[str]) -> None:
    """Refuse a document that YAML aliases make huge (billion laughs) or circular."""
    seen = 0
    stack: list[tuple[Any, tuple[int, ...]]] = [(value, ())]
    while stack:
        node, ancestors = stack.pop()
        seen += 1
        if seen > limit:
            problems.append(
                f"{where}: more than {limit:,} values once YAML aliases are expanded; refusing to expand it"
            )
            return
        if isinstance(node, (dict, list)):
            if id(node) in ancestors:
                problems.append(f"{where}: a YAML alias refers to a mapping or list that contains it (a cycle)")
                return
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, ancestors + (id(node),)) for child in children)


def non_finite(value: Any, where: str, problems: list[str]) -> None:
    """NaN and infinity can reach neither a script's argv nor a JSON config (``validate --sample``)."""
    if isinstance(value, float) and not math.isfinite(value):
        problems.append(f"{where}: {value} is not a finite number; NaN and infinity can't be swept")
    elif isinstance(value, dict):
        for key, child in value.items():
            non_finite(child, f"{where}.{key}", problems)
    elif isinstance(value, list):
        for i, child in enumerate(value):
            non_finite(child, f"{where}.{i}", problems)


def gpu_share(value: Any, where: str, problems: list[str]) -> float | None:
    """A worker's GPUs: a share of one, in (0, 1], or a whole number of them."""
    value = number(value)
    if not finite_number(value) or value <= 0 or (value > 1 and value != int(value)):
        problems.append(
            f"{where}: must be a number in (0, 1] (a share of one GPU) or a whole number of GPUs, got {value!r}"
        )
        return None
    return value
