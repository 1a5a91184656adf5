"""A swept parameter (``Param``) and the shape of a distribution (``Distribution``); what each
distribution means, and its registry, are in ``distributions.py``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

FIELDS = ("value", "values", "probabilities", "min", "max", "q", "mu", "sigma", "a", "b")
NUMERIC_FIELDS = ("min", "max", "q", "mu", "sigma", "a", "b")
DISCRETE = ("constant", "categorical", "int_uniform", "q_uniform")


@dataclass(frozen=True)
class Param:
    """One swept parameter, addressed by its dotted path in the trial config."""

    name: str
    distribution: str
    value: Any = None
    values: tuple | None = None
    probabilities: tuple | None = None
    min: float | None = None
    max: float | None = None
    q: float | None = None
    mu: float | None = None
    sigma: float | None = None
    a: float | None = None  # beta's shape parameters
    b: float | None = None
    nest: tuple[str, ...] = ()  # the nested ``parameters:`` blocks it sits in (W&B hands those over as mappings)

    @property
    def is_discrete(self) -> bool:
        return self.distribution in DISCRETE

    def to_json(self) -> dict[str, Any]:
        """The distribution and the fields the user gave, numbers as numbers."""
        out: dict[str, Any] = {"distribution": self.distribution}
        for name in FIELDS:
            v = getattr(self, name)
            if v is not None or (name == "value" and self.distribution == "constant"):
                out[name] = list(v) if isinstance(v, tuple) else v
        if self.nest:
            out["nest"] = list(self.nest)
        return out

    def grid_values(self) -> Sequence[Any]:
        """Every value of a discrete parameter as W&B's grid lists them (lazy for ranges)."""
        return _law(self).grid(self)

    def sample(self, rng: np.random.Generator) -> Any:
        return _law(self).sample(self, rng)

    def tune_domain(self, seed: int) -> Any:
        """A Ray Tune search-space entry drawing from this distribution."""
        return _law(self).tune(self, seed)

    def suggest(self, trial: Any) -> Any:
        """Draw this parameter from an Optuna trial (define-by-run) and return its value."""
        return _law(self).suggest(self, trial)


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


def _law(param: Param) -> Distribution:
    from raysweep.spec.distributions import DISTRIBUTIONS  # the registry builds on Param

    return DISTRIBUTIONS[param.distribution]


def is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def infer_distribution(fields: dict[str, Any]) -> str | None:
    """W&B's rule when ``distribution`` is omitted; None when it cannot be inferred."""
    if "value" in fields:
        return "constant"
    if "values" in fields:
        return "categorical"
    if "min" in fields and "max" in fields:
        return "int_uniform" if is_int(fields["min"]) and is_int(fields["max"]) else "uniform"
    return None
