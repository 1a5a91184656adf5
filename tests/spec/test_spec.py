"""The sweep spec: loading, validation messages, distributions and their Tune/Optuna forms. No Ray runs.

Modules: ``spec/parse.py``, ``spec/parameters_block.py``, ``spec/summary.py`` (``validate``).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import optuna
import pytest
import yaml

from raysweep.errors import SpecError
from raysweep.spec import DISTRIBUTIONS, Param, SweepSpec, grid_points, load_spec, parse_spec, sample_points
from raysweep.spec.space import trial_config

ROOT = Path(__file__).resolve().parents[2]
BASE = {"method": "random", "train_loop": "train_loops.smoke:train", "metric": {"name": "loss"}}


def spec_of(**keys) -> SweepSpec:
    return parse_spec(BASE | keys)


def problems_of(doc: dict, strict: bool = False) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(doc, strict=strict)
    return info.value.problems


# --- valid specs ---------------------------------------------------------------------------


def test_the_wandb_block_may_be_the_mode_alone():
    """`wandb: disabled` was refused as "must be a mapping": the mode alone, as --wandb takes it."""
    spec = parse_spec(BASE | {"project": "p", "parameters": {"x": {"value": 1}}, "raysweep": {"wandb": "disabled"}})
    assert (spec.wandb.mode, spec.wandb.project) == ("disabled", "p")


@pytest.mark.parametrize(
    "entry, distribution, fields",
    [
        ({"value": 3}, "constant", {"value": 3}),
        ({"values": [1, 2]}, "categorical", {"values": [1, 2]}),
        ({"min": 1, "max": 4}, "int_uniform", {"min": 1, "max": 4}),
        ({"min": 1.0, "max": 4.0}, "uniform", {"min": 1.0, "max": 4.0}),
        (
            {"min": "1e-5", "max": "1e-2", "distribution": "log_uniform_values"},
            "log_uniform_values",
            {"min": 1e-5, "max": 1e-2},
        ),
        ({"min": 0, "max": 1, "q": 0.25, "distribution": "q_uniform"}, "q_uniform", {"min": 0, "max": 1, "q": 0.25}),
        ({"distribution": "normal"}, "normal", {"mu": 0.0, "sigma": 1.0}),
        ({"values": ["a", "b"], "probabilities": [0.25, 0.75]}, "categorical", {"probabilities": [0.25, 0.75]}),
    ],
)
def test_distribution_inferred_and_fields_kept(entry, distribution, fields):
    param = spec_of(parameters={"p": entry}).param("p")
    out = param.to_json()
    assert out["distribution"] == distribution
    assert {k: out[k] for k in fields} == fields


def test_yaml_scientific_notation_is_a_number(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "method: random\ntrain_loop: m:f\nparameters:\n  lr: {min: 1e-5, max: 1e-2, distribution: log_uniform_values}\n"
        "  wd: {values: [1e-4, 1e-3]}\n"
    )
    spec = load_spec(path)
    assert spec.param("lr").min == 1e-5 and isinstance(spec.param("lr").min, float)
    assert spec.param("wd").values == (1e-4, 1e-3)


def test_nested_parameters_and_dotted_names_are_the_same_path():
    base = {"arch": {"stages": [{"repeat": 1}, {"repeat": 1}]}}
    nested = spec_of(
        base_config=base,
        parameters={
            "arch": {"parameters": {"stages": {"parameters": {"1": {"parameters": {"repeat": {"values": [2, 3]}}}}}}}
        },
    )
    dotted = spec_of(base_config=base, parameters={"arch.stages.1.repeat": {"values": [2, 3]}})
    assert [replace(p, nest=()) for p in nested.parameters] == list(dotted.parameters)  # nest: how W&B hands them over
    config = json.loads(json.dumps(sample_points(dotted, 1)[0]))
    from raysweep.spec import trial_config

    assert trial_config(dotted, config)["arch"]["stages"][0] == {"repeat": 1}
    assert trial_config(dotted, config)["arch"]["stages"][1]["repeat"] in (2, 3)


def test_num_gpus_sizes_the_trial_and_stays_out_of_the_loops_config():
    """spec/ owns num_gpus: it is the world size (validated), not a key of the loop's config;
    a program: script still gets it among its parameters, as under wandb agent."""
    from raysweep.spec import trial_config
    from raysweep.spec.space import wandb_config

    spec = spec_of(parameters={"lr": {"values": [0.1]}, "num_gpus": {"values": [1, 2]}})
    flat = {"lr": 0.1, "num_gpus": 2}
    assert spec.world_size(flat) == 2 and isinstance(spec.world_size({"num_gpus": 2.0}), int)
    assert trial_config(spec, flat) == {"lr": 0.1}
    assert wandb_config(spec, flat) == {"lr": 0.1, "num_gpus": 2}
    assert spec_of(parameters={"lr": {"values": [0.1]}}, raysweep={"num_gpus": 3}).world_size({"lr": 0.1}) == 3
    for bad in (0, 1.5, "2", True):
        with pytest.raises(ValueError, match="num_gpus must be a whole number >= 1"):
            spec.world_size({"num_gpus": bad})


def test_early_terminate_is_wandbs_hyperband_with_its_bands():
    # With max_iter W&B ignores min_iter: bands max_iter / eta^k for k = 1..s.
    spec = spec_of(
        parameters={"x": {"value": 1}},
        early_terminate={"type": "hyperband", "min_iter": 3, "max_iter": 10, "s": 2, "eta": 3},
    )
    s = spec.scheduler
    assert (s.type, s.bands, s.max_t, s.reduction_factor, s.strict) == ("wandb_hyperband", (1, 3), None, 3, True)
    spec = spec_of(parameters={"x": {"value": 1}}, early_terminate={"type": "hyperband", "max_iter": 27, "s": 2})
    assert spec.scheduler.bands == (3, 9)
    # min_iter alone: min_iter * eta^k, unbounded (no iteration cap at all).
    spec = spec_of(
        parameters={"x": {"value": 1}}, early_terminate={"type": "hyperband", "min_iter": 2, "eta": 2, "strict": False}
    )
    assert spec.scheduler.bands[:5] == (2, 4, 8, 16, 32) and len(spec.scheduler.bands) == 100
    assert spec.scheduler.strict is False and spec.scheduler.max_t is None


def test_raysweep_scheduler_picks_rays_asha_with_early_terminates_settings():
    spec = spec_of(
        parameters={"x": {"value": 1}},
        early_terminate={"type": "hyperband", "min_iter": 3, "eta": 3},
        raysweep={"scheduler": {"type": "asha", "max_t": 27}},
    )
    s = spec.scheduler
    assert (s.type, s.grace_period, s.max_t, s.reduction_factor, s.rungs) == ("asha", 3, 27, 3, [3, 9, 27])


def test_asha_rungs_match_ray():
    from ray.tune.schedulers import ASHAScheduler

    spec = spec_of(
        parameters={"x": {"value": 1}},
        scheduler={"type": "asha", "grace_period": 1, "max_t": 30, "reduction_factor": 3},
    )
    ray_rungs = sorted(
        int(r[0])
        for r in ASHAScheduler(grace_period=1, max_t=30, reduction_factor=3, metric="m", mode="min")._brackets[0]._rungs
    )
    assert spec.scheduler.rungs == ray_rungs


def test_spec_round_trips_through_json():
    spec = load_spec(ROOT / "tests" / "support" / "specs" / "everything.yaml")
    again = SweepSpec.from_json(json.loads(json.dumps(spec.to_json())))
    assert again == spec


# --- invalid specs: every message names its key ----------------------------------------------

INVALID = [
    ({"method": "grd"}, r"method: must be one of grid, random, bayes, custom, got 'grd' \(did you mean 'grid'\?\)"),
    ({"parameters": {"x": {"distribution": "gauss"}}}, r"parameters.x.distribution: unknown distribution 'gauss'"),
    ({"parameters": {"x": {"min": 3, "max": 1}}}, r"parameters.x: min < max must hold, got min=3, max=1"),
    (
        {"parameters": {"x": {"min": 1, "max": 4.0}}},
        r"parameters.x: Parameter x is ambiguous, please specify bounds as both floats",
    ),
    (
        {"parameters": {"x": {"min": 0, "max": 1, "distribution": "log_uniform_values"}}},
        r"parameters.x: min must be > 0",
    ),
    ({"parameters": {"x": {"values": []}}}, r"parameters.x: values must be a non-empty list"),
    ({"parameters": {"x": {"values": [1, 2], "probabilities": [1.0]}}}, r"probabilities must have one entry per value"),
    ({"parameters": {"x": {"values": [1, 2], "probabilities": [0.5, 0.6]}}}, r"probabilities must sum to 1, got 1.1"),
    ({"parameters": {"x": {"values": [1], "min": 0}}}, r"parameters.x: give either values or min/max, not both"),
    (
        {"method": "grid", "parameters": {"lr": {"min": 0.1, "max": 1.0}}},
        r"parameters.lr: grid search needs discrete parameters",
    ),
    ({"method": "bayes", "metric": None}, r"metric: required for method bayes"),
    (
        {"raysweep": {"scheduler": {"type": "asha", "max_t": 3}}, "metric": None},
        r"raysweep.scheduler: early stopping compares trials on one metric, and this sweep has none",
    ),
    (
        {"parameters": {"x": {"min": 0.0, "max": 1.0, "q": 0.5}}},
        r"parameters.x: q not used by distribution uniform .*set distribution: q_uniform",
    ),
    ({"parameters": {"x": {"min": "abc", "max": 1}}}, r"parameters.x.min: must be a number, got 'abc'"),
    (
        {"parameters": {"x": {"min": 0.5, "max": 1, "distribution": "int_uniform"}}},
        r"min must be an integer for int_uniform",
    ),
    (
        {"parameters": {"a.0.b": {"value": 1}}},
        r"parameters.a.0.b: 0 indexes a list, but a is not a list \(a list must be defined in raysweep.base_config, and this file has none\)",
    ),
    ({"parameters": {"x": 3}}, r"parameters.x: must be a mapping such as"),
    ({"train_loop": "not a loop"}, r"train_loop: must be module:function"),
    ({"run_cap": 0}, r"run_cap: must be an integer >= 1, got 0"),
    ({"reuse_actors": "no"}, r"reuse_actors: must be true or false, got 'no'"),
    ({"ddp_workers": "train"}, r"ddp_workers: must be one of warm, torchtrainer, got 'train'"),
    ({"resources": {"use_gpu": "maybe"}}, r"resources.use_gpu: must be one of auto, true, false"),
    (
        {"wandb": {"mode": "offlin"}},
        r"wandb.mode: must be one of offline, online, disabled, got 'offlin' \(did you mean 'offline'\?\)",
    ),
    (
        {"wandb": "offlin"},
        r"raysweep.wandb: must be one of offline, online, disabled, got 'offlin' \(did you mean 'offline'\?\)",
    ),
    (
        {"scheduler": {"type": "asha", "grace_period": 5, "max_t": 2}},
        r"raysweep.scheduler: max_t >= grace_period must hold",
    ),
]


@pytest.mark.parametrize("change, message", INVALID, ids=[m[:40] for _, m in INVALID])
def test_invalid_spec_names_key_and_value(change, message):
    doc = BASE | {"parameters": {"x": {"value": 1}}} | change
    doc = {k: v for k, v in doc.items() if v is not None}
    problems = problems_of(doc)
    assert any(__import__("re").search(message, p) for p in problems), problems


# What W&B's schema flags but W&B's service runs: a warning by default, refused with strict (issue 32)
VIOLATIONS = [
    ({"metrc": {"name": "x"}}, r"metrc: unknown key \(did you mean 'metric'\?\)"),
    ({"metric": {"name": "x", "goal": "max"}}, r"metric.goal: must be minimize or maximize, got 'max'"),
    ({"early_terminate": {"type": "hyperbnd", "min_iter": 1}}, r"early_terminate.type: must be one of hyperband"),
    (
        {"early_terminate": "hyperband"},
        r"early_terminate: must be a mapping, got str 'hyperband' \(W&B's service runs the sweep but stops no run early with it\)",
    ),
    (
        {"parameters": {"x": {"distribution": "log_uniform", "min": -5, "max": 0}}},
        r"parameters.x.distribution: log_uniform takes base-e exponents",
    ),
]


@pytest.mark.parametrize("change, message", VIOLATIONS, ids=[m[:40] for _, m in VIOLATIONS])
def test_schema_violations_warn_and_run_by_default_and_are_refused_strictly(change, message):
    doc = BASE | {"parameters": {"x": {"value": 1}}} | change
    spec = parse_spec(doc)
    assert any(__import__("re").search(message, n) for n in spec.notes), spec.notes
    assert spec.scheduler is None if "early_terminate" in change else True  # W&B's service stops no run early
    if "metric" in change:
        assert spec.objectives.single.mode == "min"  # W&B's engine minimizes any goal but maximize
    for strict_doc, strict in (
        (doc, True),
        (doc | {"raysweep": {"strict": True}}, False),
        (doc | {"controller": {"type": "local"}}, False),
    ):
        assert any(__import__("re").search(message, p) for p in problems_of(strict_doc, strict)), strict_doc


def test_an_exponent_log_uniform_draws_between_e_to_the_min_and_max():
    spec = parse_spec(BASE | {"parameters": {"x": {"distribution": "log_uniform", "min": -5, "max": 0}}})
    rng = np.random.default_rng(0)
    xs = [spec.parameters[0].sample(rng) for _ in range(500)]
    assert math.exp(-5) <= min(xs) and max(xs) <= 1.0 and min(xs) < 0.05 and max(xs) > 0.5


def test_an_unknown_key_lists_each_valid_key_once():
    (problem,) = [p for p in problems_of(BASE | {"foo": 1}, strict=True) if p.startswith("foo:")]
    valid = problem.split("valid keys: ")[1].split(", ")
    assert "scheduler" in valid and len(valid) == len(set(valid)), problem


def test_every_problem_is_reported_at_once():
    problems = problems_of(
        {"method": "grd", "metrc": {}, "parameters": {"a": {"values": []}, "b": {"min": 2, "max": 1}}, "seed": -1}
    )
    assert len(problems) >= 5, problems


def test_list_index_must_exist_in_base_config():
    problems = problems_of(
        BASE | {"base_config": {"arch": {"stages": [{}, {}]}}, "parameters": {"arch.stages.5.repeat": {"value": 1}}}
    )
    assert problems == [
        "parameters.arch.stages.5.repeat: index 5 is out of range: arch.stages has 2 items in raysweep.base_config"
    ]


# --- distributions: samplers agree with the meaning, and with each other ------------------------

N = 3000
LAWS = {
    "int_uniform": dict(min=1, max=4),
    "uniform": dict(min=-1.0, max=3.0),
    "q_uniform": dict(min=0.0, max=1.0, q=0.25),
    "log_uniform": dict(min=-4.0, max=0.0),
    "log_uniform_values": dict(min=1e-4, max=1e-1),
    "q_log_uniform": dict(min=0.0, max=4.0, q=5),
    "q_log_uniform_values": dict(min=1.0, max=100.0, q=10),
    "inv_log_uniform": dict(min=0.0, max=3.0),
    "inv_log_uniform_values": dict(min=0.01, max=1.0),
    "normal": dict(mu=2.0, sigma=0.5),
    "q_normal": dict(mu=10.0, sigma=3.0, q=2),
    "log_normal": dict(mu=0.0, sigma=0.5),
    "q_log_normal": dict(mu=2.0, sigma=0.3, q=1),
    "beta": dict(a=2.0, b=5.0),
    "q_beta": dict(a=2.0, b=2.0, q=0.25),
    "categorical": dict(values=("a", "b", "c"), probabilities=(0.2, 0.3, 0.5)),
}


def numpy_draws(p: Param) -> list:
    rng = np.random.default_rng(0)
    return [p.sample(rng) for _ in range(N)]


def tune_draws(p: Param) -> list:
    domain = p.tune_domain(seed=0)
    return list(domain.sample(config={}, size=N, random_state=np.random.default_rng(1)))


def optuna_draws(p: Param) -> list:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=2))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return [p.suggest(study.ask()) for _ in range(N)]


def value_range(p: Param) -> tuple[float, float] | None:
    name = p.distribution
    if name in (
        "uniform",
        "int_uniform",
        "q_uniform",
        "log_uniform_values",
        "q_log_uniform_values",
        "inv_log_uniform_values",
    ):
        return p.min, p.max
    if name in ("log_uniform", "q_log_uniform"):
        return math.exp(p.min), math.exp(p.max)
    if name == "inv_log_uniform":
        return math.exp(-p.max), math.exp(-p.min)
    return None


@pytest.mark.parametrize("name", list(LAWS))
@pytest.mark.parametrize("draw", [numpy_draws, tune_draws, optuna_draws], ids=["numpy", "tune", "optuna"])
def test_samplers_obey_the_distribution(name, draw):
    p = Param(name="p", distribution=name, **(DISTRIBUTIONS[name].defaults | LAWS[name]))
    xs = draw(p)
    if name == "categorical" and draw is optuna_draws:  # TPE learns its own weights
        assert set(xs) == set(p.values)
        return
    if name == "categorical":
        freq = {v: xs.count(v) / N for v in p.values}
        assert freq == pytest.approx(dict(zip(p.values, p.probabilities)), abs=0.04)
        return
    arr = np.asarray(xs, dtype=float)
    bounds = value_range(p)
    if bounds and p.q is not None:  # W&B's rule: round(X / q) * q, wherever that lies
        assert round(bounds[0] / p.q) * p.q - 1e-12 <= arr.min() and arr.max() <= round(bounds[1] / p.q) * p.q + 1e-12
    elif bounds:  # bounds are inclusive, and reached
        assert bounds[0] - 1e-12 <= arr.min() and arr.max() <= bounds[1] + 1e-12
    if name == "int_uniform":
        assert all(isinstance(x, (int, np.integer)) for x in xs) and set(xs) == {1, 2, 3, 4}
    if p.q is not None and name.startswith("q_"):
        assert np.allclose(arr / p.q, np.round(arr / p.q))
        if isinstance(p.q, int):
            assert all(isinstance(x, int) for x in xs)
    if name in ("log_uniform", "log_uniform_values", "inv_log_uniform", "inv_log_uniform_values"):
        lo, hi = bounds  # log-uniform: the median is the geometric mean of the bounds
        assert np.median(arr) == pytest.approx(math.sqrt(lo * hi), rel=0.15)
    if name == "uniform":
        assert arr.mean() == pytest.approx(1.0, abs=0.1)
    if name == "normal":
        assert (arr.mean(), arr.std()) == pytest.approx((2.0, 0.5), abs=0.05)
    if name == "log_normal":
        assert np.log(arr).mean() == pytest.approx(0.0, abs=0.05)
    if name == "beta":  # Beta(2, 5): mean 2/7, inside [0, 1]
        assert arr.mean() == pytest.approx(2 / 7, abs=0.02) and 0 <= arr.min() and arr.max() <= 1


def test_grid_of_the_stages_space_has_256_points_in_wandbs_order():
    spec = load_spec(ROOT / "tests" / "support" / "specs" / "stages_grid.yaml")
    points = grid_points(spec)
    assert spec.grid_size == len(points) == 256 == 4 * 2 * 4 * 2 * 4
    assert len({json.dumps(p, sort_keys=True) for p in points}) == 256
    names = list(points[0])
    assert names == sorted(names)  # W&B orders parameters by name, whatever the file's order
    assert [p[names[-1]] for p in points[:4]] == [1, 2, 3, 4]  # the last parameter varies fastest
    assert points[0][names[0]] == points[127][names[0]] != points[128][names[0]]  # the first, slowest


def test_q_uniform_grid_is_wandbs_arange():
    p = spec_of(
        method="grid", parameters={"x": {"distribution": "q_uniform", "min": 0.1, "max": 1.0, "q": 0.25}}
    ).param("x")
    assert list(p.grid_values()) == np.arange(0.1, 1.0, 0.25).tolist()


# --- the CLI as a new user meets it ----------------------------------------------------------------


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "raysweep", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_validate_json_schema():
    out = cli("validate", "tests/support/specs/stages_grid.yaml", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) == {"method", "metric", "objectives", "parameters", "grid_size", "trial_budget", "scheduler"}
    assert data["metric"] == {"name": "exact_accuracy", "goal": "maximize"}
    assert data["objectives"] == [data["metric"]]
    assert data["grid_size"] == data["trial_budget"] == 256
    assert data["parameters"]["arch.stages.0.repeat"] == {"distribution": "categorical", "values": [1, 2, 3, 4]}
    assert data["scheduler"] == {
        "type": "wandb_hyperband",
        "grace_period": 1,
        "max_t": None,
        "reduction_factor": 3,
        "rungs": [1, 3],
        "strict": True,
    }


def test_validate_sample_prints_nested_configs():
    out = cli("validate", "tests/support/specs/stages_grid.yaml", "--sample", "3")
    configs = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(configs) == 3
    assert [c["arch"]["stages"][2]["repeat"] for c in configs] == [1, 2, 3]
    assert configs[0]["arch"]["stages"][2]["include_inputs"] is False  # from base_config


def test_validate_human_summary():
    out = cli("validate", "tests/support/specs/stages_grid.yaml")
    assert "grid size 256" in out.stdout and "rungs at iterations [1, 3]" in out.stdout


MALFORMED = {
    "syntax.yaml": ("method: grid\nparameters:\n  x: {values: [1, 2}\n", r"YAML syntax error at line 3"),
    "not_mapping.yaml": ("- a\n- b\n", r"must be a mapping of keys"),
    "bad_method.yaml": ("method: sweep\n", r"method: must be one of grid, random, bayes"),
    "bad_dist.yaml": ("parameters:\n  lr: {distribution: loguniform, min: 1, max: 2}\n", r"did you mean 'log_uniform'"),
    "min_max.yaml": ("parameters:\n  lr: {min: 0.1, max: 0.01}\n", r"parameters.lr: min < max must hold"),
    "log_zero.yaml": (
        "parameters:\n  lr: {distribution: log_uniform_values, min: 0, max: 1}\n",
        r"parameters.lr: min must be > 0",
    ),
    "empty_values.yaml": ("parameters:\n  bs: {values: []}\n", r"parameters.bs: values must be a non-empty list"),
    "probs.yaml": ("parameters:\n  o: {values: [a, b], probabilities: [0.9, 0.3]}\n", r"probabilities must sum to 1"),
    "grid_cont.yaml": (
        "method: grid\nparameters:\n  lr: {min: 0.1, max: 0.2}\n",
        r"parameters.lr: grid search needs discrete",
    ),
    "bayes_nometric.yaml": ("method: bayes\nmetric: null\n", r"metric: must be a mapping"),
    "values_and_min.yaml": ("parameters:\n  x: {values: [1], max: 3}\n", r"give either values or min/max, not both"),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_file_gives_one_clear_message_and_exit_2(tmp_path, name):
    body, message = MALFORMED[name]
    defaults = {
        "method": "random",
        "train_loop": "train_loops.smoke:train",
        "metric": {"name": "loss"},
        "parameters": {"x": {"value": 1}},
    }
    try:
        doc = yaml.safe_load(body)
        text = yaml.safe_dump(defaults | doc) if isinstance(doc, dict) else body
    except yaml.YAMLError:
        text = body
    (tmp_path / name).write_text(text)
    out = cli("validate", str(tmp_path / name))
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert __import__("re").search(message, out.stderr), out.stderr


def test_a_schema_violation_is_a_warning_and_strict_refuses_it(tmp_path):
    path = write_doc(
        tmp_path / "typo.yaml",
        {
            "method": "random",
            "train_loop": "train_loops.smoke:train",
            "methd": "grid",
            "parameters": {"x": {"value": 1}},
        },
    )
    out = cli("validate", str(path))
    assert out.returncode == 0 and "warning: methd: unknown key (did you mean 'method'?)" in out.stderr, out.stderr
    assert "validate --strict" in out.stderr and out.stderr.count("methd") == 1  # once per file
    strict = cli("validate", str(path), "--strict")
    assert strict.returncode == 2 and "methd: unknown key (did you mean 'method'?)" in strict.stderr
    assert "Traceback" not in strict.stderr and strict.stdout == ""


def test_a_file_refused_for_other_reasons_names_its_unknown_keys_too(tmp_path):
    """Issue 42: `methd: random` said only "method: required"; the misspelt key is why."""
    path = write_doc(
        tmp_path / "typo.yaml", {"methd": "random", "train_loop": "m:f", "parameters": {"x": {"value": 1}}}
    )
    out = cli("validate", str(path))
    assert out.returncode == 2, out.stderr
    assert "methd: unknown key (did you mean 'method'?)" in out.stderr and "method: required" in out.stderr


def write_doc(path: Path, doc: dict) -> Path:
    path.write_text(yaml.safe_dump(doc))
    return path


def test_missing_file_exits_2_without_traceback(tmp_path):
    out = cli("validate", str(tmp_path / "nope.yaml"))
    assert out.returncode == 2 and "file not found" in out.stderr and "Traceback" not in out.stderr


def test_set_overrides_keys_of_the_file():
    out = cli(
        "validate",
        "tests/support/specs/stages_grid.yaml",
        "--json",
        "--set",
        "run_cap=5",
        "--set",
        "parameters.arch.stages.0.repeat.values=[1,2]",
    )
    data = json.loads(out.stdout)
    assert data["trial_budget"] == 5 and data["grid_size"] == 128


@pytest.mark.parametrize("path", sorted((ROOT / "search_spaces").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_sweep_file_validates_without_a_warning(path):
    out = cli("validate", str(path.relative_to(ROOT)))
    assert out.returncode == 0 and "warning" not in out.stderr, out.stderr


@pytest.mark.parametrize("name", ["optimizer_config/optimizer/init_args/lr", "batch-size", "drop out"])
def test_parameter_names_as_wandb_takes_them(name):
    """Issue 42: a Lightning CLI sweep names its parameters with '/' (passed through
    ${args_json_file}); W&B runs them, and so does raysweep, for a script and for a loop."""
    script = parse_spec({"program": "t.py", "method": "grid", "parameters": {name: {"values": [1, 2]}}})
    assert [p.name for p in script.parameters] == [name]
    loop = parse_spec({"method": "grid", "raysweep": {"train_loop": "m:f"}, "parameters": {name: {"value": 1}}})
    assert trial_config(loop, {name: 1}) == {name: 1}


def test_the_checkpoint_policy_block_reads_its_defaults_all_and_refuses_bad_values():
    points = {"parameters": {"x": {"values": [1, 2]}}}
    assert spec_of(**points).checkpoints.keep_best_trials == 3 and spec_of(**points).checkpoints.keep_per_trial == 2
    policy = spec_of(**points, raysweep={"checkpoints": {"keep_best_trials": "all"}})
    assert policy.checkpoints.keep_best_trials is None
    assert SweepSpec.from_json(json.loads(json.dumps(policy.to_json()))).checkpoints == policy.checkpoints
    bad = {"keep_best_trials": -1, "keep_per_trial": 0, "keep_last": 1}
    with pytest.raises(SpecError) as e:
        spec_of(**points, raysweep={"checkpoints": bad})
    said = str(e.value)
    assert "raysweep.checkpoints.keep_best_trials: must be an integer >= 0 or all, got -1" in said
    assert "raysweep.checkpoints.keep_per_trial: must be an integer >= 1, got 0" in said
    assert "keep_last" in said
