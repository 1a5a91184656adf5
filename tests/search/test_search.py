"""The bayes searcher driven by hand, as Tune drives it (suggest, then complete): no cluster.

Its one behaviour of our own: a configuration that already has a result, or is running, is not
proposed again while Optuna can still find another.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import optuna
import pytest
from conftest import write_spec
from ray.tune.search.optuna import OptunaSearch

from raysweep.errors import UserError
from raysweep.private_api import optuna_study
from raysweep.search import searchers as search
from raysweep.spec import load_spec, optuna_space

POINTS = [1, 2, 3, 4]


def bayes_search(tmp_path: Path, **searcher) -> OptunaSearch:
    tmp_path.mkdir(exist_ok=True)
    path = write_spec(
        tmp_path / "b.yaml",
        name="b",
        method="bayes",
        metric={"name": "score", "goal": "minimize"},
        train_loop="train_loops.smoke:train",
        parameters={"x": {"values": POINTS}},
        run_cap=8,
        seed=0,
        searcher=searcher or {"n_startup_trials": 10},  # random draws: among 4 points, repeats come soon
    )
    found, _ = search.build_search(load_spec(path), 8, tmp_path)
    return found


def run_trials(found: OptunaSearch, n: int, finish: bool = True, first: int = 0) -> list[int]:
    xs = []
    for i in range(first, first + n):
        config = found.suggest(f"t{i}")
        xs.append(config["x"])
        if finish:
            found.on_trial_complete(f"t{i}", {"score": float(config["x"]), "training_iteration": 1})
    return xs


def test_repeats_of_finished_configurations_are_not_run(tmp_path):
    found = bayes_search(tmp_path)
    assert isinstance(found, search.DistinctOptunaSearch)
    assert sorted(run_trials(found, 4)) == POINTS

    study = found._ot_study
    skipped = study.get_trials(states=(optuna.trial.TrialState.FAIL,))
    assert skipped, "the seeded random start-up should have proposed a repeat among 4 points"
    by_number = {t.number: t for t in study.trials}
    for t in skipped:  # each names the trial it repeats, which has the same parameters and a result
        twin = by_number[t.user_attrs["raysweep_repeat_of"]]
        assert twin.params == t.params and twin.state == optuna.trial.TrialState.COMPLETE


def test_running_configurations_count_as_taken(tmp_path):
    assert sorted(run_trials(bayes_search(tmp_path), 4, finish=False)) == POINTS


def test_trials_a_killed_driver_left_running_do_not_count_as_taken(tmp_path):
    """The journal keeps the killed driver's unfinished trials RUNNING for ever; the resumed
    driver's searcher must not treat their configurations as taken."""
    killed = bayes_search(tmp_path)
    assert sorted(run_trials(killed, 4, finish=False)) == POINTS  # all four left RUNNING
    stale = {t.number for t in killed._ot_study.get_trials(states=(optuna.trial.TrialState.RUNNING,))}
    before = {t.number for t in killed._ot_study.trials}
    resumed = bayes_search(tmp_path)  # a new driver on the same journal
    run_trials(resumed, 4, first=100)
    fails = resumed._ot_study.get_trials(states=(optuna.trial.TrialState.FAIL,))
    repeats_of = {t.user_attrs.get("raysweep_repeat_of") for t in fails if t.number not in before}
    assert not repeats_of & stale, "a configuration was refused because of a trial that will never finish"


def test_without_skip_duplicates_the_same_draws_repeat(tmp_path):
    """The same seed and space as above, the plain OptunaSearch: the check above can fail."""
    found = bayes_search(tmp_path, n_startup_trials=10, skip_duplicates=False)
    assert type(found) is search.WandbOptunaSearch  # Ray's, but for a trial without the metric
    assert len(set(run_trials(found, 4))) < 4


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_a_searcher_stuck_on_one_point_explores_at_random(tmp_path):
    """Optuna's PartialFixedSampler proposes x=1 every time, as a converged TPE does."""
    path = write_spec(
        tmp_path / "b.yaml",
        name="b",
        method="bayes",
        metric={"name": "score"},
        train_loop="train_loops.smoke:train",
        parameters={"x": {"values": POINTS}},
    )
    stuck = optuna.samplers.PartialFixedSampler({"x": 1}, optuna.samplers.TPESampler(seed=0))
    found = search.DistinctOptunaSearch(
        space=optuna_space(load_spec(path)), metric="score", mode="min", sampler=stuck, seed=0
    )
    assert sorted(run_trials(found, 4)) == POINTS
    fails = found._ot_study.get_trials(states=(optuna.trial.TrialState.FAIL,))
    assert all(t.params == {"x": 1} for t in fails[: search.TPE_REDRAWS])  # the stuck proposals, dropped


def test_an_exhausted_space_still_gets_a_trial(tmp_path):
    found = bayes_search(tmp_path)
    run_trials(found, 4)
    assert found.suggest("t4")["x"] in POINTS  # a repeat, after MAX_REDRAWS tries: never a hang
    fails = found._ot_study.get_trials(states=(optuna.trial.TrialState.FAIL,))
    assert len(fails) >= search.MAX_REDRAWS


def test_a_restored_searcher_still_skips_what_ran_before(tmp_path):
    """As ``raysweep resume`` restores it: the searcher pickled whole (Tune's tuner.pkl), then its state."""
    found = bayes_search(tmp_path)
    before = run_trials(found, 2)
    found.save(str(tmp_path / "searcher.pkl"))
    again = pickle.loads(pickle.dumps(found))
    again.restore(str(tmp_path / "searcher.pkl"))
    assert sorted(before + run_trials(again, 2, first=2)) == POINTS


@pytest.mark.parametrize("value", ["yes", 1])
def test_skip_duplicates_must_be_a_bool(tmp_path, value):
    path = write_spec(
        tmp_path / "b.yaml",
        method="bayes",
        metric={"name": "score"},
        train_loop="train_loops.smoke:train",
        parameters={"x": {"values": POINTS}},
        searcher={"skip_duplicates": value},
    )
    with pytest.raises(UserError, match=rf"searcher.skip_duplicates: must be true or false, got {value!r}"):
        load_spec(path)


def test_sampler_gp_is_optunas_gaussian_process(tmp_path):
    """raysweep.searcher.sampler: gp (W&B's bayes is a Gaussian process); TPE stays the default."""
    assert isinstance(
        optuna_study(bayes_search(tmp_path / "tpe", n_startup_trials=2)).sampler, optuna.samplers.TPESampler
    )
    found = bayes_search(tmp_path / "gp", sampler="gp", n_startup_trials=2)
    assert isinstance(optuna_study(found).sampler, optuna.samplers.GPSampler)
    xs = run_trials(found, 4)  # past its random start-up: the GP proposes
    assert set(xs) <= set(POINTS) and len(xs) == 4


def test_every_scheduler_and_searcher_the_spec_names_has_its_builder():
    """A scheduler or searcher is added in spec/model.py (its name, how its rungs are shown) and
    built in search/: one without the other fails here rather than in a sweep."""
    from raysweep.search.schedulers import BUILDERS
    from raysweep.search.searchers import SEARCHERS
    from raysweep.spec.model import METHODS, SCHEDULER_KINDS

    assert set(BUILDERS) == set(SCHEDULER_KINDS)
    assert set(SEARCHERS) == set(METHODS)
