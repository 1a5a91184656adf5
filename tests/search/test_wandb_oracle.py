"""W&B's own sweep engine (PyPI ``sweeps``) as the oracle: raysweep must agree with it.

Each test asks the engine (tests/support/wandb_oracle.py, in .venv-wandb) and raysweep the same
question: does the file validate, which grid points in which order, which values and Python
types a parameter takes, which runs hyperband stops. Where raysweep differs on purpose, the
difference is listed in docs/differences-from-wandb.md and ``DIFFERENCES`` below encodes it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats
from wandb_scheduler import at_start, engine_of

from raysweep.errors import SpecError, UserError
from raysweep.search.hyperband import WandbHyperband
from raysweep.search.wandb_optimizer import checked
from raysweep.spec import grid_points, load_spec, parse_spec
from raysweep.spec.checks import number
from raysweep.spec.model import wandb_bands
from raysweep.spec.param import Param
from raysweep.spec.reading import read_yaml
from raysweep.spec.space import wandb_config
from raysweep.spec.wandb_keys import COMMAND_MACROS, MACRO
from raysweep.values import finite_number

ROOT = Path(__file__).resolve().parents[2]
# Our own files, plus real ones steering may keep in shared/wandb_files (tests/support/wandb_audit.py
# audits any dir of sweep files the same way).
FILES = sorted((ROOT / "tests" / "support" / "wandb_files").glob("*.yaml")) + sorted(
    (ROOT.parent / "shared" / "wandb_files").glob("*.y*ml")
)


def ours_accepts(doc: dict, strict: bool = False) -> tuple[bool, list[str]]:
    """raysweep's verdict: the file read, and what W&B's sweep scheduler refuses at start refused."""
    try:
        checked(parse_spec(doc, strict=strict))
    except SpecError as e:
        return False, e.problems
    except UserError as e:
        return False, [str(e)]
    return True, []


def wandb_verdict(oracle, op: str, doc: dict) -> dict:
    """W&B's verdict on a file: what `wandb sweep`'s client refuses before upload (a min/max of an
    int and a float with no distribution: wandb's own check, which also fills in the distribution
    it infers), then its engine's ``op`` ("cloud": its service runs it; "verdict": its local
    controller accepts it) on what the client uploads."""
    from wandb.apis.public.sweeps import _validate_config_and_fill_distribution

    try:
        uploaded = _validate_config_and_fill_distribution(doc)
    except ValueError as e:
        return {"ok": False, "errors": [f"wandb sweep: {e}"]}
    uploaded = json.loads(json.dumps(uploaded, allow_nan=True))
    if engine_of(uploaded) in ("optuna", "ax"):  # W&B's service leaves the sweep to its scheduler (wandb 0.31)
        start = at_start(uploaded, ROOT)
        violations = oracle.ask("violations", config=uploaded)["violations"] if op == "verdict" else []
        return {"ok": start["ok"] and not violations, "errors": violations + start["errors"]}
    return oracle.ask(op, config=uploaded)


def program_sweep(**doc) -> dict:
    return {"program": "train.py"} | doc


# --- verdicts: a table of files W&B accepts and refuses -------------------------------------------

VERDICTS = [
    program_sweep(method="random", parameters={"lr": {"min": 0.0, "max": 1.0}}),
    program_sweep(
        method="grid", parameters={"a": {"values": [1, 2]}, "b": {"values": [1, 2], "probabilities": [0.5, 0.5]}}
    ),
    program_sweep(method="grid", parameters={"lr": {"min": 0.0, "max": 1.0}}),
    program_sweep(
        method="grid",
        parameters={"a": {"min": 1, "max": 4}, "q": {"distribution": "q_uniform", "min": 0, "max": 1, "q": 0.3}},
    ),
    program_sweep(method="random", parameters={"a": {"min": 3, "max": 1}}),
    program_sweep(method="random", parameters={"a": {"values": [1, 2], "probabilities": [0.5, 0.6]}}),
    program_sweep(method="random", parameters={"a": {"distribution": "gauss"}}),
    program_sweep(method="sweep", parameters={"a": {"value": 1}}),
    program_sweep(method="random", parameters={"a": {"value": 1}}, metrc={"name": "x"}),
    program_sweep(method="random", parameters={"a": {"value": 1}}, metric={"name": "x", "goal": "max"}),
    program_sweep(
        method="random",
        parameters={"a": {"value": 1}},
        metric={"name": "x"},
        early_terminate={"type": "hyperband", "min_iter": 3},
    ),
    program_sweep(
        method="random",
        parameters={"a": {"value": 1}},
        metric={"name": "x"},
        early_terminate={"type": "hyperband", "max_iter": 27},
    ),
    program_sweep(
        method="random",
        parameters={"a": {"value": 1}},
        metric={"name": "x"},
        early_terminate={"type": "hyperband", "max_iter": 27, "s": 2, "eta": 3, "strict": False},
    ),
    program_sweep(
        method="random",
        parameters={"a": {"value": 1}},
        metric={"name": "x"},
        early_terminate={"type": "hyperband", "min_iter": 0},
    ),
    # The Hydra example of W&B's docs and the stages sweep of the project's origin: opaque names.
    program_sweep(
        method="grid",
        parameters={"optimizer": {"value": "adam"}, "optimizer.config.learning_rate": {"values": [0.1, 0.01]}},
    ),
    program_sweep(
        method="grid",
        parameters={"arch.stages.0.repeat": {"values": [1, 2]}, "arch.stages.1.repeat": {"values": [1, 2]}},
        command=["${env}", "${interpreter}", "${program}", "${args_no_hyphens}"],
    ),
    program_sweep(method="random", parameters={"a": {"value": 1}}, controller={"type": "local"}),
    program_sweep(method="random", parameters={"a": {"value": 1}}, run_cap=0),
    program_sweep(
        method="random", parameters={"a": {"value": 1}}, metric={"name": "x", "impute_while_running": "false"}
    ),
    program_sweep(
        method="random", parameters={"n": {"parameters": {"lr": {"min": 0.0, "max": 1.0}, "bs": {"values": [1, 2]}}}}
    ),
    program_sweep(method="random", parameters={"a": {"value": 1}}, scheduler={"engine": "optuna"}),
    # W&B's new format (wandb/sweeps #135-#138)
    program_sweep(
        method="custom",
        parameters={"a": {"value": 1}},
        metrics=[{"name": "x"}, {"name": "y"}],
        scheduler={"engine": "optuna"},
    ),
    program_sweep(method="custom", parameters={"a": {"value": 1}}, metric={"name": "x"}),
    program_sweep(method="custom", parameters={"a": {"value": 1}}, metric={"name": "x"}, scheduler={"engine": "wandb"}),
    program_sweep(
        method="bayes", parameters={"a": {"min": 0.0, "max": 1.0}}, metric={"name": "x"}, scheduler={"engine": "wandb"}
    ),
    program_sweep(method="bayes", parameters={"a": {"min": 0.0, "max": 1.0}}, metrics=[{"name": "x"}, {"name": "y"}]),
    program_sweep(
        method="custom",
        parameters={"a": {"value": 1}},
        metric={"name": "x"},
        metrics=[{"name": "x"}, {"name": "y"}],
        scheduler={"engine": "optuna"},
    ),
    program_sweep(
        method="custom", parameters={"a": {"value": 1}}, metrics=[{"name": "x"}], scheduler={"engine": "optuna"}
    ),
    program_sweep(
        method="custom",
        parameters={"a": {"value": 1}},
        metric={"name": "x"},
        scheduler={"engine": "optuna"},
        early_terminate={"type": "hyperband", "min_iter": 1},
    ),
    program_sweep(method="custom", metric={"name": "x"}, scheduler={"engine": "optuna"}),
    program_sweep(
        method="custom",
        metric={"name": "x"},
        parameters={"a": {"value": 1}},
        scheduler={"engine": "optuna", "optimizer": "f"},
    ),
    program_sweep(method="random", parameters={}),
    program_sweep(method="random", parameters={"lr": {"distribution": "log_uniform", "min": -11, "max": -2}}),
    program_sweep(method="random", parameters={"lr": {"distribution": "q_log_uniform", "min": 0, "max": 3}}),
    program_sweep(method="random", parameters={"lr": {"distribution": "inv_log_uniform_values", "min": 0.1, "max": 3}}),
    program_sweep(method="random", parameters={"b": {"distribution": "beta", "a": 2, "b": 3}}),
    program_sweep(
        method="random",
        parameters={"a": {"value": 1}},
        command=["${env}", "python", "-m", "scripts.train", "${args_no_hyphens}", "hydra.run.dir=out/${now:%H%M}"],
    ),
    program_sweep(method="random", parameters={"a": {"value": 1}}, metric={"name": "m", "impute": "best"}),
    program_sweep(method="random", parameters={"a": {"min": 0, "max": 1.5}}),  # wandb's client: "is ambiguous"
    program_sweep(method="random", parameters={"a": {"min": 0, "max": 1.5, "distribution": "uniform"}}),
]


@pytest.mark.parametrize("doc", VERDICTS, ids=[json.dumps(d)[:60] for d in VERDICTS])
def test_verdict_agrees_with_wandb(wandb_oracle, doc):
    """By default raysweep runs what W&B's service runs (its engine, not validating); with
    --strict it refuses what W&B's local controller refuses. Where not, docs/differences-from-wandb.md says why."""
    for op, strict in (("cloud", False), ("verdict", True)):
        theirs = wandb_verdict(wandb_oracle, op, doc)
        ok, problems = ours_accepts(doc, strict)
        if ok != theirs["ok"]:
            assert differences_in(doc, doc, strict), (op, problems, theirs["errors"])


# --- grids: the same points, in the same order, with the same types -------------------------------

scalars = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([0.5, 1.0, 2.0, -1.5]),
    st.booleans(),
    st.sampled_from(["a", "b", "1e-5"]),
)
values = st.one_of(scalars, st.dictionaries(st.sampled_from(["k", "j"]), st.integers(0, 2), min_size=1, max_size=2))
names = st.text(alphabet="abcxy_.", min_size=1, max_size=4).filter(
    lambda n: n[0] not in "." and ".." not in n and not n.endswith(".")
)


@st.composite
def grid_param(draw):
    kind = draw(st.sampled_from(["values", "value", "int", "q"]))
    if kind == "values":
        return {"values": draw(st.lists(values, min_size=1, max_size=4))}
    if kind == "value":
        return {"value": draw(scalars)}
    if kind == "int":
        low = draw(st.integers(-3, 3))
        return {"min": low, "max": low + draw(st.integers(1, 4))}
    low = draw(st.sampled_from([0, 0.1, 1, -0.5]))
    return {
        "distribution": "q_uniform",
        "min": low,
        "max": low + draw(st.sampled_from([1, 2.5, 3])),
        "q": draw(st.sampled_from([1, 0.25, 0.5, 2, 0.3])),
    }


@st.composite
def grid_params(draw):
    params = draw(st.dictionaries(names, grid_param(), min_size=1, max_size=4))
    if draw(st.booleans()):  # a nested block beside the flat names
        params["zz"] = {
            "parameters": draw(st.dictionaries(st.sampled_from(["y", "b"]), grid_param(), min_size=1, max_size=2))
        }
    return params


def typed(points: list[dict]) -> list[str]:
    """Points as JSON with sorted keys: 1 and 1.0 differ, as they do in the script's argv."""
    return [json.dumps(p, sort_keys=True) for p in points]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # ~2 s each
@given(params=grid_params())
def test_grid_points_and_order_agree_with_wandb(wandb_oracle, params):
    doc = program_sweep(method="grid", parameters=params)
    names_ = [n for n in params if n != "zz"] + [f"zz.{k}" for k in params.get("zz", {}).get("parameters", {})]
    if any(a != b and b.startswith(a + ".") for a in names_ for b in names_):
        return  # a name and its dotted child: fine for both, but the oracle's flattening can't tell them apart
    answer = wandb_oracle.ask("grid", config=doc, limit=2000)
    theirs = answer["points"]
    spec = parse_spec(doc)
    assert spec.grid_size == len(theirs) or len(theirs) == 2000
    assert spec.grid_size == wandb_oracle.ask("grid_size", config=doc)["size"]  # any size, counted without enumerating
    ours = grid_points(spec, len(theirs))
    assert typed(ours) == typed(theirs)
    # what the script receives: names as written, nested blocks as one mapping each
    assert typed([wandb_config(spec, p) for p in ours]) == typed(answer["configs"])


def test_equal_values_collapse_and_run_cap_takes_wandbs_first_points(wandb_oracle):
    doc = program_sweep(
        method="grid",
        run_cap=5,
        parameters={"b": {"values": [1, 1.0, {"x": 1, "y": 2}, {"y": 2, "x": 1}, "1"]}, "a": {"values": [True, 1]}},
    )
    theirs = wandb_oracle.ask("grid", config=doc, limit=5)["points"]
    spec = parse_spec(doc)
    assert spec.grid_size == 2 * 3
    assert typed(grid_points(spec, spec.run_cap)) == typed(theirs)


def test_a_billion_point_grid_is_counted_and_indexed_without_being_built():
    spec = parse_spec(program_sweep(method="grid", parameters={"a": {"min": 1, "max": 10**9}, "b": {"values": [1, 2]}}))
    assert spec.grid_size == 2 * 10**9
    from raysweep.spec.space import grid_point

    assert grid_point(spec, 2 * 10**9 - 1) == {"a": 10**9, "b": 2}


# --- samples: the same law and the same Python types ---------------------------------------------

LAWS = {
    "int_uniform": {"min": -2, "max": 5},
    "uniform": {"min": -1.0, "max": 3.0},
    "q_uniform": {"distribution": "q_uniform", "min": 0, "max": 10, "q": 2},
    "q_uniform_float": {"distribution": "q_uniform", "min": 0.0, "max": 1.0, "q": 0.25},
    "q_uniform_default_q": {"distribution": "q_uniform", "min": 0, "max": 10},
    "log_uniform_values": {"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-1},
    "q_log_uniform_values": {"distribution": "q_log_uniform_values", "min": 1, "max": 1000, "q": 5},
    "inv_log_uniform_values": {"distribution": "inv_log_uniform_values", "min": 0.01, "max": 10.0},
    "normal": {"distribution": "normal", "mu": 2.0, "sigma": 0.5},
    "q_normal": {"distribution": "q_normal", "mu": 10, "sigma": 3, "q": 2},
    "log_normal": {"distribution": "log_normal", "mu": 0.0, "sigma": 0.5},
    "categorical": {"values": ["a", "b", "c"], "probabilities": [0.2, 0.3, 0.5]},
    "beta": {"distribution": "beta", "a": 2, "b": 5},
    "q_beta": {"distribution": "q_beta", "a": 2, "b": 2, "q": 0.1},
    "q_log_normal": {"distribution": "q_log_normal", "mu": 2.0, "sigma": 0.5, "q": 1},
    "constant": {"value": 3},
    "categorical_plain": {"values": ["a", "b", "c"]},
    # W&B's schema flags the exponent laws; its engine (and raysweep) draw them: e^min .. e^max
    "log_uniform": {"distribution": "log_uniform", "min": -5, "max": 0},
    "q_log_uniform": {"distribution": "q_log_uniform", "min": 0, "max": 5, "q": 2},
    "inv_log_uniform": {"distribution": "inv_log_uniform", "min": 0, "max": 3},
}
BOUNDED = ("uniform", "log_uniform_values", "inv_log_uniform_values", "beta", "log_uniform", "inv_log_uniform")
N = 3000


@pytest.mark.parametrize("law", list(LAWS))
def test_samples_follow_wandbs_law_and_types(wandb_oracle, law):
    """Drawn through the Tune domains `method: random` uses (``first_configs``, as `run`): the
    same law, the same support and the same Python types as W&B's engine."""
    from raysweep.search.preview import first_configs

    doc = program_sweep(method="random", parameters={"x": LAWS[law]})
    theirs = wandb_oracle.ask("sample", config=doc, n=N, seed=0)
    ours = [c["x"] for c in first_configs(parse_spec(doc), N, seed=0)]
    assert {type(v).__name__ for v in ours} == {t["x"] for t in theirs["types"]}
    mine, their = [p for p in ours], [p["x"] for p in theirs["points"]]
    if isinstance(mine[0], (str, int)) or law.startswith("q_") or law == "constant":
        if len(set(their)) <= 30 and law not in ("q_normal", "q_log_normal"):  # a bounded support: the same values
            assert set(mine) == set(their), (sorted(set(mine)), sorted(set(their)))
    elif law in BOUNDED:  # the support: the same bounds, within 2% of the range
        span = max(their) - min(their)
        assert min(their) - 0.02 * span <= min(mine) and max(mine) <= max(their) + 0.02 * span, (min(mine), max(mine))
    if law == "constant":
        assert set(mine) == {3}
    elif law.startswith("categorical"):
        counts = [[xs.count(v) for v in "abc"] for xs in (mine, their)]
        assert stats.chi2_contingency(counts).pvalue > 1e-3, counts
    elif isinstance(mine[0], int) or law.startswith("q_"):  # discrete: same support, same frequencies
        support = sorted(set(mine) | set(their))
        counts = np.array([[xs.count(v) for v in support] for xs in (mine, their)]) + 1
        assert stats.chi2_contingency(counts).pvalue > 1e-3
    else:
        assert stats.ks_2samp(mine, their).pvalue > 1e-3


# --- hyperband: the same runs stopped on the same metric streams ----------------------------------


class _Trial:
    def __init__(self, trial_id: str):
        self.trial_id = trial_id


streams = st.lists(
    st.lists(st.sampled_from([1.0, 2.0, 3.0, 4.0, 5.0, 2.5]), min_size=1, max_size=9), min_size=2, max_size=6
)
early = st.one_of(
    st.fixed_dictionaries({"min_iter": st.integers(1, 3), "eta": st.sampled_from([2, 3]), "strict": st.booleans()}),
    st.fixed_dictionaries(
        {"max_iter": st.integers(3, 9), "s": st.integers(1, 3), "eta": st.sampled_from([2, 3]), "strict": st.booleans()}
    ),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    histories=streams, et=early, goal=st.sampled_from(["minimize", "maximize"]), order=st.randoms(use_true_random=False)
)
def test_hyperband_stops_the_runs_wandb_stops(wandb_oracle, histories, et, goal, order):
    """Reports arrive interleaved; after each, raysweep decides for the reporting run and W&B's
    engine is asked about every run in the same state; they must agree on the reporting run."""
    doc = program_sweep(
        method="random",
        parameters={"a": {"value": 1}},
        metric={"name": "m", "goal": goal},
        early_terminate={"type": "hyperband"} | et,
    )
    spec = parse_spec(doc)
    if spec.scheduler is None:
        return
    scheduler = WandbHyperband(
        spec.scheduler.bands,
        spec.scheduler.reduction_factor,
        spec.scheduler.strict,
        metric="m",
        mode="max" if goal == "maximize" else "min",
    )
    events = [i for i, h in enumerate(histories) for _ in h]
    order.shuffle(events)
    seen = [0] * len(histories)
    state = ["running"] * len(histories)
    for i in events:
        if state[i] != "running":
            continue
        value = histories[i][seen[i]]
        seen[i] += 1
        decision = scheduler.on_trial_result(None, _Trial(str(i)), {"m": value})
        runs = [{"name": str(k), "state": state[k], "history": histories[k][: seen[k]]} for k in range(len(histories))]
        theirs = wandb_oracle.ask("hyperband", config=doc, runs=runs)["stop"]
        assert (decision == "STOP") == (str(i) in theirs), (runs, theirs)
        if decision == "STOP":
            state[i] = "killed"  # what W&B calls a run its sweep stopped
        elif seen[i] == len(histories[i]):
            state[i] = "finished"


def test_hyperband_never_stops_a_run_for_its_length():
    """W&B has no iteration cap: a 200-report trial that keeps leading is never stopped."""
    scheduler = WandbHyperband(bands=(1, 3, 9, 27, 81), eta=3, metric="m", mode="min")
    for step in range(200):
        for k, value in enumerate((1.0, 5.0, 6.0)):
            decision = scheduler.on_trial_result(None, _Trial(str(k)), {"m": value})
            if k == 0:
                assert decision == "CONTINUE", step


# --- real files ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_sweep_files_run_as_under_wandb(wandb_oracle, path):
    """Each file, as W&B's CLI reads it (PyYAML), against W&B's engine: the same verdict under
    W&B's service (raysweep's default) and its local controller (--strict), or a difference
    docs/differences-from-wandb.md lists; where both run a grid, the same first 300 points and what the script gets."""
    as_wandb_reads = yaml.safe_load(path.read_text())
    wandb_part = json.loads(json.dumps({k: v for k, v in as_wandb_reads.items() if k != "raysweep"}, default=str))
    ours_doc = read_yaml(path)
    verdicts = {}
    for op, strict in (("cloud", False), ("verdict", True)):
        theirs = wandb_verdict(wandb_oracle, op, wandb_part)
        ok, problems = ours_accepts(ours_doc, strict)
        verdicts[op] = ok and theirs["ok"]
        if ok != theirs["ok"]:
            found = differences_in(as_wandb_reads, ours_doc, strict)
            assert found, f"{path.name} ({op}): raysweep {ok} {problems}, W&B {theirs['ok']} {theirs['errors']}"
    if verdicts["cloud"] and ours_doc.get("method") == "grid":
        spec = parse_spec(ours_doc)
        # the file as raysweep reads it: `1e-7` a number for both (scientific_notation)
        same_input = json.loads(json.dumps({k: v for k, v in ours_doc.items() if k != "raysweep"}))
        assert spec.grid_size == wandb_oracle.ask("grid_size", config=same_input)["size"]
        answer = wandb_oracle.ask("grid", config=same_input, limit=300)
        ours = grid_points(spec, len(answer["points"]))
        assert typed(ours) == typed(answer["points"])
        assert typed([wandb_config(spec, p) for p in ours]) == typed(answer["configs"])


def test_every_real_file_is_read():
    """The 40 real files steering keeps beside the project are part of the oracle's table."""
    shared = ROOT.parent / "shared" / "wandb_files"
    if shared.is_dir():
        assert len([p for p in FILES if p.parent == shared]) == len(list(shared.glob("*.y*ml"))) >= 40


# --- the documented differences (docs/differences-from-wandb.md) ----------------------------------


def _strings_as_numbers(node: object) -> bool:
    """A string PyYAML leaves as such that raysweep reads as a number (``1e-5``)."""
    if isinstance(node, dict):
        return any(_strings_as_numbers(v) for v in node.values())
    if isinstance(node, list):
        return any(_strings_as_numbers(v) for v in node)
    return isinstance(node, str) and finite_number(number(node))


def _non_finite(node: object) -> bool:
    if isinstance(node, dict):
        return any(_non_finite(v) for v in node.values())
    if isinstance(node, list):
        return any(_non_finite(v) for v in node)
    return isinstance(node, float) and not math.isfinite(node)


def _params(doc: dict) -> list[dict]:
    out, todo = [], [doc.get("parameters") or {}]
    while todo:
        for entry in todo.pop().values():
            if isinstance(entry, dict):
                out.append(entry)
                todo.append(entry.get("parameters") or {})
    return out


def _no_band(doc: dict) -> bool:
    early = doc.get("early_terminate")
    if not isinstance(early, dict) or "min_iter" in early:
        return False
    return not wandb_bands(None, early.get("max_iter"), early.get("s"), early.get("eta", 3))


# Each difference docs/differences-from-wandb.md lists: the phrase that begins its bullet, and, for a difference in which
# files raysweep runs or refuses, a test of whether a file (as W&B reads it, as raysweep reads it)
# shows it, and the verdicts it gives under W&B's service ("cloud", raysweep's default) or its
# local controller ("strict").
DIFFERENCES = {
    "scientific_notation": (
        "`1e-5` is a number",
        lambda raw, doc: _strings_as_numbers(raw.get("parameters")),
        ("cloud", "strict"),
    ),
    "non_finite": ("NaN and infinity in a spec are refused", lambda raw, doc: _non_finite(raw), ("cloud",)),
    "no_band": (
        "A hyperband whose `max_iter`, `s` and `eta` give no band",
        lambda raw, doc: _no_band(doc),
        ("strict",),
    ),
    "nothing_to_run": (
        "A file with nothing to run",
        lambda raw, doc: (
            not ({"program", "raysweep", "train_loop"} & set(doc))
            and all("${program}" in str(c) for c in doc.get("command") or ["${program}"])
        ),
        ("cloud", "strict"),
    ),
    "impute_bayes": (
        "`metric.impute` and `metric.impute_while_running`",
        lambda raw, doc: (
            doc.get("method") == "bayes"
            and isinstance(doc.get("metric"), dict)
            and bool({"impute", "impute_while_running"} & set(doc["metric"]))
        ),
        ("cloud", "strict"),
    ),
    "launch_keys": (
        "`controller` is ignored; W&B Launch's",
        lambda raw, doc: bool({"job", "image_uri"} & set(doc)),
        ("cloud",),
    ),
    "custom_without_engine": (
        "`method: custom` without a `scheduler` of engine optuna",
        lambda raw, doc: (
            doc.get("method") == "custom"
            and not (isinstance(doc.get("scheduler"), dict) and doc["scheduler"].get("engine") in ("optuna", "ax"))
        ),
        ("strict",),
    ),
    "unknown_macro": (
        "A `command` chunk that is a whole unknown macro",
        lambda raw, doc: any(
            (m := MACRO.fullmatch(str(c))) and m.group(1) not in COMMAND_MACROS and not m.group(1).startswith("envvar:")
            for c in doc.get("command") or []
        ),
        ("cloud", "strict"),
    ),
    "run_cap_zero": ("`run_cap: 0` is refused", lambda raw, doc: doc.get("run_cap") == 0, ("cloud",)),
    "probabilities_sum": (
        "`probabilities` that do not sum to 1",
        lambda raw, doc: any(
            isinstance(p.get("probabilities"), list) and not math.isclose(sum(p["probabilities"]), 1.0, abs_tol=1e-6)
            for p in _params(doc)
        ),
        ("cloud",),
    ),
    # Behaviour, not verdicts: the test that checks each.
    "hyperband_per_report": ("W&B's server applies hyperband to every running run", None, ()),
    "seeded_engine": ("W&B's scheduler makes its default study or client unseeded", None, ()),
    "sweep_id": ("Offline runs carry no W&B sweep id", None, ()),
}
BEHAVIOUR_TESTS = {
    "hyperband_per_report": "test_hyperband_stops_the_runs_wandb_stops",
    "seeded_engine": "test_the_default_study_is_wandbs_own_with_the_sweeps_seed",
    "sweep_id": "test_every_run_of_every_rank_names_the_wandb_sweep_and_no_other",
}


def differences_in(raw: dict, doc: dict, strict: bool) -> list[str]:
    """The documented differences a file shows under this verdict (``strict``: the local controller's)."""
    mode = "strict" if strict else "cloud"
    return [name for name, (_, shows, modes) in DIFFERENCES.items() if shows and mode in modes and shows(raw, doc)]


EXAMPLES = {
    "scientific_notation": ("method: random\nprogram: t.py\nparameters:\n  lr: {min: 1e-5, max: 1e-2}\n", True),
    "non_finite": ("method: random\nprogram: t.py\nparameters:\n  x: {values: [.nan, 1]}\n", False),
    "no_band": (
        "method: random\nprogram: t.py\nmetric: {name: m}\nparameters:\n  x: {value: 1}\n"
        "early_terminate: {type: hyperband, max_iter: 2, s: 1}\n",
        False,
    ),
    "nothing_to_run": ("method: random\nparameters:\n  x: {value: 1}\n", False),
    "impute_bayes": (
        "method: bayes\nprogram: t.py\nmetric: {name: m, impute: worst}\nparameters:\n  x: {min: 0.0, max: 1.0}\n",
        False,
    ),
    "launch_keys": ("method: random\nprogram: t.py\nparameters:\n  x: {value: 1}\njob: wandb/jobs/j:latest\n", False),
    "custom_without_engine": (
        "method: custom\nprogram: t.py\nmetric: {name: m}\nparameters:\n  x: {value: 1}\n",
        False,
    ),
    "unknown_macro": (
        "method: random\nprogram: t.py\ncommand: [python, '${program}', '${args_no_hyphen}']\n"
        "parameters:\n  x: {value: 1}\n",
        False,
    ),
    "run_cap_zero": ("method: random\nprogram: t.py\nrun_cap: 0\nparameters:\n  x: {value: 1}\n", False),
    "probabilities_sum": (
        "method: random\nprogram: t.py\nparameters:\n  x: {values: [1, 2], probabilities: [0.5, 0.6]}\n",
        False,
    ),
}


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_documented_differences(tmp_path, wandb_oracle, name):
    """An example of each difference: raysweep's verdict, and W&B's other one."""
    text, ours_ok = EXAMPLES[name]
    _, shows, modes = DIFFERENCES[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    raw = yaml.safe_load(text)
    for mode in modes:
        try:
            load_spec(path, strict=mode == "strict")
            ok = True
        except SpecError:
            ok = False
        assert ok == ours_ok
        theirs = wandb_verdict(wandb_oracle, "cloud" if mode == "cloud" else "verdict", raw)
        assert theirs["ok"] != ours_ok, (
            f"no longer a difference under W&B's {mode} verdict: take it off docs/differences-from-wandb.md"
        )
        assert shows(raw, read_yaml(path))


def test_every_documented_difference_has_a_test_and_every_test_a_bullet():
    section = (ROOT / "docs" / "differences-from-wandb.md").read_text().split("\n## ", 1)[0]
    bullets = [b.strip() for b in section.split("\n- ")[1:]]
    for name, (phrase, _, _) in DIFFERENCES.items():
        assert sum(b.startswith(phrase) for b in bullets) == 1, (
            f"{name}: no bullet of docs/differences-from-wandb.md begins {phrase!r}"
        )
        assert name in EXAMPLES or name in BEHAVIOUR_TESTS, name
    for bullet in bullets:
        assert any(bullet.startswith(phrase) for phrase, _, _ in DIFFERENCES.values()), (
            f"a bullet of docs/differences-from-wandb.md with no test: {bullet[:60]!r}"
        )
    tests = "".join(path.read_text() for path in (ROOT / "tests").rglob("test_*.py"))
    for test in BEHAVIOUR_TESTS.values():
        assert f"def {test}(" in tests, test


def test_q_uniform_default_q_is_wandbs_float():
    p = parse_spec(
        program_sweep(method="random", parameters={"x": {"distribution": "q_uniform", "min": 0, "max": 3}})
    ).parameters[0]
    assert isinstance(p, Param) and p.q == 1.0 and isinstance(p.sample(np.random.default_rng(0)), float)
    assert not math.isnan(p.q)
