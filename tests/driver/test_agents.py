"""A driver joining a sweep (``driver/agents.py``), with no Ray: the trials it adds. ``run_cap``
bounds the whole sweep, every driver's ``--count`` within it, as W&B's server ends a sweep at
run_cap whatever an agent's ``--count``; a grid adds only the points not tried yet."""

from __future__ import annotations

import json

import pytest

from raysweep.driver.agents import plan_join
from raysweep.errors import UserError
from raysweep.runs.files import TRIALS_FILE
from raysweep.runs.rows import TrialRow
from raysweep.spec import parse_spec
from raysweep.words import TrialStatus


def _spec(method: str, **keys):
    parameters = {"lr": {"values": [0.1, 0.2, 0.3]}} if method == "grid" else {"lr": {"min": 0.1, "max": 0.3}}
    return parse_spec({"method": method, "parameters": parameters, "raysweep": {"train_loop": "m:f"}, **keys})


def _ran(run_dir, *lrs, status=TrialStatus.DONE):
    rows = [TrialRow(f"t{i}", status=status, config={"lr": lr}) for i, lr in enumerate(lrs)]
    (run_dir / TRIALS_FILE).write_text("".join(json.dumps(r.to_json()) + "\n" for r in rows))


@pytest.mark.parametrize(
    ("keys", "count", "added"),
    [
        ({"run_cap": 5}, None, 3),  # the rest of run_cap
        ({"run_cap": 5}, 2, 2),  # a count within it
        ({"run_cap": 5}, 10, 3),  # a count past it stops at run_cap
        ({"run_cap": 2}, 4, 0),  # run_cap already reached
        ({}, 4, 4),  # no run_cap: the count
        ({}, None, 0),  # unbounded and no count: nothing to add
    ],
)
def test_a_joining_driver_adds_its_count_within_the_sweeps_run_cap(tmp_path, keys, count, added):
    _ran(tmp_path, 0.1, 0.2)
    spec = _spec("random", **keys)
    plan = plan_join(spec, spec, tmp_path, count, agents=1)
    assert (plan.count, plan.ran) == (added, 2)


def test_a_grid_join_adds_the_untried_points_within_run_cap(tmp_path):
    _ran(tmp_path, 0.1)
    spec = _spec("grid")
    assert plan_join(spec, spec, tmp_path, None, agents=1).count == 2
    assert plan_join(spec, spec, tmp_path, 9, agents=1).count == 2
    capped = _spec("grid", run_cap=2)
    assert plan_join(capped, capped, tmp_path, 9, agents=1).count == 1


def test_another_run_cap_or_an_unfinished_trial_is_refused(tmp_path):
    _ran(tmp_path, 0.1)
    with pytest.raises(UserError, match="holds another sweep: its run_cap differs"):
        plan_join(_spec("random", run_cap=5), _spec("random", run_cap=6), tmp_path, None, agents=1)
    _ran(tmp_path, 0.1, status=TrialStatus.RUNNING)
    with pytest.raises(UserError, match="has 1 unfinished trial"):
        plan_join(_spec("random", run_cap=5), _spec("random", run_cap=5), tmp_path, None, agents=1)


def test_a_count_above_run_cap_is_said_with_the_trials_it_runs(capsys):
    from raysweep.driver.request import trials_to_run
    from raysweep.driver.sweep import _say_run_cap

    spec = _spec("random", run_cap=3)
    _say_run_cap(spec, 8)
    assert trials_to_run(spec, 8) == 3
    assert (
        capsys.readouterr().out == "--count 8 is above the file's run_cap: 3 trials, as W&B ends a sweep at run_cap\n"
    )
    _say_run_cap(spec, 2)
    assert capsys.readouterr().out == ""
