"""A spec's whole search space: grid points, seeded samples, and its Tune and Optuna forms.

Trial configs travel flat, keyed by dotted parameter name (``arch.stages.0.repeat``), which is
what Tune, Optuna and W&B show; ``trial_config`` nests them into the loop's base config.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from raysweep import config_keys
from raysweep.spec.model import SIZE, SweepSpec
from raysweep.spec.param import Param
from raysweep.values import plain


def grid_point(spec: SweepSpec, index: int) -> dict[str, Any]:
    """The grid's ``index``-th point, in W&B's order: parameters by name (nested blocks sorted
    within), the last varying fastest, equal values collapsed. Nothing is materialised, so a
    10^9-point grid is indexed as quickly as a small one."""
    axes = [(p.name, p.grid_values()) for p in spec.parameters]
    point: dict[str, Any] = {}
    for name, values in reversed(axes):
        index, k = divmod(index, len(values))
        point[name] = values[k]
    return dict(reversed(point.items()))


def grid_points(spec: SweepSpec, limit: int | None = None) -> list[dict[str, Any]]:
    """The grid's first ``limit`` points (all of them when None), in W&B's order."""
    size = spec.grid_size or 0
    return [grid_point(spec, i) for i in range(size if limit is None else min(limit, size))]


def sample_points(spec: SweepSpec, n: int, seed: int | None = None) -> list[dict[str, Any]]:
    """``n`` flat configurations: the grid's first ``n`` for grid, seeded draws otherwise."""
    if spec.search_method.enumerates:
        return grid_points(spec, n)
    rng = np.random.default_rng(spec.seed if seed is None else seed)
    return [{p.name: p.sample(rng) for p in spec.parameters} for _ in range(n)]


def trial_config(spec: SweepSpec, flat: dict[str, Any]) -> dict[str, Any]:
    """The nested config a train loop receives: base config with the trial's values set.

    ``num_gpus`` is not among them: it is the trial's world size (``SweepSpec.world_size``),
    which a loop reads from ``get_context().world_size``. (A ``program:`` script gets it, as
    under ``wandb agent``: ``wandb_config``.)"""
    return config_keys.apply_overrides(spec.base_config, {k: plain(v) for k, v in flat.items() if k != SIZE})


def wandb_config(spec: SweepSpec, flat: dict[str, Any]) -> dict[str, Any]:
    """A trial's values as W&B hands them to a ``program:`` script or a W&B-style function's
    ``wandb.config``: names as written, each nested ``parameters:`` block as one mapping
    (``--optimizer={'lr': 0.01}``), and every key of a define-by-run space's returned dict as it
    returned it (W&B's scheduler makes that dict the run's config)."""
    out: dict[str, Any] = {}
    for p in spec.parameters:
        if p.name not in flat:
            continue
        node = out
        for key in p.nest:
            node = node.setdefault(key, {})
        node[p.name[len(".".join(p.nest)) + 1 :] if p.nest else p.name] = plain(flat[p.name])
    named = {p.name for p in spec.parameters}
    out |= {k: plain(v) for k, v in flat.items() if k not in named}  # the engine's own keys
    return out


def tune_param_space(spec: SweepSpec, seed: int | None = None) -> dict[str, Any]:
    """Tune search-space entries keyed by dotted name (for random search)."""
    seed = spec.seed if seed is None else seed
    return {p.name: p.tune_domain(seed) for p in spec.parameters}


class OptunaSpace:
    """A define-by-run space for Ray's ``OptunaSearch`` (a class, so Tune can pickle it).

    It returns every parameter's value, so the trial gets the real value even where Optuna
    holds a latent one (an index into non-scalar choices, a normal quantile).
    """

    def __init__(self, params: tuple[Param, ...]):
        self.params = params

    def __call__(self, trial: Any) -> dict[str, Any]:
        return {p.name: p.suggest(trial) for p in self.params}


def optuna_space(spec: SweepSpec) -> Callable[[Any], dict[str, Any]]:
    return OptunaSpace(spec.parameters)
