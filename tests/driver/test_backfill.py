"""Reservations and backfill (``backfill.py``), fed by hand with no cluster: one test per branch
of the decision. Nodes here are named A, B, C; ``shape`` is the placement rule of the cluster."""

from __future__ import annotations

import functools
from dataclasses import replace

from raysweep.backfill import (
    Holding,
    Reservation,
    Waiting,
    decide,
    largest_first,
    longest_first,
    reserve,
    starts_ahead,
    starts_beside,
)
from raysweep.placement import Capacity, Node, shape


def cluster(**slots: int):
    """The slots per node, and the shape rule of a cluster of those nodes."""
    nodes = tuple(Node(name, f"10.0.0.{i}", n, float(n)) for i, (name, n) in enumerate(slots.items()))
    capacity = Capacity(nodes, use_gpu=False, cpus_per_worker=1.0, managed_slots=True)
    return {n.id: n.slots for n in nodes}, functools.partial(shape, capacity=capacity)


def test_the_head_starts_when_it_fits():
    slots, shape_of = cluster(A=2, B=2)
    running = [Holding("r1", {"A": 1}, end=10.0)]
    decision = decide(0.0, slots, running, [Waiting("big", 2, 5.0), Waiting("small", 1, 1.0)], shape_of)
    assert decision.start == "big" and not decision.backfilled


def test_a_larger_trial_that_fits_now_goes_ahead_of_the_head_once_and_only_with_an_estimate():
    """A 4-worker trial behind a 1-worker head, all 4 slots free (a large trial just ended): it
    starts first, as the head would leave 3 slots to drain for it. Not without an estimate (the
    head would wait an unknown time), not past a trial passed once, and not when it does not fit."""
    slots, shape_of = cluster(A=2, B=2)
    queue = [Waiting("small", 1, 3.0), Waiting("two", 2, 3.0), Waiting("big", 4, 5.0)]
    decision = decide(0.0, slots, [], queue, shape_of)
    assert decision.start == "big" and decision.went_ahead_of == ("small", "two") and not decision.backfilled
    assert decide(0.0, slots, [], [queue[0], replace(queue[2], seconds=None)], shape_of).start == "small"
    assert decide(0.0, slots, [], [replace(queue[0], passed=True), *queue[1:]], shape_of).start == "small"
    passed_second = decide(0.0, slots, [], [queue[0], replace(queue[1], passed=True), queue[2]], shape_of)
    assert passed_second.start == "two" and passed_second.went_ahead_of == ("small",)
    one_busy = decide(0.0, slots, [Holding("r1", {"A": 1}, end=10.0)], queue, shape_of)
    assert one_busy.start == "two" and one_busy.went_ahead_of == ("small",)  # 2 fits on B, 4 does not


def test_the_trials_waiting_at_the_sweeps_start_run_largest_first_and_the_smaller_count_as_passed():
    """Every slot is free and no trial has an estimate: a small head would leave the others to
    drain for the 4-worker trials behind it, with nothing to backfill meanwhile. Each size keeps
    the order it was made in; a trial only larger ones follow is not passed."""
    queue = [Waiting("s0", 1, None), Waiting("two", 2, None), Waiting("big", 4, None), Waiting("s1", 1, None)]
    queue.append(Waiting("big2", 4, None))
    order, passed = largest_first(queue)
    assert [t.trial_id for t in order] == ["big", "big2", "two", "s0", "s1"]
    assert passed == ("s0", "two", "s1")
    assert largest_first(queue[2:3] + queue[:1]) == ([queue[2], queue[0]], ())


def test_the_trials_ahead_of_a_larger_one_run_longest_first_and_a_trial_passed_once_keeps_its_place():
    """The 4-worker trial waits for the slots of the three ahead of it to drain: started longest
    first they end closer together. The trial behind it keeps its place, and so does the order
    when the head is the largest, when a trial ahead has no estimate, or when a trial made later
    has gone ahead of one already (it then stands first)."""
    a, b, c, big, d = (
        Waiting("a", 1, 3.0),
        Waiting("b", 1, 6.0),
        Waiting("c", 1, 5.0),
        Waiting("big", 4, 8.0),
        Waiting("d", 1, 9.0),
    )
    assert longest_first([a, b, c, big, d], set()) == [b, c, a, big, d]
    assert longest_first([a, b, c, big, d], {"a"}) == [a, b, c, big, d]
    assert longest_first([a, b, c, big, d], {"a", "c"}) == [c, a, b, big, d]
    assert longest_first([a, b, c, d], set()) == [a, b, c, d]  # nothing larger waits: no drain to shorten
    assert longest_first([big, a, b], set()) == [big, a, b]
    assert longest_first([a, replace(b, seconds=None), c, big], set()) == [a, replace(b, seconds=None), c, big]
    two = Waiting("two", 2, 4.0)
    assert longest_first([a, two, b, big], set()) == [a, two, b, big]  # the 2-worker one is the larger: a alone ahead
    assert longest_first([two, a, b, big], set()) == [b, two, a, big]


def test_a_larger_trial_whose_slots_free_as_soon_as_the_heads_takes_the_heads_reservation():
    """A 4-worker trial holds every slot: when it ends they all free at once, for the 2-worker head
    or for the 4-worker trial behind it. The reservation goes to the larger one (so no drain comes
    after the head), and a trial that ends before it is still backfilled. Where the larger one's
    slots free later than the head's, the head keeps its reservation."""
    slots, shape_of = cluster(A=2, B=2)
    running = [Holding("big0", {"A": 2, "B": 1}, end=10.0)]
    queue = [Waiting("two", 2, 3.0), Waiting("short", 1, 3.0), Waiting("big", 4, 5.0)]
    decision = decide(0.0, slots, running, queue, shape_of)
    assert decision.reservation == Reservation("big", 4, 10.0, {"A": 2, "B": 2})
    assert decision.start == "short" and decision.backfilled and decision.went_ahead_of == ("two", "short")
    late = decide(11.0, slots, running, queue, shape_of)  # big0 overran: still the larger one's, no backfill
    assert late.reservation.trial_id == "big" and late.start is None and late.went_ahead_of == ("two", "short")
    staggered = [Holding("r1", {"A": 2}, end=10.0), Holding("r2", {"B": 2}, end=20.0)]
    kept = decide(0.0, slots, staggered, queue, shape_of)
    assert kept.reservation == Reservation("two", 2, 10.0, {"A": 2}) and kept.went_ahead_of == ()


def test_a_trial_larger_than_a_node_needs_whole_free_nodes_not_free_slots_summed():
    slots, shape_of = cluster(A=2, B=2, C=2)
    running = [Holding("r1", {"B": 1}, end=10.0), Holding("r2", {"C": 1}, end=20.0)]
    decision = decide(0.0, slots, running, [Waiting("big", 4, 5.0)], shape_of)  # 4 slots free, one whole node
    assert decision.start is None
    assert decision.reservation == Reservation("big", 4, 10.0, {"A": 2, "B": 2})


def test_the_reservation_falls_at_the_end_that_frees_enough_whole_nodes():
    slots, shape_of = cluster(A=2, B=2)
    running = [Holding("r1", {"A": 1}, 12.0), Holding("r2", {"B": 1}, 10.0), Holding("r3", {"A": 1}, 30.0)]
    assert reserve(Waiting("big", 4, None), slots, running, shape_of) == Reservation("big", 4, 30.0, {"A": 2, "B": 2})


def test_without_an_estimate_for_a_running_trial_nothing_is_backfilled():
    slots, shape_of = cluster(A=2, B=2)
    running = [Holding("r1", {"A": 1}, end=None), Holding("r2", {"B": 1}, end=10.0)]
    decision = decide(0.0, slots, running, [Waiting("big", 4, 5.0), Waiting("small", 1, 1.0)], shape_of)
    assert decision.start is None and decision.reservation.at is None


def test_a_later_trial_expected_to_end_before_the_reservation_is_backfilled():
    slots, shape_of = cluster(A=2, B=2)
    running = [Holding("r1", {"A": 1}, end=10.0), Holding("r2", {"B": 1}, end=12.0)]
    queue = [Waiting("big", 4, 5.0), Waiting("long", 1, 30.0), Waiting("short", 1, 8.0)]
    decision = decide(1.0, slots, running, queue, shape_of)
    assert decision.start == "short" and decision.backfilled and decision.reservation.at == 12.0


def test_a_later_trial_that_would_run_past_the_reservation_on_its_nodes_waits():
    slots, shape_of = cluster(A=2, B=2)
    running = [Holding("r1", {"A": 1}, end=10.0), Holding("r2", {"B": 1}, end=12.0)]
    for unknown_or_long in (None, 11.5):  # 1 + 11.5 > 12: it would end after the reservation
        queue = [Waiting("big", 4, 5.0), Waiting("small", 1, unknown_or_long)]
        assert decide(1.0, slots, running, queue, shape_of).start is None


def test_a_later_trial_may_run_past_the_reservation_on_slots_the_reservation_does_not_need():
    slots, shape_of = cluster(A=2, B=2, C=2)
    running = [Holding("r1", {"A": 2}, 10.0), Holding("r2", {"B": 2}, 12.0), Holding("r3", {"C": 1}, 100.0)]
    queue = [Waiting("big", 4, 5.0), Waiting("long", 1, 50.0)]
    decision = decide(1.0, slots, running, queue, shape_of)  # it can only land on C, which big does not need
    assert decision.start == "long" and decision.reservation.nodes == {"A": 2, "B": 2}
    running[0] = Holding("r1", {"A": 1}, 10.0)  # now it could land on A too, which big needs at 12
    assert decide(1.0, slots, running, queue, shape_of).start is None


def test_a_reservation_that_is_late_backfills_nothing_more():
    slots, shape_of = cluster(A=2, B=2)
    running = [Holding("r1", {"A": 1}, end=10.0), Holding("r2", {"B": 1}, end=12.0)]
    queue = [Waiting("big", 4, 5.0), Waiting("short", 1, 0.5)]
    assert decide(11.0, slots, running, queue, shape_of).start == "short"
    late = decide(12.5, slots, running, queue, shape_of)  # r2 overran its estimate: big waits only for it
    assert late.start is None and late.reservation.at == 12.0


def test_on_one_node_sizes_one_two_and_four_reserve_the_node_for_the_four():
    slots, shape_of = cluster(A=4)
    running = [Holding("r1", {"A": 1}, end=5.0), Holding("r2", {"A": 2}, end=20.0)]
    queue = [Waiting("four", 4, 10.0), Waiting("long", 1, 30.0), Waiting("short", 1, 3.0)]
    decision = decide(0.0, slots, running, queue, shape_of)
    assert decision.start == "short" and decision.reservation == Reservation("four", 4, 20.0, {"A": 4})
    assert decide(0.0, slots, running, queue[:2], shape_of).start is None  # the long one would hold the node past 20


def test_a_head_that_places_its_own_slots_starts_ahead_only_just_before_its_reservation():
    """Its process starts while its slots are still held (``trial/slots.py``), within the lead of its
    reservation; not without a time or nodes, and not a size Tune places (TorchTrainer)."""
    reserved = Reservation("big", 4, 10.0, {"A": 2, "B": 2})
    warm = frozenset({1, 4})
    running = [Holding("long", {"A": 1}, 10.0)]
    assert starts_ahead(reserved, 6.0, warm, 5.0, running)
    assert not starts_ahead(reserved, 4.0, warm, 5.0, running)  # 6 s early: too soon
    assert not starts_ahead(reserved, 6.0, frozenset({1}), 5.0, running)
    assert not starts_ahead(Reservation("big", 4, None), 6.0, warm, 5.0, running)
    assert not starts_ahead(Reservation("big", 4, 10.0), 6.0, warm, 5.0, running)  # no nodes
    assert not starts_ahead(None, 6.0, warm, 5.0, running)


def test_a_head_does_not_start_ahead_while_a_trial_chosen_before_it_has_yet_to_take_its_slots():
    """Ray grants whichever group fits first. A backfilled 1-worker trial whose process was slow
    to start had yet to place its slot when the head, started ahead, took both nodes the moment
    the long trial ended: the backfilled trial then waited for the head's end (CI, stop 58). So
    no head starts ahead while any chosen trial, backfilled or started ahead, has yet to place."""
    reserved = Reservation("big", 4, 10.0, {"A": 2, "B": 2})
    warm = frozenset({1, 4})
    long = Holding("long", {"A": 1}, 10.0)
    backfilled = Holding("short", {"B": 1}, 8.0, placed=False)
    assert not starts_ahead(reserved, 6.0, warm, 5.0, [long, backfilled])
    assert starts_ahead(reserved, 6.0, warm, 5.0, [long, replace(backfilled, placed=True)])
    started_ahead = Holding("big0", {"A": 2, "B": 2}, 30.0, placed=False)
    assert not starts_ahead(reserved, 6.0, warm, 5.0, [long, started_ahead])


def test_beside_a_head_started_ahead_the_trials_that_take_the_rest_of_its_slots_start_ahead_too():
    """A 4-worker trial holds every slot until 10; the 1-worker head was started ahead onto A. The
    trials the admission will choose at 10, with the head holding its slot then, start ahead now
    one by one: the next 1-worker trial (A, the fullest node), then, the 4-worker one reserved
    for when those end at 13, a 3-second trial backfilled on B. Each waits no new Tune actor
    after 10 with its slots idle."""
    slots, shape_of = cluster(A=2, B=2)
    warm = frozenset({1, 4})
    big = Holding("big0", {"A": 2, "B": 2}, 10.0)
    head = Holding("s0", {"A": 1}, 13.0, placed=False, takes_at=10.0)
    queue = [Waiting("s1", 1, 3.0), Waiting("big", 4, 5.0), Waiting("s2", 1, 3.0), Waiting("s3", 1, 9.0)]
    decision, nodes, at = starts_beside(6.0, warm, 5.0, slots, [big, head], queue, shape_of)
    assert decision.start == "s1" and not decision.backfilled and nodes == {"A": 1} and at == 10.0
    beside = Holding("s1", {"A": 1}, 13.0, placed=False, takes_at=10.0)
    decision, nodes, _ = starts_beside(6.0, warm, 5.0, slots, [big, head, beside], queue[1:], shape_of)
    assert decision.start == "s2" and decision.backfilled and nodes == {"B": 1}
    assert decision.reservation == Reservation("big", 4, 13.0, {"A": 2, "B": 2})
    assert starts_beside(6.0, warm, 5.0, slots, [big, head, beside], [queue[1], queue[3]], shape_of) is None
    later = replace(big, end=10.5)  # as the 4-worker trial reports, its expected end moves
    moved = starts_beside(6.0, warm, 5.0, slots, [later, head], queue, shape_of)
    assert moved[0].start == "s1" and moved[2] == 10.5  # when the slots free as estimated now


def test_nothing_starts_beside_unless_every_trial_started_ahead_is_one_nodes_and_their_slots_free_soon():
    """Not too early; not while a trial chosen to start now has yet to take its slots, or one
    started ahead spans nodes (Ray may give its other bundles the slots planned for this one);
    not a trial that spans nodes or that Tune places itself."""
    slots, shape_of = cluster(A=2, B=2)
    warm = frozenset({1, 4})
    big = Holding("big0", {"A": 2, "B": 2}, 10.0)
    head = Holding("s0", {"A": 1}, 13.0, placed=False, takes_at=10.0)
    queue = [Waiting("s1", 1, 3.0)]
    assert starts_beside(6.0, warm, 5.0, slots, [big, head], queue, shape_of) is not None
    assert starts_beside(4.0, warm, 5.0, slots, [big, head], queue, shape_of) is None  # 6 s early
    assert starts_beside(6.0, frozenset({4}), 5.0, slots, [big, head], queue, shape_of) is None
    assert starts_beside(6.0, warm, 5.0, slots, [big], queue, shape_of) is None  # none started ahead
    chosen_now = replace(head, takes_at=None)
    assert starts_beside(6.0, warm, 5.0, slots, [big, chosen_now], queue, shape_of) is None
    slots, shape_of = cluster(A=2, B=2, C=2)
    two_nodes = Holding("big1", {"A": 2, "B": 2}, 20.0, placed=False, takes_at=10.0)
    assert starts_beside(6.0, warm, 5.0, slots, [big, two_nodes], queue, shape_of) is None  # C is free then
    assert starts_beside(6.0, warm, 5.0, slots, [big, head], [Waiting("big", 4, 5.0)], shape_of) is None  # B and C
    assert starts_beside(6.0, warm | {2}, 5.0, slots, [big, head], [Waiting("two", 2, 5.0)], shape_of) is not None


def test_beside_a_trial_started_ahead_onto_free_slots_the_decision_is_taken_now_not_at_time_zero():
    """The head was started ahead onto B, where a slot is free now: their slots free now, and the
    trial beside it is judged at this moment. A 9-second trial would end after the 4-worker
    reservation at 13 and waits; a 3-second one is backfilled. (When the room was reckoned from
    time 0, every trial "ended" before any reservation: driver.log said `free in ~-1796156219 s`.)"""
    slots, shape_of = cluster(A=2, B=2)
    warm = frozenset({1, 4})
    running = Holding("r1", {"A": 2}, 10.0)
    head = Holding("s0", {"B": 1}, 13.0, placed=False, takes_at=6.0)
    queue = [Waiting("big", 4, 5.0), Waiting("long", 1, 9.0)]
    assert starts_beside(6.0, warm, 5.0, slots, [running, head], queue, shape_of) is None
    decision, nodes, at = starts_beside(
        6.0, warm, 5.0, slots, [running, head], [queue[0], Waiting("short", 1, 3.0)], shape_of
    )
    assert decision.start == "short" and decision.backfilled and nodes == {"B": 1} and at == 6.0
