"""Which waiting trial Tune starts next, in a sweep of mixed sizes: the driver's side of
``backfill.py`` (a reservation for the oldest waiting trial, backfill behind it).

Tune asks its scheduler which pending trial runs next (``choose_trial_to_run``; every raysweep
scheduler hands the question here), then stages a placement group for it, and for the other
pending trials too, up to ``TUNE_MAX_PENDING_TRIALS_PG``. Ray grants whichever group fits first,
so a trial that needs two whole nodes loses to every 1-worker trial staged beside it. So here
every waiting trial but the one chosen is held (Tune's PAUSED: no group is staged for it), and
Tune keeps one trial pending, the chosen one. The search is asked for new trials only while
fewer than ``queue`` wait (``QueuedSearch``), so a searcher that learns is not asked far ahead.

What each running trial holds comes from the trials themselves (``trial/holdings.py``); how
long they run, from ``estimates.py``. ``Board`` keeps what was decided for the progress line and
the run dir's rows (``created``, ``reserved_at``, ``backfilled``).

Unless ``RAYSWEEP_START_AHEAD=0``, a warm trial (``ahead``: the
sizes that run on warm workers) starts in a Tune actor that holds a
token on its rank 0's node and places its slots itself (``trial/slots.py``): Tune then runs
trials of every size in the same actors, and the head of the queue is started ``START_AHEAD_S``
before its reservation, so its process has started when its slots free (a size switch cost
2.8-6.8 s of idle slots otherwise, docs/benchmarks.md), and beside it the trials that will take
the rest of those slots (``backfill.starts_beside``). Such a trial's row starts when it held its
slots, as a trial in Tune's group of its shape starts once Ray granted that group.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

import ray
from ray import tune
from ray.tune.experiment import Trial

from raysweep.backfill import (
    Holding,
    Reservation,
    Step,
    View,
    Waiting,
    step,
)
from raysweep.driver.budget import Ledger
from raysweep.driver.estimates import Estimates
from raysweep.driver.promotions import Promotions
from raysweep.driver.turns import Turns, passing
from raysweep.placement import Capacity, NeverPlaced, nodes_from, shape, token_bundles
from raysweep.private_api import draining_nodes, keep_idle_actors, save_experiment_state, set_trial_status
from raysweep.spec import SweepSpec
from raysweep.words import TrialStatus

log = logging.getLogger("raysweep")

REFRESH_S = 0.25  # how stale the trials' holdings may be
NODES_EVERY_S = 2.0  # how stale the cluster's nodes may be
START_AHEAD_S = 8.0  # Tune actors starting, four at once on 2 cores beside a trial (docs/benchmarks.md)


@dataclass
class Board:
    """What the admission decided: the head's reservation now, each trial's first reservation
    time, and the trials started behind a reservation."""

    reservation: Reservation | None = None
    reserved_at: dict[str, float] = field(default_factory=dict)
    backfilled: set[str] = field(default_factory=set)
    held_at: dict[str, float] = field(default_factory=dict)  # when a trial that placed its slots held them
    chosen_at: dict[str, float] = field(default_factory=dict)  # when each trial was first chosen to start


class Admission:
    def __init__(
        self,
        spec: SweepSpec,
        capacity: Capacity,
        estimates: Estimates,
        *,
        holdings: Any,
        board: Board,
        queue: int,
        ahead: frozenset[int] = frozenset(),
        ledger: Ledger | None = None,
    ) -> None:
        self.spec, self.capacity, self.estimates = spec, capacity, estimates
        self.ledger = ledger  # the sweep's budget, if it has one: a waiting trial starts only if it fits
        self.holdings, self.board, self.queue = holdings, board, queue
        self.ahead = ahead  # sizes whose trials place their slots themselves (``trial/slots.py``)
        self.starting: dict[str, dict[str, int]] = {}  # chosen, not yet running: where it should land
        self.waiting = 0  # trials held or pending, at the last step
        self._held: dict[str, dict[str, int]] = {}
        self._held_at = 0.0
        self._asked: list[Any] | None = None  # the record's answers on their way (``_read_holdings``)
        self._started_at: dict[str, float] = {}  # trial id -> when it was last started (time.time)
        self._live = capacity
        self._live_at = 0.0
        self._draining: set[str] = set()  # nodes that announced their end (trial/preemption.py)
        self._kept: dict[str, int] = {}  # node address -> idle Tune actors of its token shape Tune may keep
        self._takes_at: dict[str, float] = {}  # started ahead of its slots -> when they were expected to free
        self.turns = Turns(board.reserved_at)  # the waiting trials' order, who was passed over
        self.promotions = Promotions(spec, estimates)  # trials that go on at their next size (``growth.py``)

    def room(self) -> bool:
        """Whether Tune may make another trial: fewer than ``queue`` wait."""
        return self.waiting < self.queue

    def choose(self, tune_controller: Any) -> Any:
        """The trial to start now, or None; every other waiting trial is held."""
        trials = tune_controller.get_trials()
        live = {t.trial_id for t in trials if t.status in (Trial.RUNNING, Trial.PENDING)}
        queue = self._hold(tune_controller, trials, live)
        if self.promotions.saving(trials):  # a promoted trial is pausing to grow: it starts first
            return None
        grown = self._grown(tune_controller, queue)
        if grown is not None:
            return grown
        if not queue:
            if self._placing(trials):  # the last trials started ahead: their rows start when they hold their slots
                self._read_holdings(trials)
            return None
        slots = self._slots()  # first: the sizes below are judged on the nodes alive now, as decide's are
        for trial in queue:  # a size that never fits starts at once and fails with its sentence
            if self._size(trial) is None:
                return self._start(tune_controller, trial, {})
        queue = self._affordable(queue, trials, live)
        if not queue:
            return None
        lead = self.estimates.start_lead(self.board.chosen_at)  # a chosen trial's actor starts first
        holdings = self._holdings(trials, lead)
        if holdings is None:
            # the record has not answered, or a running trial has not said where it runs: ask again next step
            return None
        now = time.time()
        waits = self.turns.order(self._waits(queue, lead))
        if self.ahead:
            self._keep_actors(tune_controller)
        shape_of = functools.partial(shape, capacity=self._live)
        chosen = step(View(now, slots, holdings, waits, shape_of, self.ahead, START_AHEAD_S))
        decision = chosen.decision
        self.turns.log(decision, now, len(holdings), len(waits))
        self.board.reservation = decision.reservation
        if decision.reservation is not None and decision.reservation.at is not None:
            self.board.reserved_at.setdefault(decision.reservation.trial_id, decision.reservation.at)
        if chosen.start is None:
            return None
        trial = next(t for t in queue if t.trial_id == chosen.start)
        if chosen.takes_at is not None:
            _log_ahead(chosen, now)
        if chosen.backfilled:
            self.board.backfilled.add(trial.trial_id)
        self.turns.passed_over(chosen.passed)
        return self._start(tune_controller, trial, chosen.nodes, takes_at=chosen.takes_at)

    def _hold(self, tune_controller: Any, trials: list[Any], live: set[str]) -> list[Any]:
        """Every waiting trial not chosen is held (Tune's PAUSED: no group staged for it); the queue."""
        waiting = [t for t in trials if t.status in (Trial.PENDING, Trial.PAUSED)]
        self.starting = {k: v for k, v in self.starting.items() if k in live}
        for trial in waiting:
            if trial.status == Trial.PENDING and trial.trial_id not in self.starting:
                trial.init_local_path()  # its dir, as Tune names it when it stages a trial (its results list it)
                set_trial_status(tune_controller, trial, Trial.PAUSED)
        self.waiting = len(waiting)
        return [t for t in waiting if t.trial_id not in self.starting]

    def _grown(self, tune_controller: Any, queue: list[Any]) -> Any:
        """The trial paused to change size (``promotions.py``), started first at its new size; or None."""
        for trial in self.promotions.resized(queue, self.estimates.rows):  # a resumed sweep's grown trials
            self._resized(trial)
        grown = self.promotions.paused(queue)
        if grown is None:
            return None
        trial, nodes = grown
        log.info("admission: %s goes on at %d workers (resized)", trial.trial_id, self._size(trial))
        self._resized(trial)
        save_experiment_state(tune_controller)  # its checkpoint and its new size, before it starts
        return self._start(tune_controller, trial, nodes)

    def _resized(self, trial: Any) -> None:
        """A trial whose size changed (``promotions.py``) gets Tune's group of its new shape, unless
        it places its slots itself (its Tune group is a token, the same at every size)."""
        if self._size(trial) not in self.ahead:
            trial.update_resources(trial.get_trainable_cls().default_resource_request(trial.config))

    def _waits(self, queue: list[Any], lead: float) -> list[Waiting]:
        """The waiting trials as ``backfill`` reads them, in Tune's order."""
        return [
            Waiting(
                t.trial_id,
                self._size(t),
                _plus(self.estimates.trial_seconds(t.config), lead),
                passed=t.trial_id in self.turns.passed,
            )
            for t in queue
        ]

    def resizes(self, tune_controller: Any, trial: Any, result: dict) -> bool:
        """Whether a trial the scheduler lets go on from this checkpointed report goes on at another
        size (its scheduler then pauses it, and ``choose`` starts it again first): grown at a rung,
        filling idle slots, or giving them back (``promotions.py``), on the holdings last read (a
        report does not wait for the record) and the waiting trials."""
        if self.spec.grow is None or not result.get("should_checkpoint"):
            return False  # it goes on from the checkpoint it reported with this result
        trials = tune_controller.get_trials()
        lead = self.estimates.start_lead(self.board.chosen_at)
        # ask the record again without waiting (in a sweep's tail ``choose`` has no queue to read it
        # for), and decide on what it last said: a trial restarted since holds the slots it was
        # started on until its new run tells the record
        self._read_holdings(trials)
        holdings = self._holdings(trials, lead, fresh=False)
        if holdings is None or self.turns.first is None:
            return False
        waiting = [t for t in trials if t.status in (Trial.PENDING, Trial.PAUSED) and t.trial_id not in self.starting]
        queue = self.turns.in_turn(self._waits(waiting, lead))
        room = self.ledger.start_room_s([]) if self.ledger is not None else None
        shape_of = functools.partial(shape, capacity=self._live)
        return self.promotions.decide(trial, result, self._slots(), holdings, queue, shape_of, room, lead)

    def _affordable(self, queue: list[Any], trials: list[Any], live: set[str]) -> list[Any]:
        """The waiting trials the budget lets start now (``Ledger.start_room_s``; every one without a
        budget). When none does and no trial runs or starts, the budget is spent for them: its
        stopper ends the sweep, resumable."""
        if self.ledger is None:
            return queue
        rows, by_id = self.estimates.rows, {t.trial_id: t for t in trials}
        starting = [
            by_id[k].config
            for k in self.starting
            if k in by_id and (k not in rows or rows[k].status != TrialStatus.RUNNING)  # a running one has its row
        ]
        room = self.ledger.start_room_s(starting)
        fit = [t for t in queue if self.ledger.cost_s(t.config) <= room]
        if not fit and not live:
            self.ledger.exhausted = True
        return fit

    def _start(self, tune_controller: Any, trial: Any, nodes: dict[str, int], takes_at: float | None = None) -> Any:
        """Start ``trial`` where ``nodes`` says (``takes_at``: ahead of its slots, expected to free
        then); a trial that places its slots itself gets a token on its rank 0's node for Tune's
        group (``placement.token_bundles``)."""
        self.starting[trial.trial_id] = nodes
        self._held.pop(trial.trial_id, None)  # a resized trial: its old slots are no longer its
        self._started_at[trial.trial_id] = time.time()
        self.turns.started(trial.trial_id)
        self._takes_at.pop(trial.trial_id, None)
        if takes_at is not None:
            self._takes_at[trial.trial_id] = takes_at
        self.board.chosen_at.setdefault(trial.trial_id, time.time())
        address = {n.id: n.address for n in self._live.nodes}.get(next(iter(nodes), None))
        if address and self._size(trial) in self.ahead:
            trial.update_resources(_token_group(address))
        return trial

    def _keep_actors(self, tune_controller: Any) -> None:
        """Tune may keep as many idle actors of a node's token shape as the node hosts workers (at
        most that many trials have their rank 0 there at once): a trial of another size then starts
        in an actor already up, as under Tune's default, instead of waiting 3-7 s for a new one with
        its slots idle. They hold no slot (``placement.token_bundles``)."""
        want = {n.address: self._live.hosts(n) for n in self._live.nodes}
        for address in want.keys() | self._kept.keys():
            by = want.get(address, 0) - self._kept.get(address, 0)
            if by:
                keep_idle_actors(tune_controller, _token_group(address), by)
        self._kept = want

    def _size(self, trial: Any) -> int | None:
        try:
            size = self.spec.world_size(trial.config)
            shape(size, self._live)
        except (ValueError, NeverPlaced):
            return None
        return size

    def _holdings(self, trials: list[Any], lead: float, fresh: bool = True) -> list[Holding] | None:
        """What each running or starting trial holds, and when it is expected to end (one not yet
        started: ``lead`` after it was chosen, and its length); ``fresh`` False: as last read."""
        if fresh and not self._read_holdings(trials):
            return None
        rows = self.estimates.rows
        placing = self._placing(trials)
        now = time.time()
        out = []
        for trial in trials:
            if trial.status not in (Trial.RUNNING, Trial.PENDING) or (
                trial.status == Trial.PENDING and trial.trial_id not in self.starting
            ):
                continue
            nodes = self._held.get(trial.trial_id) or self.starting.get(trial.trial_id)
            if not nodes:
                self._held_at = 0.0
                return None
            row = rows.get(trial.trial_id)
            if row is None or row.start is None or trial.status == Trial.PENDING:  # its actor may be starting
                seconds = self.estimates.trial_seconds(trial.config)
                takes_at = self._takes_at.get(trial.trial_id, now)
                started = max(now, takes_at, self.board.chosen_at.get(trial.trial_id, now) + lead)
                end = started + seconds if seconds is not None else None
            else:
                end = self.estimates.end(row)
            placed = trial.trial_id not in placing
            out.append(
                Holding(trial.trial_id, nodes, end, placed, None if placed else self._takes_at.get(trial.trial_id))
            )
        return out

    def _read_holdings(self, trials: list[Any]) -> bool:
        """Whether the record of what the trials hold is fresh enough to decide on. It is asked
        without waiting: Tune's loop goes on (its stoppers, Ctrl-C) until the record answers, which
        on 2 loaded cores took over 30 s (a ``ray.get`` with a timeout there ended the driver)."""
        if self._asked is None:
            if time.monotonic() - self._held_at <= REFRESH_S:
                return True
            self._asked = [self.holdings.nodes.remote(), self.holdings.since.remote()]
        ready, _ = ray.wait(self._asked, num_returns=len(self._asked), timeout=0)
        if len(ready) < len(self._asked):
            return False
        (nodes, since), self._asked = ray.get(self._asked), None
        # a trial started again (a resize) keeps its old entry until its new run tells the record
        # where it runs: until then it holds what ``starting`` says, and has not placed its slots
        # (the record is on this node: one clock)
        since = {k: t for k, t in since.items() if t >= self._started_at.get(k, 0.0)}
        self._held = {k: v for k, v in nodes.items() if k in since}
        self._held_at = time.monotonic()
        if self.ahead:
            self._placed(trials, since)
        return True

    def _placed(self, trials: list[Any], since: dict[str, float]) -> None:
        """Starting trials that placed their own slots and hold them now: their rows start then,
        and they leave ``starting`` (a retry is chosen again, with a new token)."""
        for trial_id in self._placing(trials) & since.keys():
            self.board.held_at[trial_id] = since[trial_id]
            del self.starting[trial_id]

    def _placing(self, trials: list[Any]) -> set[str]:
        """The starting trials of sizes that place their own slots (none with start-ahead off)."""
        if not self.ahead:
            return set()
        by_id = {t.trial_id: t for t in trials}
        return {t for t in self.starting if t in by_id and self._size(by_id[t]) in self.ahead}

    def _slots(self) -> dict[str, int]:
        """The workers each node alive hosts; none on a draining node, from its notice on
        (``trial/preemption.py``: Ray places nothing new there either). Sizes are still judged on
        every node alive: a trial waits for nodes that drain, it does not fail for them."""
        if time.monotonic() - self._live_at > NODES_EVERY_S:
            start = self.capacity
            nodes = nodes_from(ray.nodes(), start.use_gpu, start.cpus_per_worker, start.gpus_per_worker)
            self._live = replace(start, nodes=nodes)
            self._draining = set(draining_nodes())
            self._live_at = time.monotonic()
        return {n.id: 0 if n.id in self._draining else self._live.hosts(n) for n in self._live.nodes}


def _log_ahead(chosen: Step, now: float) -> None:
    """driver.log: a trial started ahead of its slots (``backfill.starts_ahead``, ``starts_beside``)."""
    if chosen.how == "ahead":
        where, how = "", passing(chosen.passed)
    else:
        where = " beside the trials started ahead"
        how = ", behind a reservation" if chosen.backfilled else passing(chosen.passed)
    log.info(
        "admission: start %s ahead of its slots%s (free in ~%.0f s)%s", chosen.start, where, chosen.takes_at - now, how
    )


def _token_group(address: str) -> tune.PlacementGroupFactory:
    """The Tune group of a trial that places its slots itself, rank 0 at ``address``: also the key
    of Tune's idle actors of that node, so the two must be made alike."""
    return tune.PlacementGroupFactory(token_bundles(address))


def _plus(seconds: float | None, lead: float) -> float | None:
    return None if seconds is None else seconds + lead


def mixes_sizes(spec: SweepSpec) -> bool:
    """Whether the sweep's trials come in more than one size (backfill has something to do)."""
    return len(spec.world_sizes) > 1
