"""Warm start for the searchers that learn: bayes's Optuna study, and W&B's optimizer (engine
optuna or ax, told as W&B's scheduler tells it: ``search/wandb_engine.told_priors``). For bayes,
the earlier sweeps' finished trials (``runs/priors.py``) that fit this sweep's space become
finished trials of its study.

A prior fits when its config, replayed in this sweep's space, is the config it ran: its values
are enqueued on a scratch study, the space is drawn on that trial (define-by-run spaces too: a
branch asks only for its own parameters), and every value the space gives must be the prior's.
What fits is added to the study (``Study.add_trial``) before the first new trial is asked for,
and is never run again (the searcher skips a configuration the study has finished).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from raysweep.runs.priors import Prior, WarmStart, read_priors
from raysweep.spec import SweepSpec, grid_points, optuna_space
from raysweep.spec.engine import searches
from raysweep.values import plain

GRID_POINTS = 100_000  # a grid's points a warm start compares earlier configs with, at most


@dataclass(frozen=True)
class Told:
    """A prior as the study keeps it: Optuna's params and distributions, and its values."""

    params: dict[str, Any]
    distributions: dict[str, Any]
    values: tuple[float, ...]


def fitting(space: Callable[[Any], dict[str, Any] | None], priors: list[Prior], objectives: int) -> list[Told]:
    """The priors that replay to their own config in ``space`` (an Optuna define-by-run function)."""
    import optuna

    scratch = optuna.create_study(directions=["minimize"] * objectives)
    out = []
    for prior in priors:
        scratch.enqueue_trial(prior.config)
        trial = scratch.ask()
        try:
            returned = space(trial) or {}  # first: its suggest_* calls make the trial's params
            config = {**trial.params, **returned}
            if all(k in prior.config and _same(prior.config[k], v) for k, v in config.items()):
                told = Told(dict(trial.params), dict(trial.distributions), prior.values)
                _check(told)  # Optuna keeps an enqueued value even outside the distribution: is it inside?
                out.append(told)
        except (ValueError, TypeError, KeyError):  # outside this space, or a branch that fails on these values
            pass
        scratch.tell(trial, state=optuna.trial.TrialState.FAIL)
    return out


def _same(a: Any, b: Any) -> bool:
    a, b = plain(a), plain(b)
    if isinstance(a, float) or isinstance(b, float):
        try:
            return abs(float(a) - float(b)) <= 1e-12 * max(1.0, abs(float(a)))
        except (TypeError, ValueError):
            return False
    return a == b


def _check(told: Told) -> Any:
    """The finished trial ``told`` makes; ``ValueError`` when a value is outside its distribution."""
    import optuna

    return optuna.trial.create_trial(params=told.params, distributions=told.distributions, values=list(told.values))


def tell(study: Any, told: list[Told]) -> None:
    """Each fitting prior becomes a finished trial of ``study``."""
    for t in told:
        study.add_trial(_check(t))


def start_from(
    spec: SweepSpec, run_dirs: tuple[str, ...], tried: list[dict[str, Any]] | None
) -> tuple[WarmStart, list[Any] | None, list[dict[str, Any]] | None]:
    """What this sweep's search starts from, of the earlier sweeps in ``run_dirs``: W&B's optimizer
    (engine optuna or ax) is told each as an existing finished run, as W&B's scheduler warm-starts
    (``tell_existing_finished_run``: it keeps those that fit its space); bayes is told those that
    replay in its space; grid skips those that are its points (added to ``tried``); random search
    learns nothing from them."""
    warm = read_priors(list(run_dirs), spec.objectives)
    if searches(spec.engine):
        from raysweep.search.wandb_engine import told_priors

        return warm, told_priors(spec, warm.priors), tried
    if spec.search_method.learns:
        told = fitting(optuna_space(spec), warm.priors, len(spec.objectives))
        warm.told(len(told))
        return warm, told, tried
    if spec.search_method.enumerates:
        names = [p.name for p in spec.parameters]
        points = {_key(point) for point in grid_points(spec, min(spec.grid_size or 0, GRID_POINTS))}
        ran = [p.config for p in warm.priors if _key({k: p.config.get(k) for k in names}) in points]
        warm.told(len(ran))
        return warm, None, (tried or []) + ran
    warm.leave_out("random search learns nothing from earlier trials", len(warm.priors))
    warm.priors = []
    return warm, None, tried


def _key(config: dict[str, Any]) -> str:
    return repr(sorted((k, plain(v)) for k, v in config.items()))
