"""What a sweep run asks for (``driver/request.py``), checked before anything starts, with no
Ray: ``raysweep.run``'s keywords get the sentences the command line's parser gives its flags,
and the trials a run makes come from ``--count``, ``run_cap`` or the grid."""

from __future__ import annotations

import pytest

from raysweep.driver.request import RunRequest, trials_to_run
from raysweep.errors import UserError
from raysweep.spec import parse_spec


@pytest.mark.parametrize(
    ("keywords", "sentence"),
    [
        ({"count": 0}, "count must be a whole number >= 1, got 0"),
        ({"count": True}, "count must be a whole number >= 1, got True"),
        ({"max_concurrent": 2.0}, "max_concurrent must be a whole number >= 1, got 2.0"),
        ({"seed": -1}, "seed must be a whole number >= 0, got -1"),
        ({"budget_gpu_hours": 0}, "--budget-gpu-hours must be a number of hours > 0, got 0"),
        ({"budget_gpu_hours": "2"}, "--budget-gpu-hours must be a number of hours > 0, got '2'"),
        ({"wandb": "on"}, "wandb must be one of "),
    ],
)
def test_a_bad_keyword_is_one_sentence_naming_it(keywords, sentence):
    with pytest.raises(UserError) as raised:
        RunRequest(**keywords).check()
    assert str(raised.value).startswith(sentence), raised.value


def test_a_good_request_passes():
    RunRequest(count=3, max_concurrent=1, seed=0, budget_gpu_hours=0.5, wandb="offline").check()


def _spec(method: str, **keys):
    parameters = {"lr": {"values": [0.1, 0.2, 0.3]}} if method == "grid" else {"lr": {"min": 0.1, "max": 0.3}}
    raysweep = {"train_loop": "train_loops.smoke:train"}
    return parse_spec({"method": method, "parameters": parameters, "raysweep": raysweep, **keys})


def test_the_trials_a_run_makes_come_from_count_run_cap_or_the_grid():
    assert trials_to_run(_spec("grid"), None) == 3
    assert trials_to_run(_spec("grid"), 10) == 3  # a grid runs each point once
    assert trials_to_run(_spec("random", run_cap=5), None) == 5
    assert trials_to_run(_spec("random", run_cap=5), 2) == 2
    assert trials_to_run(_spec("random", run_cap=5), 8) == 5  # run_cap bounds the sweep, as W&B's server does
    assert trials_to_run(_spec("random"), 8) == 8
    with pytest.raises(UserError, match=r"^random search needs a trial budget to plan: set run_cap in the spec"):
        trials_to_run(_spec("random"), None, " to plan")
