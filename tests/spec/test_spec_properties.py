"""Property tests over generated specs: `validate` never shows a traceback, a spec that is valid by
construction is accepted, and what validation accepts can be sampled."""

from __future__ import annotations

import numpy as np
import optuna
import yaml
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
numbers = st.one_of(
    st.integers(-3, 20), st.floats(-3, 20, allow_nan=False, allow_infinity=False), st.sampled_from(["1e-2", "x"])
)
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
    dist = draw(st.sampled_from([d for d in DISTRIBUTIONS if d not in EXPONENT_LAWS]))  # W&B's schema flags those
    lo = draw(st.integers(1, 5)) if dist in ("int_uniform", "q_uniform") else draw(st.floats(0.01, 5))
    hi = lo + (draw(st.integers(1, 6)) if isinstance(lo, int) else draw(st.floats(0.01, 5)))
    entry = {"distribution": dist}
    if dist == "constant":
        entry["value"] = draw(scalars)
    elif dist == "categorical":
        entry["values"] = draw(
            st.lists(st.one_of(scalars, st.lists(st.integers(0, 3), max_size=2)), min_size=1, max_size=4)
        )
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
        "parameters": st.dictionaries(
            st.sampled_from(["lr", "bs", "opt.wd", "num_gpus"]), good_param(), min_size=1, max_size=3
        ),
    },
    optional={
        "early_terminate": st.just({"type": "hyperband", "min_iter": 1, "max_iter": 9}),
        "seed": st.integers(0, 9),
    },
)

junk_specs = st.fixed_dictionaries(
    {"train_loop": st.sampled_from(["train_loops.smoke:train", "bad loop"])},
    optional={
        "method": st.sampled_from(["grid", "random", "bayes", "grd", None]),
        "metric": st.one_of(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["loss", ""])},
                optional={"goal": st.sampled_from(["minimize", "maximize", "up"])},
            ),
            scalars,
        ),
        "parameters": parameters,
        "early_terminate": st.one_of(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["hyperband", "asha"])},
                optional={"min_iter": numbers, "max_iter": numbers, "s": numbers, "eta": numbers},
            ),
            scalars,
        ),
        "run_cap": numbers,
        "seed": numbers,
        "scheduler": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "type": st.sampled_from(["asha", "fifo", "hyperband", "x"]),
                    "max_t": numbers,
                    "grace_period": numbers,
                },
            ),
            scalars,
        ),
        "base_config": st.one_of(st.just({"a": [1, 2]}), scalars),
        "wat": scalars,
    },
)


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


@st.composite
def valid_param(draw):
    """A parameter entry valid by construction (random and bayes search)."""
    kind = draw(st.sampled_from(["uniform", "int_uniform", "log_uniform_values", "normal", "categorical", "constant"]))
    if kind == "categorical":
        return {
            "values": draw(
                st.lists(
                    st.one_of(st.integers(-3, 3), st.sampled_from(["a", "b"]), st.booleans()), min_size=1, max_size=4
                )
            )
        }
    if kind == "constant":
        return {"value": draw(st.one_of(st.integers(-3, 3), st.sampled_from(["a", "b"])))}
    if kind == "normal":
        return {"distribution": "normal", "mu": draw(st.floats(-1, 1)), "sigma": draw(st.floats(0.01, 1))}
    if kind == "int_uniform":
        low = draw(st.integers(-5, 5))
        return {"distribution": "int_uniform", "min": low, "max": low + draw(st.integers(1, 5))}
    low = draw(st.floats(0.001, 5))
    return {"distribution": kind, "min": low, "max": low * draw(st.floats(1.01, 100))}


valid_specs = st.fixed_dictionaries(
    {
        "raysweep": st.just({"train_loop": "train_loops.smoke:train"}),
        "method": st.sampled_from(["random", "bayes"]),
        "metric": st.fixed_dictionaries({"name": st.just("score"), "goal": st.sampled_from(["minimize", "maximize"])}),
        "parameters": st.dictionaries(
            st.sampled_from(["lr", "bs", "opt.wd", "x"]), valid_param(), min_size=1, max_size=4
        ),
    },
    optional={
        "early_terminate": st.just({"type": "hyperband", "min_iter": 1}),
        "seed": st.integers(0, 9),
        "run_cap": st.integers(1, 50),
    },
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_specs)
def test_a_spec_valid_by_construction_is_accepted(doc):
    """A change that refuses good specs fails here (the test above only checks what is accepted)."""
    spec = parse_spec(doc)
    assert {p.name for p in spec.parameters} == set(doc["parameters"])
    assert not [n for n in spec.notes if n.startswith("warning")], spec.notes


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.one_of(specs, valid_specs))
def test_the_validate_command_never_shows_a_traceback(tmp_path, capsys, doc):
    """Guarantee: "A spec is validated in full before any cluster starts; every problem is listed at once,
    and `validate` never shows a traceback (property-tested over generated specs)." The command itself,
    as the CLI runs it (in this process, for speed): exit 0 or 2, one paragraph, no traceback."""
    from raysweep.cli import main

    path = tmp_path / "gen.yaml"
    path.write_text(yaml.safe_dump(doc))
    code = main(["validate", str(path)])
    err = capsys.readouterr().err
    assert code in (0, 2) and "Traceback" not in err, err
    if code == 2:
        assert err.startswith("raysweep: ") and "problem" in err, err
