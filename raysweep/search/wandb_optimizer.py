"""W&B's sweep scheduler's optimizer (wandb 0.31; its names: ``private_api.wandb_scheduler``), built and asked as
``wandb sweep-scheduler`` builds and asks it, with no Ray: what ``validate`` and ``run`` refuse at
start (``checked``), ``validate --sample`` (``first_configs``) and a define-by-run space's trial
sizes (``sample_sizes``). The Tune searcher that asks it trial by trial is ``wandb_engine.py``.

Everything but the seed is W&B's code: the user's ``scheduler.optimizer(sweep_info)`` (a Study or
Client, alone or with a terminator), ``scheduler.search_space(trial)`` (a dict), the default
study (TPE, no pruner, the directions of the goals) or client, the conversion of ``parameters:``,
what is refused at start and what only warned about. Without ``scheduler.optimizer``, the default
study or client is made with the sweep's seed, so ``validate --sample`` shows what ``run --seed``
tries (W&B's is unseeded).
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from raysweep import private_api
from raysweep.errors import UserError
from raysweep.spec import SweepSpec
from raysweep.spec.engine import searches
from raysweep.spec.model import SIZE, Engine
from raysweep.values import plain

SIZE_DRAWS = 64  # draws of a define-by-run space that tell the driver its trial sizes


def sweep_info(spec: SweepSpec) -> Any:
    """The ``SweepInfo`` W&B's scheduler builds from the sweep's config, by hand: the file's W&B
    keys, ``scheduler.source`` resolved against the sweep file's directory."""
    config = dict(spec.wandb_document)
    if spec.engine is not None and isinstance(config.get("scheduler"), dict):
        config["scheduler"] = {**config["scheduler"], **({"source": spec.engine.source} if spec.engine.source else {})}
    return private_api.wandb_scheduler().SweepInfo(
        id=spec.name or "raysweep",
        name=spec.name or "raysweep",
        entity=spec.wandb.entity or "",
        project=spec.wandb.project_name,
        config=config,
        controller_run_name="",
    )


@dataclass(frozen=True)
class Built:
    """W&B's optimizer, and what W&B printed while it was built (its warnings)."""

    optimizer: Any
    said: tuple[str, ...] = ()


def build_optimizer(spec: SweepSpec, seed: int | None = None) -> Built:
    """W&B's optimizer for the sweep, or ``UserError`` with W&B's own sentence when its scheduler
    would refuse the sweep at start. ``seed``: the default study's or client's (the sweep's)."""
    w = private_api.wandb_scheduler()
    info = sweep_info(spec)
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
            optimizer = BUILDERS[spec.engine.kind](w, info, spec.engine, spec.seed if seed is None else seed)
    except UserError:
        raise
    except ModuleNotFoundError as e:
        if (e.name or "").partition(".")[0] != "ax":
            raise
        raise UserError(
            "scheduler.engine: ax needs Ax (ax-platform), which raysweep installs as an extra: "
            "pip install 'raysweep[ax]'"
        ) from None
    except Exception as e:  # W&B's wandb.Error and ValueError: its scheduler stops at start with this sentence
        raise UserError(f"scheduler: W&B's sweep scheduler refuses this sweep at start: {sentence(e)}") from None
    warned = (line.strip() for line in said.getvalue().splitlines())
    return Built(optimizer, tuple(line.removeprefix("wandb: WARNING").strip() for line in warned if "WARNING" in line))


def checked(spec: SweepSpec) -> tuple[SweepSpec, tuple[str, ...]]:
    """What W&B's scheduler does at start, before anything is written: its optimizer built once
    (``UserError`` where it refuses: the user's ``search_space`` and ``optimizer`` called), and W&B's
    warnings; a define-by-run space's trial sizes sampled (``spec.sampled_sizes``, kept in spec.json)."""
    if not searches(spec.engine):
        return spec, ()
    said = build_optimizer(spec).said
    if spec.defines_by_run and not spec.sampled_sizes:
        spec = replace(spec, sampled_sizes=sample_sizes(spec))
    return spec, said


def _build_ax(w: Any, info: Any, engine: Engine, seed: int | None) -> Any:
    """As ``build_ax_optimizer`` does, the default client seeded."""
    logging.getLogger("ax").setLevel(logging.WARNING)  # Ax's INFO lines (storage, generation) on every build
    if engine.optimizer:
        return w.ax.build_ax_optimizer(info)
    if engine.search_space:
        w.wandb.termwarn("search_space config is not supported by the Ax engine.")
    from ax import Client  # as W&B's create_default_client makes it, with the seed

    client = Client(random_seed=seed)
    client.configure_experiment(parameters=w.ax.sweep_config_to_search_space(info.config))
    w.ax.configure_sweep_objective(client, info.config)
    return w.ax.AxOptimizer(client, info)


def _build_optuna(w: Any, info: Any, engine: Engine, seed: int | None) -> Any:
    """As ``build_optuna_optimizer`` does, the default study seeded."""
    if engine.optimizer:
        return w.optuna.build_optuna_optimizer(info)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        directions=w.optuna.sweep_directions(info.config),
        pruner=optuna.pruners.NopPruner(),
        sampler=optuna.samplers.TPESampler(seed=seed),
    )
    try:
        if engine.search_space:
            options = w.optuna.OptunaOptions(
                study=study, search_space=w.optuna.load_trial_constructor(engine.source, engine.search_space)
            )
        else:
            options = w.optuna.OptunaOptions(
                study=study, distributions=w.optuna.search_space_from_sweep_config(info.config.get("parameters", {}))
            )
    except ValueError as e:
        raise w.wandb.Error(str(e)) from e
    return w.optuna.make_optimizer(info, options)


# W&B's optimizer of each engine that searches (``spec/engines.py``: ``searches``), as its scheduler builds it
BUILDERS: dict[str, Callable[[Any, Any, Engine, int | None], Any]] = {"ax": _build_ax, "optuna": _build_optuna}


def sentence(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text if text.endswith(".") else text + "."


def sample_sizes(spec: SweepSpec) -> tuple[int, ...]:
    """The trial sizes of ``SIZE_DRAWS`` random draws of a define-by-run space (the ``num_gpus`` of
    the dict it returns, the config a run gets; 1 where it gives none): what admission, budgets
    and the plan see."""
    import optuna

    w = private_api.wandb_scheduler()
    space = w.optuna.load_trial_constructor(spec.engine.source, spec.engine.search_space)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=spec.seed))
    sizes = []
    for _ in range(SIZE_DRAWS):
        trial = study.ask()
        config = space(trial)
        try:
            sizes.append(spec.world_size({SIZE: config.get(SIZE, spec.num_gpus or 1)}))
        except ValueError as e:
            raise UserError(f"scheduler.search_space: {spec.engine.search_space} gave {e}") from None
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    return tuple(sizes)


def first_configs(spec: SweepSpec, n: int, seed: int | None = None) -> list[dict[str, Any]]:
    """The first ``n`` configurations ``run --seed`` proposes (fewer when the optimizer waits for
    results first, as Ax does after its initial points)."""
    optimizer = build_optimizer(spec, seed).optimizer
    out: list[dict[str, Any]] = []
    while len(out) < n:
        asked = optimizer.ask_n_runs(1)
        if not asked:
            break
        out.append({k: plain(v) for k, v in asked[0].config.flat_dict().items()})
    return out
