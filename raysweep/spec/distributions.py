"""What each W&B parameter distribution means, and its translations to Ray Tune and Optuna.

This is the only module that knows a distribution's meaning. Rules that hold everywhere:

* bounds are inclusive: ``int_uniform`` 1..4 can give 4 (Ray's exclusive ``randint`` upper
  bound is hidden here);
* quantised laws follow W&B's engine: a draw X becomes ``round(X / q) * q`` (an int when ``q``
  is an int; ``q`` defaults to 1.0), and a ``q_uniform`` grid is ``numpy.arange(min, max, q)``;
* ``log_uniform`` / ``q_log_uniform`` / ``inv_log_uniform`` take natural-log *exponents* as
  min/max, the ``*_values`` variants take the values themselves;
* ``inv_log_uniform(_values)`` gives X with log(1/X) uniform, i.e. X log-uniform on
  [e^-max, e^-min] (exponents) or [min, max] (values);
* normal family: ``mu`` (default 0) and ``sigma`` (default 1); ``log_normal`` is exp(N(mu, sigma));
* ``beta`` / ``q_beta``: Beta(a, b) on [0, 1], ``a`` and ``b`` default 1.

Three samplers are kept equal in law and tested against each other: ``sample`` (NumPy:
``spec.space.sample_points``, which the benchmarks and the property tests draw with; ``validate
--sample`` shows what Tune's and Optuna's own samplers draw, search/preview.py), ``tune_domain`` (random search through Tune's
BasicVariantGenerator) and ``suggest`` (Optuna define-by-run, for bayes). Optuna has no
normal distribution: the normal family is suggested as a uniform quantile u in (0, 1)
under the parameter's name and mapped through the inverse CDF, so TPE's prior matches.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from raysweep.spec.law import (
    Distribution,
    Param,
    is_int,
    min_lt_max,
    positive_q,
    positive_sigma,
    positive_values,
    quantise,
)

# --- shared pieces -----------------------------------------------------------------------


class ArangeValues(Sequence):
    """``numpy.arange(start, stop, step).tolist()`` computed per index, never materialised.

    W&B lists a grid's ``q_uniform`` values this way (max excluded unless the float steps reach
    past it); a 10^9-point grid must not be built to be counted or indexed.
    """

    def __init__(self, start: float, stop: float, step: float):
        dtype = np.result_type(start, stop, step)  # as numpy.arange(start, stop, step) types it
        self._probe = np.arange(start, start + 2 * step, step, dtype=dtype)  # numpy's own step arithmetic
        self.start, self.step = start, step
        self._n = max(0, math.ceil((stop - start) / step))

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        if not -self._n <= i < self._n:
            raise IndexError(i)
        i %= self._n
        if i < 2:
            return self._probe[i].item()
        start, delta = self._probe.dtype.type(self.start), self._probe[1] - self._probe[0]
        return (start + i * delta).item()


class _Draw:
    """Draws one parameter from its own seeded generator (picklable, for Tune's state)."""

    def __init__(self, param: Param, seed: int):
        self.param = param
        self.rng = np.random.default_rng([seed, _stable_hash(param.name)])

    def __call__(self, _config: Any) -> Any:
        return self.param.sample(self.rng)

    def __deepcopy__(self, _memo: dict) -> _Draw:
        """The stream itself: Tune's variant generator deep-copies the space for every trial, and a
        copied stream would hand every trial the same draw (pickling, for resume, keeps its state)."""
        return self


def _sample_from(p: Param, seed: int) -> Any:
    """A Tune ``sample_from`` entry, for the laws Tune has no exact domain for."""
    from ray import tune

    return tune.sample_from(_Draw(p, seed))


def _stable_hash(name: str) -> int:
    """A parameter's stream id: the whole name counts, and it is the same in every process
    (Python's ``hash`` of a str is salted per process)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


# --- the distributions ---------------------------------------------------------------------


def _constant() -> Distribution:
    return Distribution(
        required=("value",),
        optional=(),
        sample=lambda p, rng: p.value,
        tune=lambda p, seed: p.value,
        suggest=lambda p, trial: p.value,
        grid=lambda p: [p.value],
        discrete=True,
    )


def _optuna_choice(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _categorical_suggest(p: Param, trial: Any) -> Any:
    values = list(p.values)
    if all(_optuna_choice(v) for v in values) and len(set(map(repr, values))) == len(values):
        return trial.suggest_categorical(p.name, values)
    # Lists, mappings or repeated values: Optuna chooses an index, the trial gets the value.
    return values[trial.suggest_categorical(p.name, list(range(len(values))))]


def _categorical_check(p: Param) -> list[str]:
    if not p.values:
        return ["values must be a non-empty list"]
    if p.probabilities is None:
        return []
    problems = []
    if len(p.probabilities) != len(p.values):
        problems.append(
            f"probabilities must have one entry per value: {len(p.values)} values, {len(p.probabilities)} probabilities"
        )
    if any(not isinstance(x, (int, float)) or isinstance(x, bool) or x < 0 for x in p.probabilities):
        problems.append(f"probabilities must be numbers >= 0, got {list(p.probabilities)}")
    elif not math.isclose(sum(p.probabilities), 1.0, abs_tol=1e-6):
        problems.append(f"probabilities must sum to 1, got {sum(p.probabilities):g}")
    return problems


def _grid_key(value: Any) -> str:
    """W&B's grid identity of a value (sweeps' ``yaml_hash``): YAML with sorted keys, and a
    whole float counts as its int (``3.0`` and ``3`` are one point)."""
    import yaml

    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return yaml.dump(value, default_flow_style=True, sort_keys=True)


def distinct_values(values: tuple) -> list[Any]:
    """Equal values collapse as in W&B's grid: each at its first place, holding its last spelling."""
    places: dict[str, int] = {}
    out: list[Any] = []
    for value in values:
        key = _grid_key(value)
        if key in places:
            out[places[key]] = value
        else:
            places[key] = len(out)
            out.append(value)
    return out


def _categorical() -> Distribution:
    def sample(p: Param, rng: np.random.Generator) -> Any:
        probs = None if p.probabilities is None else np.asarray(p.probabilities, float) / sum(p.probabilities)
        return p.values[int(rng.choice(len(p.values), p=probs))]

    def tune(p: Param, seed: int) -> Any:
        from ray import tune as rt

        return rt.choice(list(p.values)) if p.probabilities is None else _sample_from(p, seed)

    return Distribution(
        required=("values",),
        optional=("probabilities",),
        sample=sample,
        tune=tune,
        suggest=_categorical_suggest,  # TPE learns its own weights; probabilities shape random search only
        check=_categorical_check,
        grid=lambda p: distinct_values(p.values),
        discrete=True,
    )


def _int_uniform() -> Distribution:
    def check(p: Param) -> list[str]:
        bad = [
            f"{k} must be an integer for int_uniform, got {getattr(p, k)}"
            for k in ("min", "max")
            if not is_int(getattr(p, k))
        ]
        return bad or min_lt_max(p)

    def tune(p: Param, seed: int) -> Any:
        from ray import tune as rt

        return rt.randint(int(p.min), int(p.max) + 1)  # Ray's upper bound is exclusive

    return Distribution(
        required=("min", "max"),
        optional=(),
        sample=lambda p, rng: int(rng.integers(p.min, p.max + 1)),
        tune=tune,
        suggest=lambda p, trial: trial.suggest_int(p.name, int(p.min), int(p.max)),
        check=check,
        grid=lambda p: range(int(p.min), int(p.max) + 1),
        discrete=True,
    )


def _uniform() -> Distribution:
    def tune(p: Param, seed: int) -> Any:
        from ray import tune as rt

        return rt.uniform(p.min, p.max)

    return Distribution(
        required=("min", "max"),
        optional=(),
        sample=lambda p, rng: float(rng.uniform(p.min, p.max)),
        tune=tune,
        suggest=lambda p, trial: trial.suggest_float(p.name, p.min, p.max),
        check=min_lt_max,
    )


def _q_uniform() -> Distribution:
    def sample(p: Param, rng: np.random.Generator) -> Any:
        return quantise(p, float(rng.uniform(p.min, p.max)))

    def suggest(p: Param, trial: Any) -> Any:
        kmin, kmax = round(p.min / p.q), round(p.max / p.q)  # the multiples W&B's rounding can give
        if is_int(p.q):
            return trial.suggest_int(p.name, kmin * p.q, kmax * p.q, step=p.q)
        return quantise(p, trial.suggest_float(p.name, kmin * p.q, kmax * p.q, step=p.q))

    return Distribution(
        required=("min", "max"),
        optional=("q",),
        defaults={"q": 1.0},  # W&B's default: a float, so values are floats unless q is an int
        sample=sample,
        tune=_sample_from,
        suggest=suggest,
        check=lambda p: min_lt_max(p) + positive_q(p),
        grid=lambda p: ArangeValues(p.min, p.max, p.q),
        discrete=True,
    )


def _log_range(exponents: bool, inverse: bool = False) -> Callable[[Param], tuple[float, float]]:
    """The [low, high] value range of a log-uniform law given as exponents or as values."""

    def bounds(p: Param) -> tuple[float, float]:
        if not exponents:
            return float(p.min), float(p.max)
        if inverse:
            return math.exp(-p.max), math.exp(-p.min)
        return math.exp(p.min), math.exp(p.max)

    return bounds


def _log_uniform(exponents: bool, inverse: bool = False) -> Distribution:
    bounds = _log_range(exponents, inverse)

    def tune(p: Param, seed: int) -> Any:
        from ray import tune as rt

        return rt.loguniform(*bounds(p))

    return Distribution(
        required=("min", "max"),
        optional=(),
        sample=lambda p, rng: float(math.exp(rng.uniform(*map(math.log, bounds(p))))),
        tune=tune,
        suggest=lambda p, trial: trial.suggest_float(p.name, *bounds(p), log=True),
        check=min_lt_max if exponents else positive_values,
    )


def _q_log_uniform(exponents: bool) -> Distribution:
    bounds = _log_range(exponents)

    def sample(p: Param, rng: np.random.Generator) -> Any:
        lo, hi = bounds(p)
        return quantise(p, math.exp(rng.uniform(math.log(lo), math.log(hi))))

    def suggest(p: Param, trial: Any) -> Any:
        return quantise(p, trial.suggest_float(p.name, *bounds(p), log=True))

    return Distribution(
        required=("min", "max"),
        optional=("q",),
        defaults={"q": 1.0},
        sample=sample,
        tune=_sample_from,
        suggest=suggest,
        check=lambda p: (min_lt_max(p) if exponents else positive_values(p)) + positive_q(p),
    )


def _normal(log: bool, quantised: bool) -> Distribution:
    def law(p: Param) -> NormalDist:
        return NormalDist(p.mu, p.sigma)

    def finish(p: Param, x: float) -> Any:
        x = math.exp(x) if log else x
        return quantise(p, x) if quantised else float(x)

    def tune(p: Param, seed: int) -> Any:
        from ray import tune as rt

        return rt.randn(p.mu, p.sigma) if not (log or quantised) else _sample_from(p, seed)

    def suggest(p: Param, trial: Any) -> Any:
        u = trial.suggest_float(p.name, 1e-9, 1 - 1e-9)  # quantile; see module docstring
        return finish(p, law(p).inv_cdf(u))

    return Distribution(
        required=(),
        optional=("mu", "sigma") + (("q",) if quantised else ()),
        defaults={"mu": 0.0, "sigma": 1.0} | ({"q": 1.0} if quantised else {}),
        sample=lambda p, rng: finish(p, rng.normal(p.mu, p.sigma)),
        tune=tune,
        suggest=suggest,
        check=lambda p: positive_sigma(p) + positive_q(p),
    )


def _beta(quantised: bool) -> Distribution:
    """W&B's ``beta`` / ``q_beta``: Beta(a, b) on [0, 1] (``a``, ``b`` default 1, must be > 0)."""

    def finish(p: Param, x: float) -> Any:
        return quantise(p, x) if quantised else float(x)

    def suggest(p: Param, trial: Any) -> Any:
        from scipy import stats

        u = trial.suggest_float(p.name, 1e-9, 1 - 1e-9)  # a quantile, as for the normal family
        return finish(p, float(stats.beta.ppf(u, p.a, p.b)))

    def check(p: Param) -> list[str]:
        bad = [f"{k} must be > 0, got {getattr(p, k)}" for k in ("a", "b") if getattr(p, k) <= 0]
        return bad + positive_q(p)

    return Distribution(
        required=(),
        optional=("a", "b") + (("q",) if quantised else ()),
        defaults={"a": 1.0, "b": 1.0} | ({"q": 1.0} if quantised else {}),
        sample=lambda p, rng: finish(p, rng.beta(p.a, p.b)),
        tune=_sample_from,
        suggest=suggest,
        check=check,
    )


DISTRIBUTIONS: dict[str, Distribution] = {
    "constant": _constant(),
    "categorical": _categorical(),
    "int_uniform": _int_uniform(),
    "uniform": _uniform(),
    "q_uniform": _q_uniform(),
    "log_uniform": _log_uniform(exponents=True),
    "log_uniform_values": _log_uniform(exponents=False),
    "q_log_uniform": _q_log_uniform(exponents=True),
    "q_log_uniform_values": _q_log_uniform(exponents=False),
    "inv_log_uniform": _log_uniform(exponents=True, inverse=True),
    "inv_log_uniform_values": _log_uniform(exponents=False, inverse=True),
    "normal": _normal(log=False, quantised=False),
    "q_normal": _normal(log=False, quantised=True),
    "log_normal": _normal(log=True, quantised=False),
    "q_log_normal": _normal(log=True, quantised=True),
    "beta": _beta(quantised=False),
    "q_beta": _beta(quantised=True),
}
