"""Growth at promotion (``growth.py``), fed by hand with no cluster: promoted with room, without
room, the largest size reached, the budget too small, and a waiting trial's reservation kept."""

from __future__ import annotations

import pytest

from raysweep.backfill import Holding, Waiting
from raysweep.growth import Growth, Promoted, grows, per_rank_batch
from tests.driver.test_backfill import cluster

GROWTH = Growth((1, 2, 4), "batch_size")


def promoted(nodes: dict, size: int, end: float = 20.0, seconds_at_to: float | None = 10.0) -> Promoted:
    return Promoted(Holding("p", nodes, end), size, GROWTH.next_size(size), seconds_at_to)


def test_the_next_size_is_one_step_and_none_past_the_largest():
    assert [GROWTH.next_size(s) for s in (1, 2, 4)] == [2, 4, None]
    assert Growth.from_json(GROWTH.to_json()) == GROWTH


def test_a_promoted_trial_with_room_grows_on_its_own_node():
    slots, shape_of = cluster(A=4, B=4)
    trial = promoted({"B": 1}, 1)
    holdings = [trial.holding, Holding("r", {"A": 3}, 30.0)]
    assert grows(0.0, trial, slots, holdings, [], shape_of) == {"B": 2}


def test_a_promoted_trial_without_room_goes_on_at_its_size():
    slots, shape_of = cluster(A=2)
    trial = promoted({"A": 1}, 1)
    assert grows(0.0, trial, slots, [trial.holding, Holding("r", {"A": 1}, 30.0)], [], shape_of) is None


def test_it_moves_to_a_node_with_room_when_its_own_has_none():
    slots, shape_of = cluster(A=2, B=4)
    trial = promoted({"A": 1}, 2)  # 2 -> 4: only B holds 4
    assert grows(0.0, trial, slots, [trial.holding, Holding("r", {"A": 1}, 30.0)], [], shape_of) == {"B": 4}


def test_the_largest_size_is_the_last():
    slots, shape_of = cluster(A=8)
    largest = Promoted(Holding("p", {"A": 4}, 20.0), 4, None, None)
    assert GROWTH.next_size(4) is None and largest.to is None


def test_the_budget_too_small_for_the_rest_at_the_next_size_keeps_it():
    """The rest at 2 workers (2 x 10 s) less its rest at 1 (1 x 18 s): 2 worker-seconds more."""
    slots, shape_of = cluster(A=4)
    trial = promoted({"A": 1}, 1, seconds_at_to=10.0)
    assert grows(0.0, trial, slots, [trial.holding], [], shape_of, room_s=2.0, seconds_at_size=18.0) == {"A": 2}
    assert grows(0.0, trial, slots, [trial.holding], [], shape_of, room_s=1.9, seconds_at_size=18.0) is None
    no_estimate = promoted({"A": 1}, 1, seconds_at_to=None)
    assert grows(0.0, no_estimate, slots, [no_estimate.holding], [], shape_of, room_s=100.0) is None


def test_a_promotion_goes_before_a_new_trial_that_fits():
    """ASHA's own order: a promotion before a new trial. The head still starts on the slots left."""
    slots, shape_of = cluster(A=4)
    trial = promoted({"A": 1}, 1)
    holdings = [trial.holding, Holding("r", {"A": 1}, 30.0)]
    assert grows(0.0, trial, slots, holdings, [Waiting("w", 1, 5.0)], shape_of) == {"A": 2}


def test_it_never_takes_slots_a_waiting_trials_reservation_holds():
    """A 4-worker head reserved node A for t=20 (when r ends); the promoted trial (on B) would end
    at 30 at its next size on A: refused. Ending by 20 it may grow, as a backfilled trial may."""
    slots, shape_of = cluster(A=4, B=1)
    head = Waiting("big", 4, 50.0)
    trial = Promoted(Holding("p", {"B": 1}, 25.0), 1, 2, 30.0)
    holdings = [trial.holding, Holding("r", {"A": 2}, 20.0)]
    assert grows(0.0, trial, slots, holdings, [head], shape_of) is None
    quick = Promoted(Holding("p", {"B": 1}, 25.0), 1, 2, 15.0)
    assert grows(0.0, quick, slots, holdings, [head], shape_of) == {"A": 2}


def test_without_estimates_nothing_grows_past_a_waiting_trial():
    slots, shape_of = cluster(A=4)
    trial = promoted({"A": 1}, 1)
    holdings = [trial.holding, Holding("r", {"A": 2}, None)]
    assert grows(0.0, trial, slots, holdings, [Waiting("big", 4, None)], shape_of) is None


@pytest.mark.parametrize(("batch", "world", "share"), [(64, 1, 64), (64, 2, 32), (64, 8, 8)])
def test_each_rank_takes_its_share_of_the_global_batch(batch, world, share):
    assert per_rank_batch(batch, world) == share


def test_a_batch_that_does_not_divide_is_an_error():
    with pytest.raises(ValueError, match="does not divide among 3 ranks"):
        per_rank_batch(64, 3)
