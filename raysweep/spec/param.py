"""A swept parameter (``Param``); what each distribution means is in ``distributions.py``, the
shape every distribution shares in ``law.py``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from raysweep.spec.distributions import DISTRIBUTIONS
from raysweep.spec.law import Distribution, is_int

FIELDS = ("value", "values", "probabilities", "min", "max", "q", "mu", "sigma", "a", "b")
NUMERIC_FIELDS = ("min", "max", "q", "mu", "sigma", "a", "b")


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
    def law(self) -> Distribution:
        return DISTRIBUTIONS[self.distribution]

    @property
    def is_discrete(self) -> bool:
        return self.law.discrete

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
        return self.law.grid(self)

    def sample(self, rng: np.random.Generator) -> Any:
        return self.law.sample(self, rng)

    def tune_domain(self, seed: int) -> Any:
        """A Ray Tune search-space entry drawing from this distribution."""
        return self.law.tune(self, seed)

    def suggest(self, trial: Any) -> Any:
        """Draw this parameter from an Optuna trial (define-by-run) and return its value."""
        return self.law.suggest(self, trial)


def infer_distribution(fields: dict[str, Any]) -> str | None:
    """W&B's rule when ``distribution`` is omitted; None when it cannot be inferred."""
    if "value" in fields:
        return "constant"
    if "values" in fields:
        return "categorical"
    if "min" in fields and "max" in fields:
        return "int_uniform" if is_int(fields["min"]) and is_int(fields["max"]) else "uniform"
    return None
