"""The shape every W&B distribution shares (``Distribution``) and the checks and rounding
several of them use; ``distributions.py`` says what each one means."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


class Param(Protocol):
    """The fields of a swept parameter that a distribution reads (``param.Param`` has them), so
    that the laws need not import the parameter that names them."""

    name: str
    distribution: str
    value: Any
    values: tuple | None
    probabilities: tuple | None
    min: float | None
    max: float | None
    q: float | None
    mu: float | None
    sigma: float | None
    a: float | None
    b: float | None


@dataclass(frozen=True)
class Distribution:
    """A W&B distribution: which fields it takes, how to check, draw and translate it."""

    required: tuple[str, ...]
    optional: tuple[str, ...]
    sample: Callable[[Param, np.random.Generator], Any]
    tune: Callable[[Param, int], Any]
    suggest: Callable[[Param, Any], Any]
    check: Callable[[Param], list[str]] = field(default=lambda p: [])
    grid: Callable[[Param], list[Any]] = field(default=lambda p: [])
    defaults: dict[str, Any] = field(default_factory=dict)
    discrete: bool = False  # its values can be listed (grid search takes only these)


def is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def min_lt_max(p: Param) -> list[str]:
    if p.min is not None and p.max is not None and not p.min < p.max:
        return [f"min < max must hold, got min={p.min}, max={p.max}"]
    return []


def positive_values(p: Param) -> list[str]:
    problems = min_lt_max(p)
    if p.min is not None and p.min <= 0:
        problems.append(f"min must be > 0 for {p.distribution} (min/max are values, not exponents), got {p.min}")
    return problems


def positive_q(p: Param) -> list[str]:
    if p.q is not None and p.q <= 0:
        return [f"q must be > 0, got {p.q}"]
    return []


def positive_sigma(p: Param) -> list[str]:
    if p.sigma is not None and p.sigma <= 0:
        return [f"sigma must be > 0, got {p.sigma}"]
    return []


def quantise(p: Param, x: float) -> float | int:
    """W&B's rule: ``round(x / q) * q``, an int when ``q`` is an int (as W&B's engine returns it).

    There is no clamping to [min, max]: W&B rounds to the nearest multiple wherever it lies.
    """
    k = round(x / p.q)
    return int(k * p.q) if is_int(p.q) else float(k * p.q)
