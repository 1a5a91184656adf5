"""``scheduler: {engine: ax}``: W&B's new sweep format through Ax's ask/tell ``Client``, as
wandb's sweep scheduler runs it (wandb/wandb #12897), behind Ray Tune's ``Searcher`` interface.

Ray Tune's own ``AxSearch`` fails with Ax 1.3, the release on the package index (Ax's
``Objective`` has no ``.metric`` any more), so this is raysweep's: Ax proposes, Tune runs, every
rank of a trial gets the same config.

* The space: the sweep's ``parameters:``, each as the Optuna distribution raysweep already
  searches it with (``spec/space.py``), handed to Ax as a range (log or linear, with its step) or
  a choice; a value a parameter derives from its draw (a normal's quantile, a non-scalar choice)
  is made from Ax's as it is from Optuna's. A parameter of one value is not searched.
* The objectives: built as Ax objects, not parsed from an expression, so a metric keeps its name
  (``val-loss`` would be two metrics to ``configure_optimization``); several make a
  multi-objective config. A trial without every objective in its last report is failed for Ax.
* The optimizer: the user's ``optimizer()`` returns an ``ax.Client`` (its generation strategy, its
  seed) with no experiment yet; raysweep sets the experiment from the sweep. Else a new client,
  seeded with the sweep's seed.
* Ax declines to propose while it needs data or has reached its parallelism: Tune asks again.
* Warm start: earlier sweeps' fitting trials are attached and completed before the first proposal.
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
import warnings
from pathlib import Path
from typing import Any

from ray.tune.search import Searcher

from raysweep.errors import UserError
from raysweep.spec import SweepSpec

AX_MISSING = (
    "scheduler.engine ax: needs Ax, which is not installed: pip install 'raysweep[ax]' (ax-platform), "
    "or use engine: optuna"
)


def check_ax(spec: SweepSpec) -> None:
    """What the engine needs before a cluster starts: Ax installed, and the space in ``parameters:``."""
    import importlib.util

    if importlib.util.find_spec("ax") is None:
        raise UserError(AX_MISSING)
    if spec.engine is not None and spec.engine.search_space:
        raise UserError(
            f"scheduler.search_space: {spec.engine.search_space} is a define-by-run space, which engine optuna "
            "takes; engine ax searches the sweep's parameters:"
        )


def distributions_of(spec: SweepSpec) -> dict[str, Any]:
    """Each searched name's Optuna distribution, from one draw of the sweep's space."""
    import optuna

    from raysweep.search.custom import space_of

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # as engine optuna's: no line per study made
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    trial = study.ask()
    space_of(spec)(trial)
    return dict(trial.distributions)


def _homogeneous(choices: tuple[Any, ...]) -> str | None:
    """Ax's type of a choice's values, where they share one (a bool is an int to Python, not to Ax)."""
    if all(isinstance(c, bool) for c in choices):
        return "bool"
    if any(isinstance(c, bool) for c in choices):
        return None
    for kind, types in (("int", (int,)), ("float", (int, float)), ("str", (str,))):
        if all(isinstance(c, types) for c in choices):
            return kind
    return None


class AxSpace:
    """The sweep's distributions as Ax parameters, and Ax's parameters back to the flat config."""

    def __init__(self, spec: SweepSpec):
        import optuna

        self.spec = spec
        self.distributions = distributions_of(spec)
        self.fixed: dict[str, Any] = {}  # one value: not searched
        self.by_index: dict[str, tuple[Any, ...]] = {}  # choices Ax sees by their index (mixed types)
        self.choices: dict[str, tuple[Any, ...]] = {}  # choices Ax sees as values (it makes 1 of 1 and 2.5 1.0)
        self.parameters: list[Any] = []
        for name, d in self.distributions.items():
            if isinstance(d, optuna.distributions.CategoricalDistribution):
                self._choice(name, tuple(d.choices))
            elif d.low == d.high:
                self.fixed[name] = d.low
            else:
                self._range(name, d)

    def _choice(self, name: str, choices: tuple[Any, ...]) -> None:
        from ax import ChoiceParameterConfig

        if len(choices) == 1:
            self.fixed[name] = choices[0]
            return
        kind = _homogeneous(choices)
        if kind is None:
            self.by_index[name] = choices
            values: list[Any] = list(range(len(choices)))
            self.parameters.append(ChoiceParameterConfig(name, values, "int", is_ordered=False))
        else:
            ordered = kind in ("int", "float")  # numbers by size; words and flags unordered
            self.choices[name] = choices
            self.parameters.append(ChoiceParameterConfig(name, list(choices), kind, is_ordered=ordered))

    def _range(self, name: str, d: Any) -> None:
        import optuna
        from ax import RangeParameterConfig

        kind = "int" if isinstance(d, optuna.distributions.IntDistribution) else "float"
        step = d.step if kind == "float" or d.step != 1 else None  # an int's step 1 is Ax's default
        self.parameters.append(
            RangeParameterConfig(name, (d.low, d.high), kind, step_size=step, scaling="log" if d.log else "linear")
        )

    def optuna_params(self, ax_params: dict[str, Any]) -> dict[str, Any]:
        """Ax's parameterization as the values Optuna's distributions hold."""
        params = dict(self.fixed)
        for name, value in ax_params.items():
            if name in self.by_index:
                value = self.by_index[name][int(value)]
            elif name in self.choices:
                value = next((c for c in self.choices[name] if c == value), value)  # the value as written
            params[name] = value
        return params

    def ax_params(self, optuna_params: dict[str, Any]) -> dict[str, Any]:
        """The reverse: an earlier trial's Optuna values as Ax's parameterization."""
        searched = {p.name for p in self.parameters}
        out = {}
        for name, value in optuna_params.items():
            if name in searched:
                out[name] = self.by_index[name].index(value) if name in self.by_index else value
        return out

    def config(self, ax_params: dict[str, Any]) -> dict[str, Any]:
        """The trial's flat config: the space replayed on Ax's values (derived values made as under Optuna)."""
        import optuna

        from raysweep.search.custom import space_of

        return space_of(self.spec)(optuna.trial.FixedTrial(self.optuna_params(ax_params)))


def optimization_config(spec: SweepSpec) -> Any:
    """One Ax objective per sweep goal, each keeping the metric's name."""
    from ax.core.metric import Metric
    from ax.core.objective import MultiObjective, Objective
    from ax.core.optimization_config import MultiObjectiveOptimizationConfig, OptimizationConfig

    objectives = [Objective(metric=Metric(name=g.name), minimize=g.goal == "minimize") for g in spec.goals]
    if len(objectives) == 1:
        return OptimizationConfig(objective=objectives[0])
    return MultiObjectiveOptimizationConfig(objective=MultiObjective(objectives=objectives))


def client_of(spec: SweepSpec) -> Any:
    """The user's ``optimizer()`` client (no experiment yet), else a new one seeded with the sweep's seed."""
    from ax import Client

    from raysweep.search.custom import user_function

    engine = spec.engine
    if engine is None or not engine.optimizer:
        return Client(random_seed=spec.seed)
    made = user_function(engine.source, engine.optimizer, "optimizer")()
    if not isinstance(made, Client):
        raise UserError(
            f"scheduler.optimizer: {engine.optimizer} returned a {type(made).__name__}; engine ax takes an "
            "ax.Client (its generation strategy configured, no experiment: raysweep sets it from the sweep)"
        )
    return made


class AxEngineSearch(Searcher):
    """Ax proposes each trial's config (``get_next_trials``), and is told each trial's end
    (``complete_trial`` with its objectives, else ``mark_trial_failed``)."""

    def __init__(self, spec: SweepSpec, told: list[Any] | None = None):
        super().__init__(metric=spec.goals[0].name, mode=spec.goals[0].mode)
        self.spec, self.space = spec, AxSpace(spec)
        self.client = client_of(spec)
        try:
            self.client.configure_experiment(parameters=self.space.parameters, name=spec.name or "raysweep")
        except Exception as e:  # Ax's own refusal: of a client that has an experiment, or of a space
            hint = (
                f"; {spec.engine.optimizer}() returns a client with no experiment (raysweep sets it from the sweep)"
                if spec.engine is not None and spec.engine.optimizer
                else ""
            )
            raise UserError(
                f"scheduler.engine ax: Ax refused the sweep's experiment: {type(e).__name__}: {e}{hint}"
            ) from None
        from ax.core.metric import Metric  # Ax's plain metric: its JSON snapshot knows it

        self.client.configure_metrics([Metric(name=g.name) for g in spec.goals])
        self.client.set_optimization_config(optimization_config(spec))
        self.index: dict[str, int] = {}  # Tune's trial id -> Ax's trial index
        self.told = list(told or ())

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec: Any) -> bool:
        return True  # the sweep's goals, given at construction

    def suggest(self, trial_id: str) -> dict | None:
        from ax.exceptions.core import DataRequiredError, OptimizationComplete
        from ax.exceptions.generation_strategy import MaxParallelismReachedException

        self._tell_priors()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # Ax's and BoTorch's advice on their own model
                proposed = self.client.get_next_trials(max_trials=1)
        except OptimizationComplete:
            return Searcher.FINISHED
        except (MaxParallelismReachedException, DataRequiredError):
            return None  # its first points all run: asked again once a running trial ends
        if not proposed:
            return None  # Ax needs the running trials' data first
        index, params = next(iter(proposed.items()))
        self.index[trial_id] = index
        return self.space.config(dict(params))

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        from raysweep.search.custom import trial_objectives

        index = self.index.pop(trial_id, None)
        if index is not None:
            self._tell(index, None if error or result is None else trial_objectives(self.spec, result))

    def _tell(self, index: int, values: tuple[float, ...] | None) -> None:
        """Ax's trial ``index`` completed with ``values`` (one per goal), or failed without them."""
        if values is None:
            self.client.mark_trial_failed(index, failed_reason="ended without every objective")
        else:
            self.client.complete_trial(
                index, raw_data={g.name: v for g, v in zip(self.spec.goals, values, strict=True)}
            )

    def _tell_priors(self) -> None:
        """Warm start: each earlier trial that fits the space, attached and completed."""
        for prior in self.told:
            values = tuple(prior.values)
            finished = len(values) == len(self.spec.goals) and all(math.isfinite(v) for v in values)
            self._tell(
                self.client.attach_trial(parameters=self.space.ax_params(prior.params)), values if finished else None
            )
        self.told = []

    # Tune pickles the searcher with the sweep, and saves it at every experiment checkpoint
    # (``resume`` goes on from there): both through Ax's own JSON snapshot of the client.
    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"client": _snapshot(self.client)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state | {"client": _client_from(state["client"])})

    def save(self, checkpoint_path: str) -> None:
        Path(checkpoint_path).write_text(json.dumps({"client": _snapshot(self.client), "index": self.index}))

    def restore(self, checkpoint_path: str) -> None:
        state = json.loads(Path(checkpoint_path).read_text())
        self.client, self.index = _client_from(state["client"]), {k: int(v) for k, v in state["index"].items()}


def _snapshot(client: Any) -> str:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "ax.json"
        client.save_to_json_file(str(path))
        return path.read_text()


def _client_from(snapshot: str) -> Any:
    from ax import Client

    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "ax.json"
        path.write_text(snapshot)
        return Client.load_from_json_file(str(path))


def quiet_ax() -> None:
    """Import Ax without its INFO lines, and keep only its errors on stderr: raysweep says what a
    sweep does, and Ax's advice (objective thresholds, tracking metrics) is about its own model."""
    previous = logging.root.manager.disable
    logging.disable(logging.INFO)
    try:
        from ax.utils.common.logger import set_stderr_log_level
    except ImportError:
        raise UserError(AX_MISSING) from None
    finally:
        logging.disable(previous)
    set_stderr_log_level(logging.ERROR)


def build(spec: SweepSpec, max_concurrent: int | None, told: list[Any] | None = None) -> Any:
    """The engine's search (Ax imported here: it is an optional extra)."""
    from ray.tune.search import ConcurrencyLimiter

    quiet_ax()
    search = AxEngineSearch(spec, told)
    return ConcurrencyLimiter(search, max_concurrent=max_concurrent) if max_concurrent else search
