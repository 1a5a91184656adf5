"""The first configurations a sweep will try, drawn by the searcher ``run`` builds.

``validate --sample N --seed S`` prints these, so the preview is the sweep ``run --seed S``
starts: the same Tune variant generator (random), the same grid order (grid), the same
seeded Optuna sampler (bayes), W&B's optimizer with the same seed (engine optuna or ax: the
config each run gets, a define-by-run space's returned dict). Bayes is shown only for its random
start-up trials: after them, each proposal depends on the results of the trials before it; an
engine's optimizer is asked as ``run`` first asks it, before any result.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from ray.tune.search import BasicVariantGenerator

from raysweep.errors import UserError
from raysweep.search.searchers import build_search
from raysweep.search.wandb_optimizer import first_configs as engine_first_configs
from raysweep.spec import SweepSpec, grid_points
from raysweep.spec.engine import searches
from raysweep.values import plain


def first_configs(spec: SweepSpec, n: int, seed: int | None = None) -> list[dict[str, Any]]:
    """The flat configurations of the first ``n`` trials of ``run --seed seed`` (the spec's seed if None)."""
    if seed is not None:
        spec = replace(spec, seed=seed)
    if spec.search_method.enumerates:
        return grid_points(spec, n)
    if searches(spec.engine):  # W&B's optimizer, asked n times before any result, as run first asks it
        return engine_first_configs(spec, n, seed)
    if spec.search_method.learns and n > spec.searcher.n_startup_trials:
        raise UserError(
            f"--sample {n}: a bayes sweep can show only its {spec.searcher.n_startup_trials} random start-up "
            "trials (raysweep.searcher.n_startup_trials); later ones depend on the results before them"
        )
    with tempfile.TemporaryDirectory(prefix="raysweep_preview_") as scratch:  # bayes's journal
        search, space = build_search(spec, n, Path(scratch))
        if isinstance(search, BasicVariantGenerator):  # Tune's own variant generator, not a Searcher
            search.add_configurations({"preview": {"run": _no_trainable, "config": space, "num_samples": n}})
            return [{k: plain(v) for k, v in search.next_trial().config.items()} for _ in range(n)]
        search.set_search_properties(*spec.objectives.tune(), {})
        return [{k: plain(v) for k, v in search.suggest(f"preview_{i}").items()} for i in range(n)]


def _no_trainable(config: dict[str, Any]) -> None:
    """Tune's variant generator needs a trainable to build a trial; none runs."""
