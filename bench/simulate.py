"""``python -m bench.simulate``: raysweep's own scheduling at cluster scale, on a simulated clock.

No Ray in the loop: a cluster of N nodes x G GPUs and a clock, both simulated, and the decisions
the driver takes, by the driver's own code:

* the admission (``backfill.py``): the first trials largest first, the trials ahead of a larger
  one longest first, the head's reservation, backfill behind it, the head started ahead of its
  slots and the trials beside it; each trial's expected seconds from ``driver/estimates.py``
  reading the trials' rows, as the driver's do. ``tune``: Tune's default instead, every waiting
  trial that fits starts, in the order made (Ray grants whichever placement group fits);
* the sweep's scheduler (``search/schedulers.build_scheduler``: Ray's ASHAScheduler);
* growth at each promotion (``growth.grows``).

What is modelled, not run: an epoch of a trial of ``size`` GPUs takes ``epoch_s / speedup``, with
``speedup = size x efficiency^log2(size)``; a trial's start takes ``start_s`` with its slots held,
and so does a restart from its checkpoint (``restart_s`` where one was measured: ``bench.fill``),
which the fill weighs as the driver does, by what the restarts so far cost
(``Promotions.reported``); each epoch's accuracy is the one its
configuration recorded (``bench/results/stages_curves.json``, ``bench.curves``).

    .venv/bin/python -m bench.simulate [--quick] [--validate]
"""

from __future__ import annotations

import argparse
import functools
import heapq
import json
import math
import multiprocessing
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from ray.tune.schedulers import TrialScheduler

from bench.common import RESULTS, write_result
from raysweep.backfill import Holding, View, Waiting, free_slots, place, step
from raysweep.driver.admission import START_AHEAD_S
from raysweep.driver.estimates import Estimates
from raysweep.driver.promotions import Promotions
from raysweep.driver.turns import Turns
from raysweep.growth import Growth, fill_size
from raysweep.placement import Capacity, Node, shape
from raysweep.runs.rows import Rows, TrialRow
from raysweep.search.plan import early_stopping
from raysweep.search.schedulers import build_scheduler
from raysweep.spec.model import SIZE, Scheduler, SweepSpec
from raysweep.words import TrialStatus

METRIC = "exact_accuracy"
SCHEDULER = Scheduler(type="asha", grace_period=1, max_t=6, reduction_factor=2)  # rungs at epochs 1, 2 and 4
SIZES = (1, 2, 4, 8)
CLUSTERS = [(4, 8, 1000), (32, 8, 1000), (64, 8, 4000)]  # nodes, GPUs each, trials
NEAR_BEST = 0.005  # "within 0.5% of the sweep's final best" (near_best_h)
# Per doubling of a trial's GPUs. Measured: bench.ddp_scaling's torchrun, 1 -> 2 ranks (gloo on this
# machine's 2 cores: a floor, no GPU measured). Literature: 90% efficiency from 8 to 256 GPUs, five
# doublings (Goyal et al. 2017, "Accurate, Large Minibatch SGD"): 0.98 per doubling.
LITERATURE_EFFICIENCY = 0.98
TUNE_PENDING = 200  # Tune's TUNE_MAX_PENDING_TRIALS_PG=auto for its random search (max(200, 1.1 x CPUs))
START_S = 2.5  # a warm trial's start on an H200, bench.gpu's overhead (gpu_quick.json: 2.525 s per trial)


def measured_efficiency() -> float:
    """Speedup from 1 to 2 ranks over 2 (``bench/results/ddp_scaling.json``, torchrun's)."""
    data = json.loads((RESULTS / "ddp_scaling.json").read_text())
    return round(data["systems"]["c_torchrun"]["speedup_2w"] / 2, 3)


@dataclass(frozen=True)
class Setup:
    nodes: int
    gpus: int  # per node
    trials: int
    policy: str  # a key of POLICIES
    admission: str  # "raysweep" or "tune"
    efficiency: float
    epoch_s: float = 60.0  # one epoch of the stages loop on 1 GPU
    start_s: float = START_S
    start_s_by_size: tuple[tuple[int, float], ...] = ()  # where a size's start differs (validation: measured)
    seed: int = 0
    restart_s: float | None = None  # a restart from a checkpoint, pause to first epoch (None: a start's)

    def start_of(self, size: int) -> float:
        return dict(self.start_s_by_size).get(size, self.start_s)

    def restart_of(self, size: int) -> float:
        return self.start_of(size) if self.restart_s is None else self.restart_s

    def speedup(self, size: int) -> float:
        return size * self.efficiency ** math.log2(size)


@dataclass(frozen=True)
class Policy:
    """How big a trial is: one size, drawn from ``sizes`` (``num_gpus`` searched), or grown."""

    sizes: tuple[int, ...]
    grow: bool = False
    fill: bool = False  # under raysweep's admission: top-rung trials fill idle slots, give them back (growth.fills)


POLICIES = {
    "fixed_1": Policy((1,)),
    "fixed_8": Policy((8,)),
    "searched": Policy(SIZES),
    "growth": Policy(SIZES, grow=True),
    "growth_fill": Policy(SIZES, grow=True, fill=True),
}


@dataclass(eq=False)
class SimTrial:
    """A trial as a scheduler reads it (``plan._Trial`` does the same), and the simulation's state of it."""

    trial_id: str
    curve: list[float]
    size: int
    made: float
    cost: float = 1.0  # its configuration's epoch time relative to the mean
    config: dict = field(default_factory=dict)
    evaluated_params: dict = field(default_factory=dict)
    status: str = "PENDING"
    nodes: dict[str, int] = field(default_factory=dict)
    placed: bool = True
    takes_at: float | None = None  # started ahead of its slots: when they were expected to free
    ready_at: float = 0.0  # its process has started (started ahead: it trains once it also holds its slots)
    start: float | None = None  # first held its slots
    end: float | None = None
    epochs: int = 0
    segments: list[tuple[int, float]] = field(default_factory=list)  # (size, from when)
    generation: int = 0  # a growth or a start moves its next epoch's event: older events are stale

    @property
    def first_size(self) -> int:
        return self.segments[0][0] if self.segments else self.size


class Simulation:
    """One sweep on the simulated cluster; ``run()`` returns its figures."""

    def __init__(
        self,
        setup: Setup,
        curves: list[dict[str, Any]],
        spec: SweepSpec | None = None,
        sizes: list[int] | None = None,
        queue_len: int | None = None,
    ):
        """``sizes``: each trial's, in the order made, with the curves in turn (a trace; default:
        drawn by the policy, each trial's configuration at random); ``queue_len``: the trials
        the search keeps waiting (default the driver's, ``experiment.py``)."""
        self.setup, self.curves, self.sizes = setup, curves, sizes
        self.policy = POLICIES[setup.policy]
        self.spec = spec or sim_spec()
        grow = self.spec.grow or Growth(SIZES, "batch")  # a replay's spec names its sizes
        self.growth = replace(grow, fill=self.policy.fill) if self.policy.grow else None
        self.slots = {f"n{i}": setup.gpus for i in range(setup.nodes)}
        capacity = Capacity(
            nodes=tuple(Node(n, n, setup.gpus, cpus=8.0 * setup.gpus, gpus=setup.gpus) for n in self.slots),
            use_gpu=True,
            cpus_per_worker=1.0,
            managed_slots=True,
        )
        self.shape_of: Callable = functools.cache(functools.partial(shape, capacity=capacity))
        tune = setup.admission == "tune"  # Tune's own pending trials for a random search, else experiment.py's queue
        self.queue_len = queue_len or (TUNE_PENDING if tune else max(4, sum(self.slots.values()) + 1))
        self.rng = np.random.default_rng(setup.seed)
        self.scheduler = build_scheduler(self.spec)
        self.scheduler.set_search_properties(METRIC, "max")
        scheduler = self.spec.scheduler
        _, shares = early_stopping(self.spec, 100, scheduler.max_t) if scheduler else (None, [])
        self.rows: Rows = Rows()
        self.estimates = Estimates(self.spec, self.rows, shares)
        self.promotions = Promotions(replace(self.spec, grow=self.growth), self.estimates)
        self.now = 0.0
        self.events: list[tuple[float, int, str, int]] = []
        self.seq = 0
        self.trials: dict[str, SimTrial] = {}
        self.waiting: list[str] = []
        self.turns = Turns({})  # the driver's turns: largest first at the start, longest first ahead of a larger one
        self.chosen_at: dict[str, float] = {}  # when the admission chose each trial (its lead: to its start)
        self.log: list[tuple[float, str, str]] = []  # (time, "start" | "end" | "grow", trial id)
        self.reports: list[tuple[float, float]] = []  # (time, the metric): the sweep's best so far over time

    # --- the sweep ---
    def run(self) -> dict[str, Any]:
        self.make_trials()
        self.admit()
        while self.events:
            at, _, trial_id, generation = heapq.heappop(self.events)
            trial = self.trials[trial_id]
            if generation != trial.generation or trial.end is not None:
                continue
            self.now = at
            self.epoch_ended(trial)
            while self.events and self.events[0][0] == at:  # every report of this instant before admitting
                _, _, other_id, other_gen = heapq.heappop(self.events)
                other = self.trials[other_id]
                if other_gen == other.generation and other.end is None:
                    self.epoch_ended(other)
            self.make_trials()
            self.admit()
        return self.figures()

    def make_trials(self) -> None:
        """The search hands a trial while fewer than the admission's queue wait (``QueuedSearch``)."""
        while len(self.waiting) < self.queue_len and len(self.trials) < self.setup.trials:
            made = len(self.trials)
            if self.sizes is not None:
                index, size = made % len(self.curves), self.sizes[made]
            else:
                index = int(self.rng.integers(len(self.curves)))
                size = int(self.rng.choice(self.policy.sizes)) if not self.policy.grow else self.policy.sizes[0]
            trial_id = f"t{made:05d}"
            curve = self.curves[index]
            trial = SimTrial(trial_id, curve[METRIC], size, self.now, cost=curve.get("cost", 1.0))
            trial.config = {SIZE: size, "index": index, "epochs": self.length(trial)}
            self.trials[trial_id] = trial
            self.waiting.append(trial_id)
            self.scheduler.on_trial_add(None, trial)

    # --- admission ---
    def admit(self) -> None:
        self.take_slots()
        if self.setup.admission == "tune":
            self.admit_like_tune()
        else:
            self.admit_like_raysweep()

    def admit_like_tune(self) -> None:
        """Every waiting trial that fits now starts, in the order made."""
        free = dict(free_slots(self.slots, self.holdings()))
        for trial_id in list(self.waiting):
            if not any(free.values()):
                return
            trial = self.trials[trial_id]
            nodes = place(trial.size, free, self.slots, self.shape_of)
            if nodes:
                self.start(trial, nodes)
                for node, count in nodes.items():
                    free[node] -= count

    def admit_like_raysweep(self) -> None:
        """The driver's step (``backfill.step``, as ``driver/admission.Admission.choose`` calls it,
        the waiting trials in ``driver/turns.Turns``' order), until it starts no trial."""
        ahead = frozenset(SIZES)  # every size runs on warm workers, which place their own slots
        while self.waiting:
            holdings = self.holdings()
            waits = self.turns.order(self.waits())
            chosen = step(View(self.now, self.slots, holdings, waits, self.shape_of, ahead, START_AHEAD_S))
            if chosen.start is None:
                return
            self.turns.passed_over(chosen.passed)
            self.start(self.trials[chosen.start], chosen.nodes, takes_at=chosen.takes_at)
            self.turns.started(chosen.start)

    def waits(self) -> list[Waiting]:
        """The waiting trials as the driver's ``Admission._waits`` gives them, in the order made."""
        lead = self.estimates.start_lead(self.chosen_at)  # as the driver's: a chosen trial starts later
        return [
            Waiting(
                t,
                self.trials[t].size,
                _plus(self.estimates.trial_seconds(self.trials[t].config), lead),
                t in self.turns.passed,
            )
            for t in self.waiting
        ]

    def holdings(self) -> list[Holding]:
        """What each started trial holds, and when it is expected to end (``Admission._holdings``)."""
        out = []
        for trial in self.trials.values():
            if trial.status != "RUNNING":
                continue
            row = self.rows.get(trial.trial_id)
            if row is None or not row.iterations:
                seconds = self.estimates.trial_seconds(trial.config)
                begins = max(self.now, trial.takes_at or self.now, trial.ready_at)
                end = begins + seconds if seconds is not None else None
            else:
                end = self.estimates.end(row, self.now)
            out.append(
                Holding(trial.trial_id, trial.nodes, end, trial.placed, None if trial.placed else trial.takes_at)
            )
        return out

    def start(self, trial: SimTrial, nodes: dict[str, int], takes_at: float | None = None) -> None:
        """Its process starts now; it trains once that is done and it holds its slots."""
        self.waiting.remove(trial.trial_id)
        self.chosen_at[trial.trial_id] = self.now
        trial.status, trial.nodes = "RUNNING", nodes
        trial.ready_at = self.now + self.setup.start_of(trial.size)
        trial.placed, trial.takes_at = takes_at is None, takes_at
        if trial.placed:
            self.held(trial)

    def take_slots(self) -> None:
        """Trials started ahead take their slots the moment they are free, in the order chosen."""
        for trial in self.trials.values():
            if trial.status == "RUNNING" and not trial.placed:
                placed = [h for h in self.holdings() if h.placed]
                free = free_slots(self.slots, placed)
                if all(free.get(n, 0) >= count for n, count in trial.nodes.items()):
                    trial.placed, trial.takes_at = True, None
                    self.held(trial)

    def held(self, trial: SimTrial) -> None:
        """It holds its slots from now; its first epoch ends a start-up and an epoch later."""
        trial.start = self.now
        trial.segments.append((trial.size, self.now))
        self.rows[trial.trial_id] = TrialRow(
            trial.trial_id,
            TrialStatus.RUNNING,
            config=trial.config,
            world_size=trial.size,
            start=self.now,
            since=self.now,
        )
        self.log.append((self.now, "start", trial.trial_id))
        self.next_epoch(trial, max(self.now, trial.ready_at))

    def next_epoch(self, trial: SimTrial, begins: float) -> None:
        trial.generation += 1
        seconds = self.setup.epoch_s * trial.cost / self.setup.speedup(trial.size)
        self.seq += 1
        heapq.heappush(self.events, (begins + seconds, self.seq, trial.trial_id, trial.generation))

    # --- reports ---
    def epoch_ended(self, trial: SimTrial) -> None:
        trial.epochs += 1
        value = trial.curve[min(trial.epochs, len(trial.curve)) - 1]
        row = self.rows[trial.trial_id]
        self.rows[trial.trial_id] = row = replace(
            row, iterations=trial.epochs, run_s=row.run_s + self.now - row.since, since=self.now
        )
        result = {"training_iteration": trial.epochs, METRIC: value}
        self.reports.append((self.now, value))
        self.promotions.reported(trial.trial_id, trial.epochs, trial.size, self.now)
        decision = self.scheduler.on_trial_result(None, trial, result)
        if decision == TrialScheduler.STOP or trial.epochs >= self.length(trial):
            self.ended(trial, stopped=trial.epochs < self.length(trial))
            return
        if self.growth is not None and trial.epochs in self.spec.scheduler.rungs:
            nodes = self.grown_nodes(trial)
            if nodes:
                self.grow(trial, nodes)
                return
        if self.setup.admission != "tune" and self.refitted(trial):
            return
        self.next_epoch(trial, self.now)

    def refitted(self, trial: SimTrial) -> bool:
        """The driver's decision at a report outside a growth (``Promotions.refit``): a trial past
        its first rung fills idle slots while nothing waits, and gives them back once a trial
        waits (``growth_fill`` only). Whether it restarts now."""
        to = fill_size(trial.size, self.slots, self.shape_of)
        resized = self.promotions.refit(
            trial.trial_id,
            trial.config,
            trial.epochs,
            self.slots,
            self.holdings(),
            self.turns.in_turn(self.waits()),
            self.shape_of,
            None,
            self.promotions.restart_seconds(self.setup.restart_of(to) if to is not None else 0.0),
        )
        if resized is not None:
            self.resize(trial, *resized)
        return resized is not None

    def length(self, trial: SimTrial) -> int:
        """The epochs a trial runs unless stopped: the scheduler's ``max_t``, else its recorded curve's."""
        return self.spec.scheduler.max_t if self.spec.scheduler else len(trial.curve)

    def grown_nodes(self, trial: SimTrial) -> dict[str, int] | None:
        """The driver's decision (``driver/promotions.Promotions.where``) on the admission's view now,
        the waiting trials in their turns (Tune's default: no queue to respect)."""
        queue = []
        if self.setup.admission != "tune":
            queue = self.turns.in_turn(self.waits())
        holdings = self.holdings()
        return self.promotions.where(
            self.now, trial.trial_id, trial.config, trial.epochs, self.slots, holdings, queue, self.shape_of, None
        )

    def grow(self, trial: SimTrial, nodes: dict[str, int]) -> None:
        """It goes on from its checkpoint at the next size: a restart, its new slots held from now."""
        self.promotions.own.pop(trial.trial_id, None)
        self.resize(trial, self.growth.next_size(trial.size), nodes)

    def resize(self, trial: SimTrial, to: int, nodes: dict[str, int]) -> None:
        """It goes on from its checkpoint at ``to``: a restart, its new slots held from now."""
        row = self.rows[trial.trial_id]
        trial.size, trial.nodes = to, nodes
        trial.config = {**trial.config, SIZE: trial.size}
        trial.segments.append((trial.size, self.now))
        self.rows[trial.trial_id] = replace(row, config=trial.config).grown(trial.size, self.now)
        self.log.append((self.now, "grow", trial.trial_id))
        self.promotions.restarting(trial.trial_id, trial.epochs, self.now)
        self.next_epoch(trial, self.now + self.setup.restart_of(trial.size))

    def ended(self, trial: SimTrial, stopped: bool) -> None:
        trial.status, trial.end = ("STOPPED" if stopped else "DONE"), self.now
        row = self.rows[trial.trial_id]
        self.rows[trial.trial_id] = replace(
            row, status=TrialStatus.STOPPED if stopped else TrialStatus.DONE, end=self.now, since=None
        )
        self.log.append((self.now, "end", trial.trial_id))

    # --- figures ---
    def figures(self) -> dict[str, Any]:
        setup = self.setup
        trials = [t for t in self.trials.values() if t.start is not None]
        wall = max(t.end for t in trials) - min(t.start for t in trials)
        held = sum(_held_s(t) for t in trials)
        done = [t for t in trials if t.epochs >= self.length(t)]
        best = max(done, key=lambda t: (t.curve[self.length(t) - 1], -t.end), default=None)
        first = self.spec.scheduler.grace_period if self.spec.scheduler else min(self.length(t) for t in trials)
        small = setup.start_s + first * setup.epoch_s  # a 1-GPU trial stopped at its first rung (or its shortest)
        passed = passed_over(trials)
        return {
            "slots_busy": round(held / (sum(self.slots.values()) * wall), 3),
            "longest_passed_over_s": round(passed, 1),
            "longest_larger_passed_over_s": round(
                passed_over(trials, larger_than=min(t.first_size for t in trials)), 1
            ),
            "longest_passed_over_small_trials": round(passed / small, 2),
            "wall_h": round(wall / 3600, 2),
            "wall_s": round(wall, 1),
            "best_top_rung_h": round((best.end - min(t.start for t in trials)) / 3600, 2) if best else None,
            "best_value": best.curve[self.length(best) - 1] if best else None,
            "gpu_hours": round(held / 3600, 1),
            "grown": sum(len(t.segments) - 1 for t in trials),
            "near_best_h": self.near_best_h(best.curve[self.length(best) - 1] if best else None),
        }

    def near_best_h(self, final: float | None, within: float = NEAR_BEST) -> float | None:
        """Hours from the sweep's start to its first report within ``within`` (relative) of its final
        best (the best finished trial's top rung): when a user watching the best so far could stop."""
        if final is None:
            return None
        start = min(t.start for t in self.trials.values() if t.start is not None)
        first = next(at for at, value in self.reports if value >= final * (1 - within))
        return round((first - start) / 3600, 3)


def _plus(seconds: float | None, lead: float) -> float | None:
    return None if seconds is None else seconds + lead


def _held_s(trial: SimTrial) -> float:
    """GPU-seconds: each segment at its size."""
    total = 0.0
    for (size, since), after in zip(trial.segments, trial.segments[1:] + [(0, trial.end)]):
        total += size * (after[1] - since)
    return total


def passed_over(trials: list[SimTrial], larger_than: int = 0) -> float:
    """The longest a trial (of more than ``larger_than`` GPUs when made: ``bench.admission``'s
    measure is its larger trials') waited after a trial made after it had started."""
    by_made = sorted(trials, key=lambda t: (t.made, t.trial_id))
    longest, first_later = 0.0, math.inf
    for trial in reversed(by_made):  # the earliest start of the trials made after each
        if first_later < trial.start and trial.first_size > larger_than:
            longest = max(longest, trial.start - first_later)
        first_later = min(first_later, trial.start)
    return longest


def sim_spec() -> SweepSpec:
    """The simulated sweep: the stages loop's epochs, searched at random, under ``SCHEDULER``."""
    return SweepSpec(method="random", parameters=(), scheduler=SCHEDULER, train_loop="bench.simulate:none")


def load_curves(quick: bool) -> list[dict[str, Any]]:
    """The recorded configurations (``bench.curves``), each with its epoch cost relative to the mean."""
    path = RESULTS / f"stages_curves{'_quick' if quick else ''}.json"
    configurations = json.loads(path.read_text())["configurations"]
    costs = [statistics.median(c["epoch_s"]) for c in configurations]
    mean = statistics.mean(costs)
    return [c | {"cost": cost / mean} for c, cost in zip(configurations, costs, strict=True)]


def compare(clusters: list[tuple[int, int, int]], efficiency: float, curves: list[dict[str, Any]]) -> dict:
    """Every policy under both admissions on each cluster (nodes, GPUs each, trials), one run each."""
    out: dict[str, Any] = {}
    for nodes, gpus, trials in clusters:
        for policy in POLICIES:
            for admission in ("tune", "raysweep"):
                setup = Setup(nodes, gpus, trials, policy, admission, efficiency)
                figures = Simulation(setup, curves).run()
                out[f"{nodes}x{gpus}/{policy}/{admission}"] = figures
                print(f"e={efficiency:g} {nodes}x{gpus} {policy:9} {admission:8} {json.dumps(figures)}", flush=True)
        out[f"{nodes}x{gpus}/goals"] = goals(
            {k.split("/", 1)[1]: v for k, v in out.items() if k.startswith(f"{nodes}x{gpus}/")}
        )
        print(f"e={efficiency:g} {nodes}x{gpus} goals {json.dumps(out[f'{nodes}x{gpus}/goals'])}", flush=True)
    return out


def goals(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Issue 75's goals on one cluster, raysweep's admission: growth's time to the eventual best's
    top rung against the best fixed policy's (and its GPU-hours against that policy's), and the
    slots' busy share and longest passed-over wait of each policy."""
    growth = runs["growth/raysweep"]
    fixed = {p: runs[f"{p}/raysweep"] for p in ("fixed_1", "fixed_8")}
    best_fixed = min(fixed, key=lambda p: fixed[p]["best_top_rung_h"] or math.inf)
    base = fixed[best_fixed]
    return {
        "best_fixed_policy": best_fixed,
        "growth_top_rung_sooner_x": round(base["best_top_rung_h"] / growth["best_top_rung_h"], 2)
        if growth["best_top_rung_h"]
        else None,
        "growth_gpu_hours_over_best_fixed": round(growth["gpu_hours"] / base["gpu_hours"], 3),
        "slots_busy": {p: runs[f"{p}/raysweep"]["slots_busy"] for p in POLICIES},
        "passed_over_small_trials": {p: runs[f"{p}/raysweep"]["longest_passed_over_small_trials"] for p in POLICIES},
    }


def idle_slot_seconds(trials: list[dict[str, Any]], slots: int) -> dict[str, float]:
    """Where a run's idle slot-seconds went (``bench.admission``'s raw timeline, ``created``,
    ``start``, ``end`` per trial): ``nothing_waiting`` (no trial had been made and not started: the
    sweep's head and tail), ``collecting`` (the oldest waiting trial is larger than the free slots:
    a reservation gathers them), ``handoff`` (a waiting trial would fit the free slots)."""
    first, last = min(t["start"] for t in trials), max(t["end"] for t in trials)  # the run's wall, as its figures'
    times = sorted({t[k] for t in trials for k in ("created", "start", "end") if k in t and first <= t[k] <= last})
    out = {"nothing_waiting": 0.0, "collecting": 0.0, "handoff": 0.0}
    for begin, end in zip(times, times[1:]):
        mid = (begin + end) / 2
        busy = sum(t["size"] for t in trials if t["start"] <= mid < t["end"])
        waiting = sorted(
            (t for t in trials if t.get("created", t["start"]) <= mid < t["start"]), key=lambda t: t["created"]
        )
        idle = (slots - busy) * (end - begin)
        if not waiting:
            out["nothing_waiting"] += idle
        elif waiting[0]["size"] > slots - busy:
            out["collecting"] += idle
        else:
            out["handoff"] += idle
    return {k: round(v, 1) for k, v in out.items()}


def replay(trials: list[dict[str, Any]], admission: str, epoch_s: float) -> Simulation:
    """A simulation of ``bench.admission``'s two-node run (its raw timeline's ``trials``, in the order
    made): the same sizes and epochs, 2 nodes of 2 slots, the smoke loop's epochs (``epoch_s`` at
    every size: it sleeps), each size's start-up (the median trial's seconds held beyond its
    epochs), no early stopping, under ``admission`` (``raysweep`` or ``tune``)."""
    held: dict[int, list[float]] = {}
    for t in trials:
        held.setdefault(t["size"], []).append(t["end"] - t["start"] - t["epochs"] * epoch_s)
    starts = tuple((size, round(max(0.0, statistics.median(v)), 2)) for size, v in sorted(held.items()))
    curves = [{METRIC: [0.5] * t["epochs"], "cost": 1.0} for t in trials]
    spec = SweepSpec(method="random", parameters=(), train_loop="bench.simulate:none")
    setup = Setup(2, 2, len(trials), "searched", admission, 0.5, epoch_s, starts[0][1], starts)  # speedup 1: it sleeps
    return Simulation(setup, curves, spec=spec, sizes=[t["size"] for t in trials])


def validate(raw_path: Path) -> dict[str, Any]:
    """The simulator against ``bench.admission``'s two-node run (its raw timeline, ``raw_path``):
    the same trials (sizes and epochs, in the order made), 2 nodes of 2 slots, the smoke loop's
    epochs (``epoch_s`` at every size: it sleeps), its start-up (the median 1-worker trial's
    seconds held beyond its epochs), no early stopping; each admission's figures side by side."""
    raw = json.loads(raw_path.read_text())
    epoch_s = float(raw["lengths"].split(" of ")[1].removesuffix(" s"))
    out: dict[str, Any] = {"source": raw_path.name, "lengths": raw["lengths"]}
    for mode, admission in (("tune_default", "tune"), ("backfill_start_ahead", "raysweep")):
        trials = raw["starvation"].get(mode)
        if not trials:
            continue
        real = json.loads((RESULTS / raw_path.name).read_text())["starvation"][mode]
        replayed = replay(trials, admission, epoch_s)
        setup, curves, spec, starts = replayed.setup, replayed.curves, replayed.spec, replayed.setup.start_s_by_size
        sim = replayed.run()
        pairs = {
            "slots_busy": (sim["slots_busy"], real["slot_busy_fraction"]),
            "wall_s": (sim["wall_s"], real["wall_s"]),
            "longest_passed_over_s": (sim["longest_larger_passed_over_s"], real["longest_passed_over_s"]),
        }
        sizes = [t["size"] for t in trials]
        longer = replace(setup, epoch_s=60.0)  # the same trials with minute-long epochs, then ten times as many
        more = replace(longer, trials=10 * len(trials))
        out[mode] = {
            "idle_slot_s": idle_slot_seconds(trials, 4),
            "slots_busy_at_60s_epochs": Simulation(longer, curves, spec=spec, sizes=sizes).run()["slots_busy"],
            "slots_busy_at_60s_epochs_10x_trials": Simulation(more, curves * 10, spec=spec, sizes=sizes * 10).run()[
                "slots_busy"
            ],
            "start_s": dict(starts),
            **{k: {"simulated": a, "real": b, "ratio": round(a / b, 3) if b else None} for k, (a, b) in pairs.items()},
        }
        print(mode, json.dumps(out[mode]), flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a 4x8 cluster and 100 trials")
    p.add_argument("--clusters", help="only these, e.g. 64x8x4000 (nodes x GPUs x trials, comma-separated)")
    p.add_argument("--efficiency", type=float, help="per doubling (default: measured, and the literature's beside it)")
    p.add_argument("--validate", type=Path, help="only: against bench.admission's raw timeline (bench/results/raw/...)")
    args = p.parse_args()
    if args.validate:
        print(write_result("simulate_validation", validate(args.validate), args.quick))
        return
    curves = load_curves(False)
    measured = measured_efficiency()
    clusters = [(4, 8, 100)] if args.quick else CLUSTERS
    if args.clusters:
        clusters = [tuple(map(int, c.split("x"))) for c in args.clusters.split(",")]
    efficiencies = [args.efficiency] if args.efficiency else [measured, LITERATURE_EFFICIENCY]
    out: dict[str, Any] = {"clusters": clusters, "scheduler": SCHEDULER.__dict__, "runs": {}}
    with multiprocessing.Pool(len(efficiencies)) as pool:  # each efficiency on a core of its own
        runs = pool.starmap(compare, [(clusters, efficiency, curves) for efficiency in efficiencies])
    out["runs"] = {f"efficiency_{e:g}": r for e, r in zip(efficiencies, runs, strict=True)}
    print(write_result("simulate", out, args.quick))


if __name__ == "__main__":
    main()
