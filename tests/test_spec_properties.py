"""Property test over generated specs: validation never crashes, and what it accepts can be sampled."""

from __future__ import annotations

import numpy as np
import optuna
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raysweep.errors import SpecError
from raysweep.spec import DISTRIBUTIONS, grid_points, optuna_space, parse_spec, sample_points, trial_config
from raysweep.spec.model import EXPONENT_LAWS

optuna.logging.set_verbosity(optuna.logging.WARNING)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 50),
    st.floats(-10, 10, allow_nan=False),
    st.sampled_from(["1e-3", "abc", "", "0.5", "-2"]),
)
numbers = st.one_of(st.integers(-3, 20), st.floats(-3, 20, allow_nan=False, allow_infinity=False), st.sampled_from(["1e-2", "x"]))
values = st.lists(st.one_of(scalars, st.lists(st.integers(0, 3), max_size=2)), max_size=4)

param_entry = st.fixed_dictionaries(
    {},
    optional={
        "distribution": st.one_of(st.sampled_from(list(DISTRIBUTIONS)), st.sampled_from(["gauss", "uniformm", 3])),
        "value": scalars,
        "values": st.one_of(values, scalars),
        "probabilities": st.lists(st.floats(0, 1), max_size=4),
        "min": numbers,
        "max": numbers,
        "q": numbers,
        "mu": numbers,
        "sigma": numbers,
        "bogus": scalars,
    },
)
names = st.sampled_from(["lr", "bs", "arch.depth", "num_gpus", "a.0", "x/y", "opt"])
parameters = st.one_of(st.dictionaries(names, param_entry, max_size=4), scalars)

@st.composite
def good_param(draw):
    """A parameter entry that is usually valid: bounds ordered, positives positive."""
    dist = draw(st.sampled_from([d for d in DISTRIBUTIONS if d not in EXPONENT_LAWS]))  # W&B refuses those
    lo = draw(st.integers(1, 5)) if dist in ("int_uniform", "q_uniform") else draw(st.floats(0.01, 5))
    hi = lo + (draw(st.integers(1, 6)) if isinstance(lo, int) else draw(st.floats(0.01, 5)))
    entry = {"distribution": dist}
    if dist == "constant":
        entry["value"] = draw(scalars)
    elif dist == "categorical":
        entry["values"] = draw(st.lists(st.one_of(scalars, st.lists(st.integers(0, 3), max_size=2)), min_size=1, max_size=4))
    elif dist in ("normal", "q_normal", "log_normal", "q_log_normal"):
        entry |= {"mu": draw(st.floats(-1, 1)), "sigma": draw(st.floats(0.01, 1))}
    else:
        entry |= {"min": lo, "max": hi}
    if dist.startswith("q_"):
        entry["q"] = draw(st.sampled_from([1, 0.5, 0.1, 2]))
    return entry


good_specs = st.fixed_dictionaries(
    {
        "train_loop": st.just("train_loops.smoke:train"),
        "method": st.sampled_from(["grid", "random", "bayes"]),
        "metric": st.just({"name": "score"}),
        "parameters": st.dictionaries(st.sampled_from(["lr", "bs", "opt.wd", "num_gpus"]), good_param(), min_size=1, max_size=3),
    },
    optional={"early_terminate": st.just({"type": "hyperband", "min_iter": 1, "max_iter": 9}), "seed": st.integers(0, 9)},
)

junk_specs = st.fixed_dictionaries(
    {"train_loop": st.sampled_from(["train_loops.smoke:train", "bad loop"])},
    optional={
        "method": st.sampled_from(["grid", "random", "bayes", "grd", None]),
        "metric": st.one_of(st.fixed_dictionaries({"name": st.sampled_from(["loss", ""])}, optional={"goal": st.sampled_from(["minimize", "maximize", "up"])}), scalars),
        "parameters": parameters,
        "early_terminate": st.one_of(
            st.fixed_dictionaries({"type": st.sampled_from(["hyperband", "asha"])}, optional={"min_iter": numbers, "max_iter": numbers, "s": numbers, "eta": numbers}),
            scalars,
        ),
        "run_cap": numbers,
        "seed": numbers,
        "scheduler": st.one_of(st.fixed_dictionaries({}, optional={"type": st.sampled_from(["asha", "fifo", "hyperband", "x"]), "max_t": numbers, "grace_period": numbers}), scalars),
        "base_config": st.one_of(st.just({"a": [1, 2]}), scalars),
        "wat": scalars,
    },
)  # fmt: skip


specs = st.one_of(good_specs, junk_specs)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs)
def test_validate_never_crashes_and_accepted_specs_sample(doc):
    try:
        spec = parse_spec(doc)
    except SpecError as e:
        assert e.problems and all(isinstance(p, str) and p for p in e.problems)
        return
    for flat in sample_points(spec, 3):
        trial_config(spec, flat)
    if spec.method == "grid":
        assert len(grid_points(spec)) == spec.grid_size
    rng = np.random.default_rng(0)
    for p in spec.parameters:
        p.sample(rng)
        p.tune_domain(seed=0)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    config = optuna_space(spec)(study.ask())
    assert set(config) == {p.name for p in spec.parameters}
