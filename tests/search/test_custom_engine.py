"""``method: custom`` with engine optuna (``search/custom.py``), warm start (``search/warm_start.py``)
and the Pareto front (``runs/pareto.py``), driven by hand as Tune drives a searcher (suggest, then
complete): no cluster. The run-dir checks of a real sweep are in tests/driver/test_driver.py."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
from conftest import ROOT

from raysweep.errors import UserError
from raysweep.private_api import optuna_study
from raysweep.runs.pareto import dominates, front, hypervolume_2d, objective_values
from raysweep.runs.priors import Prior, read_priors
from raysweep.search.custom import build, sample_sizes, space_of
from raysweep.search.warm_start import fitting
from raysweep.spec import parse_spec
from raysweep.spec.model import Metric

SPACE = ROOT / "tests" / "support" / "specs" / "conditional"
optuna.logging.set_verbosity(optuna.logging.ERROR)


def custom(seed: int = 0, **doc):
    base = {"method": "custom", "scheduler": {"engine": "optuna"}, "raysweep": {"train_loop": "l:f", "seed": seed}}
    return parse_spec(base | doc, base_dir=SPACE)


def drive(spec, tmp_path: Path, score, n: int, told=None) -> list[tuple[dict, tuple]]:
    """``n`` trials of the engine's search, each scored at once by ``score(config)`` (a dict of metrics)."""
    search, _ = build(spec, n, tmp_path, None, told)
    search.set_search_properties(None, None, {})
    out = []
    for i in range(n):
        config = search.suggest(f"t{i}")
        result = score(config) | {"config": config}
        search.on_trial_complete(f"t{i}", result)
        out.append((config, tuple(result.get(g.name) for g in spec.goals)))
    return out


def two_quadratics(config: dict) -> dict:
    """Two objectives at odds in x0, x1; the other parameters cost both (a known front: x2.. = 0.5)."""
    rest = sum((v - 0.5) ** 2 for k, v in config.items() if k not in ("x0", "x1"))
    return {
        "f1": config["x0"] ** 2 + config["x1"] ** 2 + rest,
        "f2": (config["x0"] - 1) ** 2 + (config["x1"] - 1) ** 2 + rest,
    }


def test_several_objectives_find_a_front_that_dominates_random_searchs_for_the_same_seed(tmp_path):
    """Optuna's multi-objective TPE against Optuna's random sampler (the user's optimizer()), 40 trials
    each, seed 1, four parameters: the front found beats random's on hypervolume, and every point of
    random's front is matched or beaten by one of it."""
    params = {f"x{i}": {"min": 0.0, "max": 1.0} for i in range(4)}
    metrics = [{"name": "f1"}, {"name": "f2"}]
    tpe = custom(seed=1, metrics=metrics, parameters=params)
    rand_file = tmp_path / "rand.py"
    rand_file.write_text("import optuna\ndef make():\n    return optuna.samplers.RandomSampler(seed=1)\n")
    rand = custom(
        seed=1,
        metrics=metrics,
        parameters=params,
        scheduler={"engine": "optuna", "source": str(rand_file), "optimizer": "make"},
    )
    goals = tpe.objectives
    fronts = []
    for spec, where in ((tpe, tmp_path / "tpe"), (rand, tmp_path / "rand")):
        where.mkdir()
        points = [values for _, values in drive(spec, where, two_quadratics, 40)]
        fronts.append([p for p, on in zip(points, front(points, goals), strict=True) if on])
    ours, theirs = fronts
    assert hypervolume_2d(ours, goals, (3.0, 3.0)) > hypervolume_2d(theirs, goals, (3.0, 3.0))
    assert all(any(p == q or dominates(p, q, goals) for p in ours) for q in theirs)


def test_a_trial_without_every_objective_is_failed_for_the_optimizer_and_cost_hours_is_measured(tmp_path):
    spec = custom(metrics=[{"name": "loss"}, {"name": "cost_hours"}], parameters={"num_gpus": {"values": [2]}})
    search, _ = build(spec, 2, tmp_path, None)
    search.set_search_properties(None, None, {})
    for trial_id, result in (("a", {"loss": 0.5, "time_total_s": 1800.0}), ("b", {"time_total_s": 10.0})):
        config = search.suggest(trial_id)
        search.on_trial_complete(trial_id, result | {"config": config})
    finished = sorted(optuna_study(search).trials, key=lambda t: t.number)
    assert finished[0].state == optuna.trial.TrialState.COMPLETE and finished[0].values == [0.5, 1.0]  # 2 x 1800 s
    assert finished[1].state == optuna.trial.TrialState.FAIL  # no loss: W&B fails such a run for the optimizer


def test_a_define_by_run_space_keeps_each_branchs_parameters_and_sizes_come_from_it(tmp_path):
    spec = custom(
        metric={"name": "score"}, scheduler={"engine": "optuna", "source": "space.py", "search_space": "space"}
    )
    configs = [config for config, _ in drive(spec, tmp_path, lambda c: {"score": c["x"]}, 12)]
    for config in configs:
        assert config["epochs"] == 2  # the returned dict, merged in
        branch = {"width"} if config["model"] == "shallow" else {"depth"}
        other = {"depth"} if config["model"] == "shallow" else {"width"}
        assert branch <= set(config) and not other & set(config)
        assert config["num_gpus"] == (1 if config["model"] == "shallow" else 2)
    assert {c["model"] for c in configs} == {"shallow", "deep"}
    assert set(sample_sizes(spec)) == {1, 2}


def test_a_run_suggestion_gives_its_config_and_a_study_gives_its_sampler(tmp_path):
    spec = custom(
        metric={"name": "score"}, scheduler={"engine": "optuna", "source": "space.py", "search_space": "as_suggestion"}
    )
    ((config, _),) = drive(spec, tmp_path, lambda c: {"score": c["x"]}, 1)
    assert set(config) == {"x", "epochs"} and config["epochs"] == 1
    wrong = custom(
        metric={"name": "score"},
        parameters={"x": {"min": 0.0, "max": 1.0}},
        scheduler={"engine": "optuna", "source": "space.py", "optimizer": "study"},
    )
    with pytest.raises(
        UserError,
        match=r"returned a study of directions \['minimize', 'minimize'\], and the sweep's goals are \['minimize'\]",
    ):
        build(wrong, 1, tmp_path, None)
    odd = custom(
        metric={"name": "score"},
        parameters={"x": {"min": 0.0, "max": 1.0}},
        scheduler={"engine": "optuna", "source": "space.py", "optimizer": "not_an_optimizer"},
    )
    with pytest.raises(UserError, match="returned a int; engine optuna takes an optuna.Study or an optuna sampler"):
        build(odd, 1, tmp_path, None)


def quadratic(config: dict) -> dict:
    return {"score": (config["x"] - 0.71) ** 2 + (config["y"] - 0.23) ** 2}


def test_a_warm_start_reaches_the_earlier_sweeps_best_in_fewer_new_trials_than_a_cold_start(tmp_path):
    """An earlier sweep of 30 trials (seed 0); a new one (seed 1) cold, and warm-started from it: the
    number of new trials until one scores at least as well as the earlier best."""
    params = {"x": {"min": 0.0, "max": 1.0}, "y": {"min": 0.0, "max": 1.0}}
    (tmp_path / "a").mkdir()
    earlier = drive(custom(seed=0, metric={"name": "score"}, parameters=params), tmp_path / "a", quadratic, 30)
    best = min(values[0] for _, values in earlier)
    new = custom(seed=1, metric={"name": "score"}, parameters=params)
    told = fitting(space_of(new), [Prior(config, values) for config, values in earlier], 1)
    assert len(told) == 30

    def trials_to_reach(told_first) -> int:
        where = tmp_path / ("warm" if told_first else "cold")
        where.mkdir()
        scores = [values[0] for _, values in drive(new, where, quadratic, 40, told_first)]
        return next((i + 1 for i, s in enumerate(scores) if s <= best), 41)

    assert trials_to_reach(told) < trials_to_reach(None)


def test_a_prior_outside_this_sweeps_space_is_not_told(tmp_path):
    narrow = custom(metric={"name": "score"}, parameters={"x": {"min": 0.0, "max": 0.5}})
    priors = [Prior({"x": 0.25}, (1.0,)), Prior({"x": 0.75}, (0.5,)), Prior({"y": 0.1}, (0.2,))]
    assert [t.params for t in fitting(space_of(narrow), priors, 1)] == [{"x": 0.25}]
    branchy = custom(
        metric={"name": "score"}, scheduler={"engine": "optuna", "source": "space.py", "search_space": "space"}
    )
    deep = {"model": "deep", "depth": 3, "num_gpus": 2, "x": 0.5, "epochs": 2}
    no_depth = {k: v for k, v in deep.items() if k != "depth"}  # the deep branch asks for a depth it lacks
    wider = deep | {"width": 9}  # a parameter this space no longer has: what it does have replays
    assert [
        t.params.get("depth")
        for t in fitting(space_of(branchy), [Prior(deep, (1.0,)), Prior(no_depth, (1.0,)), Prior(wider, (1.0,))], 1)
    ] == [3, 3]


def test_warm_start_reads_the_done_trials_of_run_dirs_with_every_objective(tmp_path):
    run_dir = tmp_path / "earlier"
    run_dir.mkdir()
    (run_dir / "spec.json").write_text("{}")
    rows = [
        {
            "trial_id": "a",
            "status": "done",
            "config": {"x": 0.1},
            "metrics": {"loss": 1.0, "time_total_s": 36.0},
            "num_workers": 2,
        },
        {"trial_id": "b", "status": "failed", "config": {"x": 0.2}, "metrics": {}},
        {"trial_id": "c", "status": "done", "config": {"x": 0.3}, "metrics": {"acc": 0.5}},
    ]
    (run_dir / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    warm = read_priors([run_dir], (Metric("loss"), Metric("cost_hours")))
    assert warm.priors == [Prior({"x": 0.1}, (1.0, 0.02))]
    assert warm.left_out == {"not done (failed)": 1, "without loss and cost_hours in its last report": 1}
    warm.told(1)
    assert warm.sentence().startswith("warm start: told 1 finished trial(s) of 1 earlier sweep(s)")


def test_the_front_and_its_hypervolume_by_hand():
    goals = (Metric("loss"), Metric("acc", "maximize"))
    points = [(1.0, 0.5), (2.0, 0.9), (1.5, 0.4), None, (1.0, 0.5)]
    assert front(points, goals) == [True, True, False, False, True]  # a tie is on the front twice
    assert hypervolume_2d([(1.0, 0.5), (2.0, 0.9)], goals, (3.0, 0.0)) == pytest.approx(2 * 0.5 + 1 * 0.4)
    assert objective_values({"loss": 1.0, "time_total_s": 3600.0}, 4, (Metric("loss"), Metric("cost_hours"))) == (
        1.0,
        4.0,
    )
