"""Trials that grow when promoted: a trial starts at the first of the sweep's sizes and, at each
rung where ASHA or HyperBand promotes it, goes on at the next size, where the admission can place
it now. Pure decisions, no Ray: the driver (``driver/admission.py``) and the simulator
(``bench/simulate.py``) take the same ones.

The GPU count is the fidelity (RASDA, FGCS 2026; RubberBand, EuroSys'21): a trial that ASHA
stops at the first rung spent one GPU, and the trials it promotes take their longest epochs on
more. The trial keeps its global batch (each rank takes ``global / world``) and its learning rate,
so growing changes its speed, not its mathematics.

* Only at a promotion (ASHA's CONTINUE at a rung), one size at a time.
* A promoted trial goes ahead of the trials that wait to start (ASHA's own order: a promotion
  before a new trial), but never onto slots a waiting trial's reservation holds: it grows only if
  it is expected to end before the reservation, or lands where the reservation leaves room
  (``backfill.py``'s rule for a backfilled trial).
* While the head waits with no reservation time (no estimates yet), nothing grows past it.
* The budget: the rest of the trial at the new size must fit what is left.
* Otherwise it goes on at its current size: it never waits, idle, for a larger one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from raysweep.backfill import Holding, Waiting, free_slots, place, reserve
from raysweep.config_keys import get_path
from raysweep.placement import NeverPlaced, Shape


@dataclass(frozen=True)
class Growth:
    """A sweep's ``raysweep.grow``: the sizes a trial takes in turn, the config key of its global
    batch (each rank gets ``global // world`` under that key), and whether a trial past its first
    rung fills idle slots while nothing waits (``fills``)."""

    sizes: tuple[int, ...]
    batch: str
    fill: bool = True

    def next_size(self, current: int) -> int | None:
        """The size after ``current`` (None: it has the largest)."""
        larger = [s for s in self.sizes if s > current]
        return min(larger) if larger else None

    def to_json(self) -> dict:
        return {"sizes": list(self.sizes), "batch": self.batch, "fill": self.fill}

    @classmethod
    def from_json(cls, data: dict | None) -> Growth | None:
        return cls(tuple(data["sizes"]), data["batch"], data.get("fill", True)) if data else None


def global_batch(growth: Growth, flat_config: Mapping, base_config: Any) -> Any:
    """A trial's global batch: its config's value of ``growth.batch``, else ``base_config``'s."""
    return flat_config[growth.batch] if growth.batch in flat_config else get_path(base_config, growth.batch)


def per_rank_batch(global_batch: int, world_size: int) -> int:
    """Each rank's share of the global batch (``parse`` refused a batch some size does not divide)."""
    if global_batch % world_size:
        raise ValueError(f"a global batch of {global_batch} does not divide among {world_size} ranks")
    return global_batch // world_size


@dataclass(frozen=True)
class Promoted:
    """A trial a scheduler promoted: what it holds now (its ``Holding``, ``end`` at its size), its
    next size, and the seconds its rest would take at that size (None: no estimate)."""

    holding: Holding
    size: int
    to: int
    seconds_at_to: float | None


def grows(
    now: float,
    promoted: Promoted,
    slots: Mapping[str, int],
    holdings: list[Holding],
    queue: list[Waiting],
    shape_of: Callable[[int], Shape],
    room_s: float | None = None,
    seconds_at_size: float | None = None,
) -> dict[str, int] | None:
    """Where the promoted trial goes on at its next size ({node: slots}), or None: it goes on at
    its size. ``holdings`` include it at its size; ``queue`` is the waiting trials, oldest first;
    ``room_s``: the budget's worker-seconds left (None: no budget), against which the rest of the
    trial at the new size, less its rest at its size (``seconds_at_size``), is weighed."""
    trial = promoted.holding
    if room_s is not None:
        more = promoted.to * (promoted.seconds_at_to or 0.0) - promoted.size * (seconds_at_size or 0.0)
        if promoted.seconds_at_to is None or more > room_s:
            return None
    others = [h for h in holdings if h.trial_id != trial.trial_id]
    free = free_slots(slots, others)
    nodes = _place_near(promoted.to, free, slots, shape_of, trial.nodes)
    if not nodes or not queue:
        return nodes or None
    head = queue[0]
    if place(head.size, free_slots(slots, holdings), slots, shape_of):
        return nodes  # the head starts now as well, on slots the trial does not take, or after: a promotion first
    reservation = reserve(head, slots, holdings, shape_of)
    if reservation.at is None:
        return None  # no estimates yet: nothing goes past a waiting trial
    end = None if promoted.seconds_at_to is None else now + promoted.seconds_at_to
    if end is not None and end <= reservation.at:
        return nodes
    busy_then = {n: 0 for n in slots}
    for holding in others:
        if holding.end is None or holding.end > reservation.at:
            for node, count in holding.nodes.items():
                busy_then[node] = busy_then.get(node, 0) + count
    needs = reservation.nodes
    if all(busy_then[n] + nodes.get(n, 0) + needs.get(n, 0) <= slots[n] for n in needs):
        return nodes
    return None


def _place_near(
    size: int, free: Mapping[str, int], slots: Mapping[str, int], shape_of: Callable[[int], Shape], near: Mapping
) -> dict[str, int]:
    """Where ``size`` goes: on the trial's own node when it fits there (its checkpoint and its
    warm workers' caches are there), else where ``backfill.place`` puts it."""
    where = shape_of(size)
    own = next(iter(near), None)
    if where.nodes == 1 and own is not None and free.get(own, 0) >= size:
        return {own: size}
    return place(size, free, slots, shape_of)


FILL_COST = 1.25  # a fill may cost the rest of a trial this many times its GPU-hours (0.8 per doubling)


def holding_size(holding: Holding) -> int:
    return sum(holding.nodes.values())


def fill_size(size: int, slots: Mapping[str, int], shape_of: Callable[[int], Shape]) -> int | None:
    """The size a trial filling idle slots goes to: twice its own, in whole nodes above one node;
    None where the cluster has no such size."""
    to = size * 2
    try:
        where = shape_of(to)
    except NeverPlaced:
        return None
    return to if where.nodes * where.per_node == to and where.nodes <= len(slots) else None


def fills(
    holding: Holding,
    to: int,
    seconds_at_size: float | None,
    seconds_at_to: float | None,
    restart_s: float,
    slots: Mapping[str, int],
    holdings: list[Holding],
    queue: list[Waiting],
    shape_of: Callable[[int], Shape],
) -> dict[str, int] | None:
    """Where a running trial goes on at ``to`` at this report, on slots no trial waits for (a
    sweep's tail: its few survivors run alone while most slots idle), or None. Only while nothing
    waits, only where its rest at ``to`` and a restart from its checkpoint are expected to be
    shorter than its rest at its size, and at most ``FILL_COST`` times its GPU-hours."""
    if queue or seconds_at_size is None or seconds_at_to is None or seconds_at_to + restart_s >= seconds_at_size:
        return None
    if to * seconds_at_to > FILL_COST * holding_size(holding) * seconds_at_size:
        return None  # it scales too poorly: the idle slots cost more GPU-hours than the time they save
    others = [h for h in holdings if h.trial_id != holding.trial_id]
    return _place_near(to, free_slots(slots, others), slots, shape_of, holding.nodes) or None


def sizes_taken(growth: Growth, most: int) -> set[int]:
    """Every size a trial of a growing sweep can take on a cluster of ``most`` slots: its sizes, and
    with the fill, each doubled while it fits."""
    out = set(growth.sizes)
    for size in growth.sizes if growth.fill else ():
        while size * 2 <= most:
            size *= 2
            out.add(size)
    return out


def gives_back(size: int, own: int, queue: list[Waiting]) -> bool:
    """A trial that filled idle slots (``size`` above its ``own``) goes back to its own size at its
    next report once a trial waits."""
    return bool(queue) and size > own
