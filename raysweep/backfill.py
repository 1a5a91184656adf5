"""Which waiting trial starts now: a reservation for the oldest, backfill behind it (SLURM's
EASY rule). Pure decisions, no Ray: the driver's scheduler (``search/admission.py``) feeds them
what runs where, the estimates, and the queue.

* The oldest waiting trial (the head) starts as soon as it fits: enough free slots on one node,
  or whole free nodes for a trial larger than a node (``placement.shape``).
* Unless a larger trial behind it fits as soon (now, or at the head's reservation): the largest
  such trial goes first. A large trial waits for many slots to be free at once, and they are
  then; after it they would all drain again, which is most of backfill's idle time
  (docs/benchmarks.md). So large trials run back to back while they keep coming (Tune's default
  gets its busy slots by running every one last). Only a trial with an estimate goes first (the
  trials it passes wait its length), and a trial is passed so once at most (``Waiting.passed``).
* The trials waiting when the sweep starts run largest first (``largest_first``): every slot is
  free then and no trial has an estimate, so a small head would leave the others to drain for a
  large trial with nothing to backfill by (the bench's largest idle share, docs/benchmarks.md).
  Only those: a stream of later large trials cannot starve a small one.
* When it does not fit, it gets a reservation: the earliest time its slots are expected to be
  free, from the running trials' expected ends, and the nodes it will take then.
* A later trial starts now only if it fits now and either is expected to end before the
  reservation, or lands only where the reservation leaves room (its nodes, past the reservation,
  still leave the head what it needs).
* Without an estimate for a running trial (the first trials of a sweep) there is no reservation
  time, and nothing is backfilled: the head waits for its slots, as with one trial pending.
* A reservation whose time has passed (a trial overran its estimate) backfills nothing more:
  the head then waits only for the trials already running, each bounded by its own reports.
* A head that places its slots itself starts shortly before its reservation (``starts_ahead``):
  its process starts while its slots are still held, and takes them the moment they free; not
  while a trial chosen before it has yet to take its own (Ray grants whichever group fits first:
  the head would take the slots a backfilled trial was chosen for, and that trial would wait
  for the head's end).
* Beside such a head, the trials the next decision would start when its slots free start ahead
  too (``starts_beside``), one at a time: the decision is taken as it will be then, with the
  trials started ahead holding their nodes. Only trials of one node (their whole group is
  pinned to the node chosen, so Ray cannot give it another's slots), and only while every trial
  started ahead is too. After a large trial the small ones that take its slots otherwise each
  waited for a new Tune actor (7 s on 2 cores) with their slots idle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from raysweep.placement import Shape


@dataclass(frozen=True)
class Holding:
    """A running (or starting) trial: the slots it holds on each node, and when it is expected to
    end (None: no estimate yet); ``placed`` False: it places its slots itself and has yet to take
    them (``nodes`` is where it was chosen to land)."""

    trial_id: str
    nodes: Mapping[str, int]
    end: float | None
    placed: bool = True
    takes_at: float | None = None  # started ahead of its slots: when they were expected to free


@dataclass(frozen=True)
class Waiting:
    """A trial waiting to start: its size, and the seconds it is expected to run (None: unknown);
    ``passed``: a larger trial has already started ahead of it, and none may again."""

    trial_id: str
    size: int
    seconds: float | None
    passed: bool = False


@dataclass(frozen=True)
class Reservation:
    """The head's: when its slots are expected to be free (None: no estimate yet), and what it takes."""

    trial_id: str
    size: int
    at: float | None
    nodes: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    """The trial to start now (None: none), the head's reservation while it waits, and why."""

    start: str | None
    reservation: Reservation | None = None
    backfilled: bool = False  # ``start`` is a later trial than the head, behind its reservation
    # the older trials the trial the next slots go to passed (``goes_first``): when it starts, now
    # (``start``, not backfilled) or ahead of its slots (the reservation's)
    went_ahead_of: tuple[str, ...] = ()


def free_slots(slots: Mapping[str, int], holdings: list[Holding]) -> dict[str, int]:
    """Each node's slots less those the running trials hold."""
    free = dict(slots)
    for holding in holdings:
        for node, count in holding.nodes.items():
            if node in free:
                free[node] -= count
    return free


def place(size: int, free: Mapping[str, int], slots: Mapping[str, int], shape_of: Callable[[int], Shape]) -> dict:
    """Where a trial of ``size`` goes in ``free`` now ({node: slots}), or {} when it does not fit.

    One node: the node with the fewest free slots that hold it (the others stay open for larger
    trials). Several: as many whole, wholly free nodes as the shape asks."""
    where = shape_of(size)
    if where.nodes == 1:
        fits = [n for n in free if free[n] >= size]
        if not fits:
            return {}
        node = min(fits, key=lambda n: (free[n], n))
        return {node: size}
    whole = sorted(n for n in free if free[n] == slots[n] and slots[n] >= where.per_node)
    if len(whole) < where.nodes:
        return {}
    return {n: slots[n] for n in whole[: where.nodes]}


def reserve(
    head: Waiting,
    slots: Mapping[str, int],
    holdings: list[Holding],
    shape_of: Callable[[int], Shape],
) -> Reservation:
    """The head's reservation: the first expected end after which it fits, and the nodes it takes."""
    if any(h.end is None for h in holdings):
        return Reservation(head.trial_id, head.size, None)
    free = free_slots(slots, holdings)
    for holding in sorted(holdings, key=lambda h: h.end):
        for node, count in holding.nodes.items():
            if node in free:
                free[node] += count
        nodes = place(head.size, free, slots, shape_of)
        if nodes:
            return Reservation(head.trial_id, head.size, holding.end, nodes)
    return Reservation(head.trial_id, head.size, None)  # it fits nowhere even when all end: Ray decides


def decide(
    now: float,
    slots: Mapping[str, int],
    holdings: list[Holding],
    queue: list[Waiting],
    shape_of: Callable[[int], Shape],
) -> Decision:
    """Which trial of ``queue`` (oldest first) starts now, given ``slots`` per node and the running
    trials' ``holdings``; ``shape_of(size)`` is the placement rule (``placement.shape``)."""
    if not queue:
        return Decision(None)
    free = free_slots(slots, holdings)
    head = queue[0]
    if place(head.size, free, slots, shape_of):
        first = goes_first(queue, lambda t: bool(place(t.size, free, slots, shape_of)))
        return Decision(first.trial_id, went_ahead_of=_ids(queue[: queue.index(first)]))
    reservation = reserve(head, slots, holdings, shape_of)
    if reservation.at is None:  # no estimate yet: no backfill
        return Decision(None, reservation)
    at = reservation.at
    first = goes_first(queue, lambda t: (reserve(t, slots, holdings, shape_of).at or float("inf")) <= at)
    if first is not head:
        reservation = reserve(first, slots, holdings, shape_of)
    ahead_of = _ids(queue[: queue.index(first)])
    if now >= reservation.at:  # it is late: no backfill
        return Decision(None, reservation, went_ahead_of=ahead_of)
    for trial in queue:
        nodes = place(trial.size, free, slots, shape_of) if trial is not first else {}
        if not nodes:
            continue
        ends_in_time = trial.seconds is not None and now + trial.seconds <= reservation.at
        if ends_in_time or _leaves_room(trial, free, slots, holdings, reservation, shape_of):
            return Decision(trial.trial_id, reservation, backfilled=True, went_ahead_of=ahead_of)
    return Decision(None, reservation, went_ahead_of=ahead_of)


def largest_first(queue: list[Waiting]) -> tuple[list[Waiting], tuple[str, ...]]:
    """The sweep's first trials (``queue``, those waiting when it starts) in the order they run:
    the largest first, each size in the order made; and the trials a larger one now goes before."""
    passed = tuple(t.trial_id for i, t in enumerate(queue) if any(o.size > t.size for o in queue[i + 1 :]))
    return sorted(queue, key=lambda t: -t.size), passed


def longest_first(queue: list[Waiting], kept: set[str]) -> list[Waiting]:
    """The queue with the trials ahead of its first trial larger than the head longest first.

    Those trials run before the larger one, which waits for its slots to drain: the last of them
    to end sets when it starts. Started longest first (Graham's LPT), they end closer together and
    the slots drain at once (the drains were most of backfill's idle time, docs/benchmarks.md).
    Only with an estimate for each. The trials a later one has already gone ahead of (``kept``)
    stand first, so a stream of longer trials cannot keep a short one waiting."""
    larger = first_larger(queue)
    if larger is None or any(t.seconds is None for t in queue[:larger]):
        return queue
    return sorted(queue[:larger], key=lambda t: (t.trial_id not in kept, -t.seconds)) + queue[larger:]


def first_larger(queue: list[Waiting]) -> int | None:
    """Where in ``queue`` its first trial larger than the head stands (None: there is none)."""
    return next((i for i, t in enumerate(queue) if t.size > queue[0].size), None) if queue else None


def _ids(trials: list[Waiting]) -> tuple[str, ...]:
    return tuple(t.trial_id for t in trials)


def goes_first(queue: list[Waiting], as_soon: Callable[[Waiting], bool]) -> Waiting:
    """The trial the next free slots go to: the head, or the largest trial behind it whose slots
    are free ``as_soon`` as the head's and that has an estimate (the trials it passes wait its
    length); none goes ahead of a trial that was passed once already."""
    best = queue[0]
    for before, trial in zip(queue, queue[1:]):
        if before.passed:
            break
        if trial.size > best.size and trial.seconds is not None and as_soon(trial):
            best = trial
    return best


def _leaves_room(
    trial: Waiting,
    free: Mapping[str, int],
    slots: Mapping[str, int],
    holdings: list[Holding],
    reservation: Reservation,
    shape_of: Callable[[int], Shape],
) -> bool:
    """Wherever Ray may put ``trial`` now, the reservation still gets its slots at its time, with
    ``trial`` still running: each node it could land on keeps the head's share free then."""
    at = reservation.at
    busy_then = {n: 0 for n in slots}
    for holding in holdings:
        if holding.end is not None and holding.end > at:
            for node, count in holding.nodes.items():
                busy_then[node] = busy_then.get(node, 0) + count
    where = shape_of(trial.size)
    if where.nodes > 1:  # whole nodes: any free set of them may be taken
        candidates = [n for n in free if free[n] == slots[n]]
        per_node = {n: slots[n] for n in candidates}
    else:
        candidates = [n for n in free if free[n] >= trial.size]
        per_node = {n: trial.size for n in candidates}
    need = reservation.nodes
    return all(busy_then[n] + per_node[n] + need.get(n, 0) <= slots[n] for n in candidates)


def starts_ahead(
    reservation: Reservation | None, now: float, sizes: frozenset[int], lead_s: float, holdings: list[Holding]
) -> bool:
    """Whether the head starts now, before its slots are free: they are expected to free within
    ``lead_s`` on the nodes the reservation names, its size places its slots itself (``sizes``),
    and every trial chosen before it has taken its slots (so slots are taken in the order trials
    were chosen, backfilled ones included)."""
    if reservation is None or reservation.at is None or not reservation.nodes:
        return False
    if not all(h.placed for h in holdings):
        return False
    return reservation.size in sizes and reservation.at - now <= lead_s


def starts_beside(
    now: float,
    sizes: frozenset[int],
    lead_s: float,
    slots: Mapping[str, int],
    holdings: list[Holding],
    queue: list[Waiting],
    shape_of: Callable[[int], Shape],
) -> tuple[Decision, dict[str, int], float] | None:
    """Another trial to start ahead of its slots beside those already started ahead, where it
    lands, and when their slots free: the one ``decide`` would start then, with them holding
    their nodes.
    None while a trial chosen to start now has yet to take its slots (``starts_ahead``'s race),
    or one started ahead spans nodes (its groups' other bundles go where Ray finds room)."""
    ahead = [h for h in holdings if not h.placed]
    if not ahead or any(h.takes_at is None or len(h.nodes) > 1 for h in ahead) or any(h.end is None for h in holdings):
        return None
    placed = [h for h in holdings if h.placed]
    at = _room_at(now, ahead, placed, slots)
    if at - now > lead_s:
        return None
    then = ahead + [h for h in placed if h.end > at]
    decision = decide(at, slots, then, queue, shape_of)
    trial = next((t for t in queue if t.trial_id == decision.start), None)
    if trial is None or trial.size not in sizes or shape_of(trial.size).nodes > 1:
        return None
    return decision, place(trial.size, free_slots(slots, then), slots, shape_of), at


def _room_at(now: float, ahead: list[Holding], placed: list[Holding], slots: Mapping[str, int]) -> float:
    """When the trials started ahead are expected to hold their slots: on each node they were
    chosen for, the expected end of a placed trial after which there is room for all of them
    (the ends as estimated now: they move as the trials report); ``now`` where there is room now."""
    need: dict[str, int] = {}
    for holding in ahead:
        for node, count in holding.nodes.items():
            need[node] = need.get(node, 0) + count
    at = now
    for node, count in need.items():
        there = sorted((h for h in placed if node in h.nodes), key=lambda h: h.end)
        free = slots.get(node, 0) - sum(h.nodes[node] for h in there)
        for holding in there:
            if free >= count:
                break
            free += holding.nodes[node]
            at = max(at, holding.end)
    return at


@dataclass(frozen=True)
class View:
    """What one step of the admission reads, frozen: each node's slots, what the running trials
    hold, the waiting trials in their turns (``driver/turns.py``), the placement rule, the sizes
    that place their own slots (and so may start ahead of them) and how far ahead."""

    now: float
    slots: Mapping[str, int]
    holdings: list[Holding]
    waits: list[Waiting]
    shape_of: Callable[[int], Shape]
    ahead: frozenset[int] = frozenset()
    lead_s: float = 0.0


@dataclass(frozen=True)
class Step:
    """One step's outcome: ``decision`` is ``decide``'s (its reservation is the board's); ``start``
    the trial that starts now, on ``nodes``, ahead of its slots when ``takes_at`` is set
    (``how``: "free" in slots free now, "ahead" the reserved head, "beside" beside those started
    ahead); ``passed``: the smaller trials it went ahead of, never passed again."""

    decision: Decision
    start: str | None = None
    nodes: dict[str, int] = field(default_factory=dict)
    takes_at: float | None = None
    how: str = ""
    backfilled: bool = False
    passed: tuple[str, ...] = ()


def step(view: View) -> Step:
    """The admission's decision at ``view``: the one both the driver (``driver/admission.py``)
    and the simulator (``bench/simulate.py``) act on."""
    decision = decide(view.now, view.slots, view.holdings, view.waits, view.shape_of)
    if decision.start is not None:
        size = next(w.size for w in view.waits if w.trial_id == decision.start)
        nodes = place(size, free_slots(view.slots, view.holdings), view.slots, view.shape_of)
        passed = () if decision.backfilled else decision.went_ahead_of
        return Step(decision, decision.start, nodes, None, "free", decision.backfilled, passed)
    reservation = decision.reservation
    if starts_ahead(reservation, view.now, view.ahead, view.lead_s, view.holdings):
        return Step(
            decision,
            reservation.trial_id,
            dict(reservation.nodes),
            reservation.at,
            "ahead",
            False,
            decision.went_ahead_of,
        )
    found = starts_beside(view.now, view.ahead, view.lead_s, view.slots, view.holdings, view.waits, view.shape_of)
    if found is None:
        return Step(decision)
    beside, nodes, at = found
    passed = () if beside.backfilled else beside.went_ahead_of
    return Step(decision, beside.start, nodes, at, "beside", beside.backfilled, passed)
