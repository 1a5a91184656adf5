"""Growth at promotion (``growth.py``), fed by hand with no cluster: promoted with room, without
room, the largest size reached, the budget too small, and a waiting trial's reservation kept."""

from __future__ import annotations

import pytest

from raysweep.backfill import Holding, Waiting
from raysweep.growth import Growth, Promoted, fill_size, fills, gives_back, grows, per_rank_batch
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


def test_the_fill_takes_idle_slots_while_nothing_waits_in_whole_nodes_above_one():
    """Nothing waits and a second node idles: the 4-slot trial goes on at 8, on both whole nodes,
    where its rest (40 s at 4, 21 s at 8 and 2 s of restart) is shorter and costs 1.05x its GPU-hours."""
    slots, shape_of = cluster(A=4, B=4)
    mine = Holding("f", {"A": 4}, 40.0)
    assert fill_size(4, slots, shape_of) == 8 and fill_size(8, slots, shape_of) is None  # no 16 on two nodes
    assert fills(mine, 8, 40.0, 21.0, 2.0, slots, [mine], [], shape_of) == {"A": 4, "B": 4}


def test_the_fill_takes_nothing_when_a_trial_waits_or_the_restart_costs_more_than_it_gains():
    slots, shape_of = cluster(A=4, B=4)
    mine = Holding("f", {"A": 4}, 40.0)
    waiting = [Waiting("w", 1, 30.0)]
    assert fills(mine, 8, 40.0, 21.0, 2.0, slots, [mine], waiting, shape_of) is None
    assert fills(mine, 8, 40.0, 21.0, 20.0, slots, [mine], [], shape_of) is None  # 21 + 20 s > 40 s
    assert fills(mine, 8, 40.0, 30.0, 2.0, slots, [mine], [], shape_of) is None  # 1.5x its GPU-hours
    busy = Holding("b", {"B": 1}, 30.0)
    assert fills(mine, 8, 40.0, 21.0, 2.0, slots, [mine, busy], [], shape_of) is None  # B is not whole


def test_a_trial_that_filled_gives_its_slots_back_once_a_trial_waits():
    waiting = [Waiting("w", 1, 30.0)]
    assert gives_back(8, 4, waiting) and not gives_back(8, 4, []) and not gives_back(4, 4, waiting)


def test_a_size_no_trial_ran_at_is_estimated_by_carrying_the_last_doublings_scaling_on():
    """Reports took 10 s at 2 workers and 6 s at 4: each doubling took 0.6 of the time, so 8 workers
    are expected to take 3.6 s and 16, 2.16 s (what the fill weighs); a size that ran keeps its own."""
    from raysweep.driver.estimates import Estimates
    from raysweep.runs.rows import TrialRow
    from raysweep.spec import parse_spec
    from raysweep.words import TrialStatus

    spec = parse_spec(
        {
            "method": "grid",
            "metric": {"name": "score", "goal": "minimize"},
            "parameters": {"x": {"values": [0.1]}, "num_gpus": {"values": [2, 4]}},
            "raysweep": {"train_loop": "train_loops.smoke:train", "base_config": {"epochs": 4}},
        }
    )
    rows = {
        "two": TrialRow("two", status=TrialStatus.DONE, world_size=2, iterations=4, run_s=40.0),
        "four": TrialRow("four", status=TrialStatus.DONE, world_size=4, iterations=4, run_s=24.0),
    }
    estimates = Estimates(spec, rows)
    assert estimates.scaled_report_seconds(4) == 6.0
    assert [round(estimates.scaled_report_seconds(s), 2) for s in (8, 16)] == [3.6, 2.16]


def growing_sweep(batch: int = 64, **grow):
    """A growing sweep's spec (sizes 1 and 2, ASHA to 8 reports) and the driver's estimates: a
    report took 10 s at 1 worker and 6 s at 2, so 4 are expected to take 3.6 s."""
    from raysweep.driver.estimates import Estimates
    from raysweep.runs.rows import TrialRow
    from raysweep.spec import parse_spec
    from raysweep.words import TrialStatus

    spec = parse_spec(
        {
            "method": "grid",
            "metric": {"name": "score", "goal": "minimize"},
            "parameters": {"batch_size": {"value": batch}},
            "raysweep": {
                "train_loop": "train_loops.smoke:train",
                "scheduler": {"type": "asha", "grace_period": 1, "max_t": 8, "reduction_factor": 2},
                "grow": {"sizes": [1, 2], "batch": "batch_size", **grow},
            },
        }
    )
    rows = {
        "one": TrialRow("one", status=TrialStatus.DONE, world_size=1, iterations=4, run_s=40.0),
        "two": TrialRow("two", status=TrialStatus.DONE, world_size=2, iterations=4, run_s=24.0),
    }
    return spec, Estimates(spec, rows)


def test_the_driver_fills_idle_slots_and_gives_them_back_once_a_trial_waits():
    """``Promotions.refit``, the decision ``decide`` and the simulator act on: the trial at 2 workers
    past its first rung (6 reports left: 36 s at 2, 21.6 s at 4 and a 2 s restart, 1.2x its
    GPU-hours) fills both whole nodes while nothing waits; at a later report, a trial waiting, it
    goes back to 2 on the slots left to it, its own size remembered."""
    from raysweep.driver.promotions import Promotions

    spec, estimates = growing_sweep()
    promotions = Promotions(spec, estimates)
    slots, shape_of = cluster(A=2, B=2)
    config = {"batch_size": 64, "num_gpus": 2}
    mine = Holding("f", {"A": 2}, 40.0)
    assert promotions.refit("f", config, 2, slots, [mine], [], shape_of, None, 2.0) == (4, {"A": 2, "B": 2})
    assert promotions.own == {"f": 2}
    filled = Holding("f", {"A": 2, "B": 2}, 30.0)
    waiting = [Waiting("w", 1, 30.0)]
    at_four = {**config, "num_gpus": 4}
    assert promotions.refit("f", at_four, 3, slots, [filled], waiting, shape_of, None, 2.0) == (2, {"A": 2})
    assert promotions.own == {}
    assert promotions.refit("f", config, 2, slots, [mine], waiting, shape_of, None, 2.0) is None  # it waits
    # a trial started ahead of its slots (warm workers) waits for them as much as one in the queue
    assert promotions.refit("f", config, 2, slots, [mine], [], shape_of, None, 2.0) == (4, {"A": 2, "B": 2})
    ahead = Holding("w", {"B": 2}, 60.0, placed=False, takes_at=30.0)
    assert promotions.refit("f", at_four, 3, slots, [filled, ahead], [], shape_of, None, 2.0) == (2, {"A": 2})


def test_the_driver_fills_nothing_before_the_first_rung_past_the_budget_or_where_the_batch_does_not_split():
    from raysweep.driver.promotions import Promotions

    slots, shape_of = cluster(A=2, B=2)
    mine = Holding("f", {"A": 2}, 40.0)
    spec, estimates = growing_sweep()
    fill = Promotions(spec, estimates).refit
    config = {"batch_size": 64, "num_gpus": 2}
    assert fill("f", config, 0, slots, [mine], [], shape_of, None, 2.0) is None  # before its first rung
    assert fill("f", config, 2, slots, [mine], [], shape_of, None, 20.0) is None  # 21.6 + 20 s > 36 s
    # the rest at 4 costs 4 x 21.6 - 2 x 36 = 14.4 worker-seconds more
    assert fill("f", config, 2, slots, [mine], [], shape_of, 14.3, 2.0) is None
    assert fill("f", config, 2, slots, [mine], [], shape_of, 14.5, 2.0) is not None
    assert fill("f", {**config, "batch_size": 66}, 2, slots, [mine], [], shape_of, None, 2.0) is None  # 66 / 4
    spec, estimates = growing_sweep(batch=64, fill=False)
    assert Promotions(spec, estimates).refit("f", config, 2, slots, [mine], [], shape_of, None, 2.0) is None


def test_a_restart_costs_what_was_measured_from_its_pause_to_its_next_report():
    """``Promotions.reported``, which the driver's ``decide`` and the simulator both call: a trial
    that paused at its report 2 at t = 100 s and made report 3 at 2 workers at t = 113 s took 6 s
    for that report (the estimates), so its restart cost 7 s; the fill then weighs the median of
    the restarts measured, and before any, what it is told. A report made again (a restart from an
    older checkpoint) measures nothing. Planted: a restart read as free, the 20 s case fills."""
    from raysweep.driver.promotions import Promotions

    spec, estimates = growing_sweep()
    promotions = Promotions(spec, estimates)
    assert promotions.restart_seconds(2.0) == 2.0
    promotions.restarting("f", 2, 100.0)
    promotions.reported("f", 2, 2, 104.0)  # its report 2 again: not yet the next
    assert promotions.restarts == []
    promotions.reported("f", 3, 2, 113.0)
    promotions.reported("f", 4, 2, 119.0)  # not a restart's
    assert promotions.restarts == [pytest.approx(7.0)] and promotions.restart_seconds(2.0) == pytest.approx(7.0)
    promotions.restarting("g", 4, 200.0)
    promotions.reported("g", 6, 1, 245.0)  # two reports of 10 s at 1 worker: 25 s
    assert promotions.restart_seconds(2.0) == pytest.approx(16.0)
    # with 16 s of restart, the fill of 6 reports (36 s at 2, 21.6 s at 4) no longer gains
    slots, shape_of = cluster(A=2, B=2)
    mine = Holding("f", {"A": 2}, 40.0)
    config = {"batch_size": 64, "num_gpus": 2}
    restart_s = promotions.restart_seconds(2.0)
    assert promotions.refit("f", config, 2, slots, [mine], [], shape_of, None, restart_s) is None
    assert promotions.refit("f", config, 2, slots, [mine], [], shape_of, None, 2.0) is not None


def test_two_trials_promoted_at_once_do_not_grow_onto_the_same_slots():
    """f and g share node A at one worker each; f is promoted first and grows onto the idle node
    B. g, promoted before f has paused, sees f where it goes: it grows on A, where f leaves its
    slot. Planted: with f read at its old slot, g grows onto B too and waits for f's end (the
    fill test's sweep, 2026-12-07: 42 s)."""
    from types import SimpleNamespace

    from raysweep.driver.promotions import Promotions

    spec, estimates = growing_sweep()
    promotions = Promotions(spec, estimates)
    slots, shape_of = cluster(A=2, B=2)
    holdings = [Holding("f", {"A": 1}, 40.0), Holding("g", {"A": 1}, 40.0)]
    config = {"batch_size": 64, "num_gpus": 1}
    rung = {"training_iteration": 1}
    for trial_id in ("f", "g"):
        trial = SimpleNamespace(trial_id=trial_id, config=config)
        assert promotions.decide(trial, rung, slots, holdings, [], shape_of, None, 2.0)
    assert promotions.growing == {"f": (2, {"B": 2}), "g": (2, {"A": 2})}
