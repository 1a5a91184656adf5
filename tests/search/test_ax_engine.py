"""``scheduler: {engine: ax}`` (``search/ax_engine.py``): raysweep's Ax searcher, driven by hand as
Tune drives a searcher (suggest, then complete): no cluster. A real sweep through Tune is in
tests/driver/test_driver.py."""

from __future__ import annotations

import pickle

import pytest
from test_custom_engine import custom

from raysweep.errors import UserError
from raysweep.runs.priors import Prior
from raysweep.search.ax_engine import AxEngineSearch, AxSpace, quiet_ax
from raysweep.search.custom import build, load_source, space_of
from raysweep.search.warm_start import fitting

quiet_ax()
MIXED = [None, "a", 2.5]  # no one Ax type: Ax sees their indices


def ax(**doc):
    return custom(**({"scheduler": {"engine": "ax"}} | doc))


def statuses(search: AxEngineSearch) -> dict[int, str]:
    """Ax's own record: each trial's status."""
    frame = search.client.summarize()
    return dict(zip(frame["trial_index"], frame["trial_status"], strict=True))


def test_each_kind_of_parameter_reaches_ax_and_axs_values_make_the_trials_config(tmp_path):
    spec = ax(
        metric={"name": "score"},
        parameters={
            "x": {"min": 0.0, "max": 1.0},
            "lr": {"distribution": "log_uniform_values", "min": 1e-5, "max": 1e-1},
            "n": {"distribution": "int_uniform", "min": 1, "max": 8},
            "batch": {"values": [16, 32, 64]},
            "scale": {"values": [1, 2.5]},  # Ax holds both as floats; the trial gets 1 as written
            "mixed": {"values": MIXED},
            "w": {"distribution": "normal", "mu": 10.0, "sigma": 1.0},
            "fixed": {"value": 3},
        },
    )
    space = AxSpace(spec)
    kinds = {p.name: type(p).__name__ for p in space.parameters}
    assert kinds == {
        "x": "RangeParameterConfig",
        "lr": "RangeParameterConfig",
        "n": "RangeParameterConfig",
        "batch": "ChoiceParameterConfig",
        "scale": "ChoiceParameterConfig",
        "mixed": "ChoiceParameterConfig",
        "w": "RangeParameterConfig",  # its quantile: the value is made from it as under Optuna
    }
    assert space.by_index == {"mixed": tuple(MIXED)}  # "fixed" is not searched
    search, _ = build(spec, 6, tmp_path, None)
    for i in range(6):
        config = search.suggest(f"t{i}")
        assert set(config) == {"x", "lr", "n", "batch", "scale", "mixed", "w", "fixed"}, config
        assert repr(config["scale"]) in ("1", "2.5"), config
        assert 0 <= config["x"] <= 1 and 1e-5 <= config["lr"] <= 1e-1 and config["n"] in range(1, 9)
        assert config["batch"] in (16, 32, 64) and config["mixed"] in MIXED and config["fixed"] == 3
        # a normal of mean 10 (its quantiles reach 1e-9: 6 sigmas), not the quantile Ax searches
        assert 3 < config["w"] < 17, config
        search.on_trial_complete(f"t{i}", {"score": config["x"], "config": config})
    assert set(statuses(search).values()) == {"COMPLETED"}


def test_a_trial_without_every_objective_is_failed_for_ax_and_cost_hours_is_measured(tmp_path):
    spec = ax(metrics=[{"name": "val-loss"}, {"name": "cost_hours"}], parameters={"x": {"min": 0.0, "max": 1.0}})
    search, _ = build(spec, 2, tmp_path, None)
    for trial_id, result in (("a", {"val-loss": 0.5, "time_total_s": 1800.0}), ("b", {"time_total_s": 10.0})):
        config = search.suggest(trial_id)
        search.on_trial_complete(trial_id, result | {"config": config})
    assert statuses(search) == {0: "COMPLETED", 1: "FAILED"}
    frame = search.client.summarize()
    assert frame.loc[0, "val-loss"] == 0.5 and frame.loc[0, "cost_hours"] == 0.5  # 1 worker x 1800 s; the name kept


def test_the_users_optimizer_is_an_ax_client_and_anything_else_is_refused(tmp_path):
    source = tmp_path / "opt.py"
    source.write_text(
        "from ax import Client, RangeParameterConfig\nMADE = []\n"
        "def client():\n    MADE.append(Client(random_seed=7))\n    return MADE[-1]\n"
        "def study():\n    return 'not a client'\n"
        "def used():\n    c = Client()\n"
        "    c.configure_experiment(parameters=[RangeParameterConfig('y', (0.0, 1.0), 'float')])\n    return c\n"
    )

    def spec(optimizer: str):
        engine = {"engine": "ax", "source": str(source), "optimizer": optimizer}
        return ax(metric={"name": "score"}, parameters={"x": {"min": 0.0, "max": 1.0}}, scheduler=engine)

    search, _ = build(spec("client"), 1, tmp_path, None)
    assert search.client is load_source(str(source)).MADE[-1]
    with pytest.raises(UserError, match="returned a str; engine ax takes an ax.Client"):
        build(spec("study"), 1, tmp_path, None)
    with pytest.raises(UserError, match=r"Experiment already configured.*used\(\) returns a client with no experiment"):
        build(spec("used"), 1, tmp_path, None)


def test_while_ax_waits_for_the_running_trials_data_it_proposes_nothing_and_goes_on_after(tmp_path):
    """Ax's first points (Sobol) all proposed, none finished: Ax raises DataRequiredError, which
    Tune must see as "nothing now" (it asks again when a trial ends), not as the sweep's failure."""
    spec = ax(metric={"name": "score"}, parameters={"x": {"min": 0.0, "max": 1.0}})
    search, _ = build(spec, 20, tmp_path, None)
    running = {f"t{i}": search.suggest(f"t{i}") for i in range(8)}
    proposed = [t for t, config in running.items() if config is not None]
    assert 0 < len(proposed) < 8, running
    for t in proposed:
        search.on_trial_complete(t, {"score": running[t]["x"], "config": running[t]})
    assert search.suggest("after") is not None


def test_a_saved_or_pickled_search_goes_on_with_its_running_trials(tmp_path):
    spec = ax(metric={"name": "score"}, parameters={"x": {"min": 0.0, "max": 1.0}})
    search, _ = build(spec, 3, tmp_path, None)
    running = {t: search.suggest(t) for t in ("a", "b")}
    search.save(str(tmp_path / "searcher.json"))
    restored = AxEngineSearch(spec)
    restored.restore(str(tmp_path / "searcher.json"))
    copied = pickle.loads(pickle.dumps(search))
    for again in (restored, copied):
        again.on_trial_complete("a", {"score": 1.0, "config": running["a"]})
        assert statuses(again) == {0: "COMPLETED", 1: "RUNNING"}
        assert again.suggest("c") is not None and again.index["c"] == 2


def test_a_warm_start_tells_ax_the_earlier_trials_before_its_first_proposal(tmp_path):
    spec = ax(metric={"name": "score"}, parameters={"x": {"min": 0.0, "max": 1.0}, "opt": {"values": MIXED}})
    priors = [Prior({"x": 0.25, "opt": "a"}, (1.0,)), Prior({"x": 0.5, "opt": None}, (0.5,)), Prior({"x": 2.0}, (0.1,))]
    told = fitting(space_of(spec), priors, 1)
    assert len(told) == 2  # x = 2.0 is outside this space
    search, _ = build(spec, 1, tmp_path, None, told)
    search.suggest("new")
    frame = search.client.summarize()
    done = frame[frame["trial_status"] == "COMPLETED"]
    assert sorted(zip(done["x"], done["opt"], done["score"], strict=True)) == [(0.25, 1, 1.0), (0.5, 0, 0.5)]


def test_a_define_by_run_space_is_engine_optunas(tmp_path):
    from raysweep.search.ax_engine import check_ax

    spec = custom(metric={"name": "score"}, scheduler={"engine": "ax", "source": "space.py", "search_space": "space"})
    with pytest.raises(UserError, match="scheduler.search_space: space is a define-by-run space, which engine optuna"):
        check_ax(spec)
