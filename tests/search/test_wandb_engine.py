"""W&B's new format as its released scheduler runs it (``search/wandb_optimizer.py``,
``search/wandb_engine.py``): W&B's own optimizer behind Tune's ``Searcher``, driven by hand as Tune
drives it (suggest, report, complete), with no cluster; W&B's own objects built beside it are the
oracle. Warm start (``search/warm_start.py``) and the Pareto front (``runs/pareto.py``) too. A real
sweep through Tune is in tests/driver/test_driver.py."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import optuna
import pytest
from conftest import ROOT
from wandb_scheduler import sweep_info

from raysweep.errors import UserError
from raysweep.runs.pareto import dominates, front, hypervolume_2d
from raysweep.runs.priors import Prior, read_priors
from raysweep.search.schedulers import build_scheduler
from raysweep.search.wandb_engine import EngineSearch, told_priors
from raysweep.search.wandb_optimizer import build_optimizer, checked, first_configs, sample_sizes
from raysweep.spec import parse_spec
from raysweep.spec.objectives import Metric, Objectives

SPACE = ROOT / "tests" / "support" / "specs" / "conditional"
X = {"x": {"min": 0.0, "max": 1.0}}
optuna.logging.set_verbosity(optuna.logging.ERROR)


def custom(seed: int = 0, engine: str = "optuna", **doc):
    base = {"method": "custom", "scheduler": {"engine": engine}, "raysweep": {"train_loop": "l:f", "seed": seed}}
    return parse_spec(base | doc, base_dir=SPACE)


def drive(spec, score, n: int, told=None, search: EngineSearch | None = None) -> list[tuple[dict, tuple]]:
    """``n`` trials of the engine's search, each reported once and ended with ``score(config)``."""
    search = search or EngineSearch(spec, seed=spec.seed, told=told)
    out = []
    for i in range(n):
        config = search.suggest(f"t{i}")
        if config in (None, EngineSearch.FINISHED):
            break
        result = score(config) | {"training_iteration": 1, "time_total_s": 1.0}
        search.on_trial_result(f"t{i}", result)
        search.on_trial_complete(f"t{i}", result)
        out.append((config, tuple(result.get(g.name) for g in spec.objectives)))
    return out


def two_quadratics(config: dict) -> dict:
    """Two objectives at odds in x0, x1; the other parameters cost both (a known front: x2.. = 0.5)."""
    rest = sum((v - 0.5) ** 2 for k, v in config.items() if k not in ("x0", "x1"))
    return {
        "f1": config["x0"] ** 2 + config["x1"] ** 2 + rest,
        "f2": (config["x0"] - 1) ** 2 + (config["x1"] - 1) ** 2 + rest,
    }


def test_the_default_study_is_wandbs_own_with_the_sweeps_seed():
    """W&B's default study (its directions, no pruner, TPE), made with the sweep's seed: two builds
    propose the same configurations, as ``validate --sample`` and ``run --seed`` must."""
    from wandb.sdk.sweeps.scheduler.optuna import create_study_from_sweep_config

    spec = custom(seed=5, metrics=[{"name": "a"}, {"name": "b", "goal": "maximize"}], parameters=X)
    ours = build_optimizer(spec).optimizer.study
    theirs = create_study_from_sweep_config(sweep_info(spec.wandb_document, SPACE).config)
    assert ours.directions == theirs.directions and type(ours.pruner) is type(theirs.pruner)
    assert type(ours.sampler) is type(theirs.sampler) is optuna.samplers.TPESampler
    assert first_configs(spec, 4) == first_configs(spec, 4) != first_configs(custom(seed=6, **spec.wandb_document), 4)


def test_a_users_seeded_study_proposes_what_wandbs_scheduler_proposes():
    """The user's optimizer(sweep_info), its sampler seeded: raysweep's trials are W&B's runs."""
    from wandb.sdk.sweeps.scheduler.optuna import build_optuna_optimizer

    doc = {"metrics": [{"name": "a"}, {"name": "b"}], "parameters": X}
    spec = custom(**doc, scheduler={"engine": "optuna", "source": "space.py", "optimizer": "study"})
    theirs = build_optuna_optimizer(sweep_info(spec.wandb_document, SPACE)).ask_n_runs(5)
    assert [c for c, _ in drive(spec, lambda c: {"a": c["x"], "b": 1 - c["x"]}, 5)] == [
        s.config.flat_dict() for s in theirs
    ]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_several_objectives_find_a_front_of_more_hypervolume_than_random_searchs(seed):
    """W&B's default multi-objective study (TPE) against the user's random study, 40 trials each,
    four parameters: the front TPE finds dominates more of the objectives' space."""
    params = {f"x{i}": {"min": 0.0, "max": 1.0} for i in range(4)}
    metrics = [{"name": "f1"}, {"name": "f2"}]
    tpe = custom(seed=seed, metrics=metrics, parameters=params)
    rand = custom(
        seed=seed,
        metrics=metrics,
        parameters=params,
        scheduler={"engine": "optuna", "source": "space.py", "optimizer": "study"},
    )
    goals = tpe.objectives
    volumes = []
    for spec in (tpe, rand):
        points = [values for _, values in drive(spec, two_quadratics, 40)]
        on = [p for p, flag in zip(points, front(points, goals), strict=True) if flag]
        assert on and all(not any(dominates(q, p, goals) for q in points) for p in on)
        volumes.append(hypervolume_2d(on, goals, (3.0, 3.0)))
    assert volumes[0] > volumes[1], volumes


def test_a_trial_without_every_objective_is_failed_for_the_optimizer_and_cost_hours_is_measured():
    spec = custom(metrics=[{"name": "loss"}, {"name": "cost_hours"}], parameters={"num_gpus": {"values": [2]}})
    search = EngineSearch(spec, seed=0)
    for trial_id, result in (("a", {"loss": 0.5, "time_total_s": 1800.0}), ("b", {"time_total_s": 10.0})):
        search.suggest(trial_id)
        search.on_trial_complete(trial_id, result)
    finished = sorted(search.optimizer.study.trials, key=lambda t: t.number)
    assert finished[0].state == optuna.trial.TrialState.COMPLETE and finished[0].values == [0.5, 1.0]  # 2 x 1800 s
    assert finished[1].state == optuna.trial.TrialState.FAIL  # no loss: W&B fails such a run for the optimizer


def test_a_define_by_run_space_gives_the_dict_it_returns_and_the_trial_sizes_it_chose():
    spec = custom(
        metric={"name": "score"}, scheduler={"engine": "optuna", "source": "space.py", "search_space": "space"}
    )
    configs = [config for config, _ in drive(spec, lambda c: {"score": c["x"]}, 12)]
    for config in configs:
        own, other = ("width", "depth") if config["model"] == "shallow" else ("depth", "width")
        assert own in config and other not in config and config["epochs"] == 2
        assert config["num_gpus"] == (1 if config["model"] == "shallow" else 2)
    assert {c["model"] for c in configs} == {"shallow", "deep"}
    assert set(sample_sizes(spec)) == {1, 2}
    assert checked(spec)[0].world_sizes == {1, 2}


@pytest.mark.parametrize(
    ("key", "name", "says"),
    [
        ("search_space", "suggests_only", r"'suggests_only' in .*space.py returned NoneType, not a dict"),
        ("optimizer", "a_sampler", r"'a_sampler' in .*space.py returned TPESampler instead of optuna.Study"),
        ("optimizer", "no_arguments", r"'no_arguments' in .*space.py cannot be called with one SweepInfo argument"),
        ("optimizer", "maximizing", r"Study direction 'maximize' does not match the sweep metric goal 'minimize'"),
    ],
)
def test_what_wandbs_scheduler_refuses_at_start_is_refused_with_its_sentence(key, name, says):
    spec = custom(
        metric={"name": "score"}, parameters=X, scheduler={"engine": "optuna", "source": "space.py", key: name}
    )
    with pytest.raises(UserError, match=r"scheduler: W&B's sweep scheduler refuses this sweep at start: " + says):
        checked(spec)


def test_a_terminator_ends_the_search_with_a_sentence_that_names_it():
    spec = custom(
        metric={"name": "score"},
        parameters=X,
        scheduler={"engine": "optuna", "source": "space.py", "optimizer": "study_and_terminator"},
    )
    search = EngineSearch(spec, seed=0)
    ran = drive(spec, lambda c: {"score": c["x"]}, 10, search=search)
    assert len(ran) == 3 and search.suggest("t4") == EngineSearch.FINISHED
    assert (
        search.end == "the terminator that study_and_terminator() in space.py returned ended the search after 3 trials"
    )


def test_a_study_with_a_pruner_stops_trials_through_tunes_scheduler():
    """The user's study has a MedianPruner: W&B's optimizer prunes a trial whose second report is
    worse than the median; the sweep's Tune scheduler stops it there and records it as stopped."""
    spec = custom(
        metric={"name": "score"},
        parameters=X,
        scheduler={"engine": "optuna", "source": "space.py", "optimizer": "pruning"},
    )
    search = EngineSearch(spec, seed=0)
    scheduler = build_scheduler(spec)
    scheduler.watch(spec, None)
    scheduler.watch_engine(search)
    decisions = {}
    for trial_id, scores in (("good", [0.1, 0.1, 0.1]), ("bad", [0.9, 0.9, 0.9])):
        search.suggest(trial_id)
        for step, score in enumerate(scores, 1):
            decisions[trial_id] = scheduler.on_trial_result(
                None, _Trial(trial_id), {"score": score, "training_iteration": step}
            )
            if decisions[trial_id] == "STOP":
                break
        search.on_trial_complete(trial_id, {"score": scores[-1], "training_iteration": step})
    assert decisions == {"good": "CONTINUE", "bad": "STOP"} and scheduler.stopped == {"bad"}
    states = [t.state for t in search.optimizer.study.trials]
    assert states == [optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED]


class _Trial:
    def __init__(self, trial_id: str):
        self.trial_id = trial_id


def test_a_saved_search_goes_on_as_wandbs_scheduler_restarts_telling_the_ended_and_adopting_the_running():
    spec = custom(metric={"name": "score"}, parameters=X)
    search = EngineSearch(spec, seed=0)
    drive(spec, lambda c: {"score": c["x"]}, 3, search=search)
    running = search.suggest("r")
    restored = pickle.loads(pickle.dumps(search))
    assert restored._optimizer is None  # rebuilt, not unpickled
    study = restored.optimizer.study
    states = sorted(t.state.name for t in study.trials)
    assert states == ["COMPLETE", "COMPLETE", "COMPLETE", "RUNNING"]
    restored.on_trial_complete("r", {"score": 0.5, "training_iteration": 1})
    adopted = next(t for t in study.trials if t.params == running)
    assert adopted.state == optuna.trial.TrialState.COMPLETE and adopted.value == 0.5
    assert restored.suggest("n") not in (None, EngineSearch.FINISHED)


def quadratic(config: dict) -> dict:
    return {"score": (config["x"] - 0.71) ** 2 + (config["y"] - 0.23) ** 2}


def test_a_warm_start_reaches_the_earlier_sweeps_best_in_fewer_new_trials_than_a_cold_start():
    """An earlier sweep of 30 trials (seed 0); a new one (seed 1) cold, and warm-started from it (W&B's
    tell_existing_finished_run): the number of new trials until one scores at least as well as the
    earlier best."""
    params = {"x": {"min": 0.0, "max": 1.0}, "y": {"min": 0.0, "max": 1.0}}
    earlier = drive(custom(seed=0, metric={"name": "score"}, parameters=params), quadratic, 30)
    best = min(values[0] for _, values in earlier)
    new = custom(seed=1, metric={"name": "score"}, parameters=params)
    told = told_priors(new, [Prior(config, values) for config, values in earlier])

    def trials_to_reach(told_first) -> int:
        scores = [values[0] for _, values in drive(new, quadratic, 40, told_first)]
        return next((i + 1 for i, s in enumerate(scores) if s <= best), 41)

    assert trials_to_reach(told) < trials_to_reach(None)


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
    warm = read_priors([run_dir], Objectives((Metric("loss"), Metric("cost_hours"))))
    assert warm.priors == [Prior({"x": 0.1}, (1.0, 0.02))]
    assert warm.left_out == {"not done (failed)": 1, "without loss and cost_hours in its last report": 1}
    warm.told(1)
    assert warm.sentence().startswith("warm start: told 1 finished trial(s) of 1 earlier sweep(s)")


def test_the_front_and_its_hypervolume_by_hand():
    goals = Objectives((Metric("loss"), Metric("acc", "maximize")))
    points = [(1.0, 0.5), (2.0, 0.9), (1.5, 0.4), None, (1.0, 0.5)]
    assert front(points, goals) == [True, True, False, False, True]  # a tie is on the front twice
    assert hypervolume_2d([(1.0, 0.5), (2.0, 0.9)], goals, (3.0, 0.0)) == pytest.approx(2 * 0.5 + 1 * 0.4)
    cost = Objectives((Metric("loss"), Metric("cost_hours")))
    assert cost.values({"loss": 1.0, "time_total_s": 3600.0}, 4) == (1.0, 4.0)


# --- engine ax: W&B's AxOptimizer ---------------------------------------------------------------


def test_each_kind_of_parameter_reaches_ax_as_wandb_converts_it():
    spec = custom(
        engine="ax",
        metric={"name": "score"},
        parameters={
            "x": {"min": 0.0, "max": 1.0},
            "lr": {"distribution": "log_uniform_values", "min": 1e-5, "max": 1e-1},
            "n": {"distribution": "int_uniform", "min": 1, "max": 8},
            "batch": {"values": [16, 32, 64]},
            "fixed": {"value": 3},
        },
    )
    for config, _ in drive(spec, lambda c: {"score": c["x"]}, 4):
        assert set(config) == {"x", "lr", "n", "batch", "fixed"}, config
        assert 0 <= config["x"] <= 1 and 1e-5 <= config["lr"] <= 1e-1 and config["n"] in range(1, 9)
        assert config["batch"] in (16, 32, 64) and config["fixed"] == 3


def test_while_ax_waits_for_the_running_trials_data_it_proposes_nothing_and_goes_on_after():
    """Ax's first points (Sobol) all proposed, none finished: W&B's optimizer declines (None), which
    Tune must see as "nothing now" (it asks again when a trial ends), not as the sweep's end."""
    spec = custom(engine="ax", metric={"name": "score"}, parameters=X)
    search = EngineSearch(spec, seed=0)
    running = {f"t{i}": search.suggest(f"t{i}") for i in range(8)}
    proposed = [t for t, config in running.items() if config is not None]
    assert 0 < len(proposed) < 8, running
    for t in proposed:
        search.on_trial_complete(t, {"score": running[t]["x"]})
    assert search.suggest("after") not in (None, EngineSearch.FINISHED) and search.end is None


def test_ax_fails_a_trial_without_every_objective_and_keeps_a_metrics_name():
    spec = custom(engine="ax", metrics=[{"name": "val-loss"}, {"name": "cost_hours"}], parameters=X)
    search = EngineSearch(spec, seed=0)
    for trial_id, result in (("a", {"val-loss": 0.5, "time_total_s": 1800.0}), ("b", {"time_total_s": 10.0})):
        search.suggest(trial_id)
        search.on_trial_complete(trial_id, result)
    frame = search.optimizer.client.summarize()
    assert list(frame["trial_status"]) == ["COMPLETED", "FAILED"]
    assert frame.loc[0, "val-loss"] == 0.5 and frame.loc[0, "cost_hours"] == 0.5  # 1 worker x 1800 s; the name kept


def test_a_saved_ax_search_goes_on_with_its_running_trials():
    spec = custom(engine="ax", metric={"name": "score"}, parameters=X)
    search = EngineSearch(spec, seed=0)
    running = {t: search.suggest(t) for t in ("a", "b")}
    again = pickle.loads(pickle.dumps(search))
    again.on_trial_complete("a", {"score": 1.0})
    frame = again.optimizer.client.summarize()
    assert sorted(frame["trial_status"]) == ["COMPLETED", "RUNNING"]
    assert frame.loc[frame["trial_status"] == "COMPLETED", "x"].item() == pytest.approx(running["a"]["x"])
    assert again.suggest("c") is not None


def test_a_users_ax_client_is_taken_and_anything_else_refused(tmp_path: Path):
    source = tmp_path / "opt.py"
    source.write_text(
        "from ax import Client, RangeParameterConfig\n"
        "from wandb.sdk.sweeps.scheduler.ax import configure_sweep_objective\n"
        "def client(info):\n    c = Client(random_seed=7)\n"
        "    c.configure_experiment(parameters=[RangeParameterConfig('y', (0.0, 1.0), 'float')])\n"
        "    configure_sweep_objective(c, info.config)\n    return c\n"
        "def bare(info):\n    return Client()\n"
        "def study(info):\n    return 'not a client'\n"
    )

    def spec(optimizer: str):
        engine = {"engine": "ax", "source": str(source), "optimizer": optimizer}
        return custom(engine="ax", metric={"name": "score"}, parameters=X, scheduler=engine)

    assert set(first_configs(spec("client"), 1)[0]) == {"y"}  # the client's own experiment
    with pytest.raises(UserError, match="returned str instead of ax.Client"):
        checked(spec("study"))
    with pytest.raises(UserError, match="Experiment not set. Please call configure_experiment"):
        checked(spec("bare"))
