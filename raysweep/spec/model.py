"""The sweep spec as data: a frozen ``SweepSpec`` and its parts, what every later layer reads.

Built only by ``parse.parse_spec`` (every value checked) or ``SweepSpec.from_json`` (a run dir's
record). What a value *means* lives here too: a trial's DDP world size from ``num_gpus``, the
sweep's trial budget, the bands and rungs of its early stopping.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from raysweep.growth import Growth
from raysweep.spec.engines import ENGINE_KINDS, EngineKind
from raysweep.spec.objectives import Metric, Objectives  # noqa: F401 - Metric: what a sweep optimizes
from raysweep.spec.param import Param
from raysweep.words import DDP_WORKERS, Runner  # noqa: F401 - DDP_WORKERS: the spec's choices


@dataclass(frozen=True)
class Method:
    """What a search method asks of the spec and gives the sweep (the searcher that runs it is
    ``search/searchers.py``'s ``SEARCHERS[name]``)."""

    name: str
    # Its trials are a list known in advance (grid): discrete parameters only, a budget capped at
    # the list's length, and ``validate --sample`` shows the list's head.
    enumerates: bool = False
    # It models the results (bayes): it needs the metric, reads ``metric.impute``, and only its
    # random start-up trials can be shown in advance.
    learns: bool = False


METHODS = {
    m.name: m
    for m in (
        Method("grid", enumerates=True),
        Method("random"),
        Method("bayes", learns=True),
        Method("custom", learns=True),  # W&B's new format: the scheduler's engine searches (spec/engine.py)
    )
}

EXPONENT_LAWS = ("log_uniform", "inv_log_uniform", "q_log_uniform")  # W&B refuses them: min/max read as exponents

GOALS = ("minimize", "maximize")
SAMPLERS = ("tpe", "gp")  # Optuna's TPESampler, GPSampler


WANDB_MODES = ("offline", "online", "disabled")
DEFAULT_PROJECT = "raysweep"  # the W&B project of a sweep whose file names none

USE_GPU = ("auto", True, False)


# A trial's workers all start within this of it holding its resources (trial/start_bound.py): five
# minutes, twenty times the slowest start measured here (a 4-worker TorchTrainer on two nodes: 13 s
# to its first report, docs/benchmarks.md), so a slow start is not failed; a runtime env built on
# each new node may need more.
WORKER_START_TIMEOUT_S = 300.0
PROCESS_GROUP_TIMEOUT_S = 1800.0  # torch.distributed's own default: set-up and collectives
SIZE = "num_gpus"  # the parameter (or raysweep key) that sizes a trial's DDP world


@dataclass(frozen=True)
class Engine:
    """W&B's ``scheduler:`` block of its new format (``spec/engine.py``): the engine that searches,
    and the user's functions in ``source``."""

    kind: str  # optuna, ax or wandb
    source: str | None = None  # the Python file, resolved against the sweep file's directory
    optimizer: str | None = None  # a function of no arguments: the user's Optuna study or sampler, or Ax client
    search_space: str | None = None  # a function of an Optuna trial whose suggest_* calls define the space

    @property
    def record(self) -> EngineKind:
        """What this kind of engine does (``engines.py``)."""
        return ENGINE_KINDS[self.kind]


@dataclass(frozen=True)
class Scheduler:
    """An early-stopping scheduler; ``rungs`` are the iterations where trials are compared.

    ``wandb_hyperband`` is ``early_terminate: hyperband`` with W&B's own rule (``bands``, no
    iteration cap); ``asha`` and ``hyperband`` are Ray's schedulers, chosen in ``raysweep.scheduler``.
    """

    type: str
    grace_period: int | None = None
    max_t: int | None = None
    reduction_factor: float = 3
    bands: tuple[int, ...] = ()  # wandb_hyperband: the iterations W&B compares runs at
    strict: bool = True  # wandb_hyperband: compare the band's value (W&B's default), else the run's best

    @property
    def kind(self) -> SchedulerKind:
        return SCHEDULER_KINDS[self.type]

    @property
    def rungs(self) -> list[int]:
        return self.kind.rungs(self)


def _asha_rungs(s: Scheduler) -> list[int]:
    """As Ray's ASHAScheduler places them."""
    count = int(math.log(s.max_t / s.grace_period) / math.log(s.reduction_factor) + 1)
    return [int(s.grace_period * s.reduction_factor**k) for k in range(count)]


def _hyperband_rungs(s: Scheduler) -> list[int]:
    """As Ray's HyperBandScheduler places them."""
    s_max = int(math.log(s.max_t) / math.log(s.reduction_factor) + 1e-9)
    return sorted({max(1, int(s.max_t / s.reduction_factor**k)) for k in range(1, s_max + 1)})


def _wandb_rungs(s: Scheduler) -> list[int]:
    return [b for b in s.bands if b <= MAX_SHOWN_BAND]


@dataclass(frozen=True)
class SchedulerKind:
    """One early-stopping scheduler: where it compares trials (``rungs``, what ``validate`` and
    the report show). ``in_raysweep_block``: chosen with ``raysweep.scheduler.type``; else it is
    W&B's ``early_terminate``, read as W&B reads it (its ``strict``; no metric: it stops nothing).
    Its Tune scheduler is built by the function of the same name in ``search/schedulers.py`` (that
    layer imports Ray; a test holds the two together)."""

    rungs: Callable[[Scheduler], list[int]]
    in_raysweep_block: bool = True
    promotes: bool = True  # it promotes a trial at a rung, where ``raysweep.grow`` grows it
    # its brackets pause and resume trials themselves (Ray's HyperBand): the admission leaves its
    # trials to it, and the plan cannot count its rungs
    pauses_trials: bool = False


# Where a scheduler is added, beside its builder in search/schedulers.py.
SCHEDULER_KINDS = {
    "asha": SchedulerKind(_asha_rungs),
    "hyperband": SchedulerKind(_hyperband_rungs, promotes=False, pauses_trials=True),
    "wandb_hyperband": SchedulerKind(_wandb_rungs, in_raysweep_block=False),
}
SCHEDULERS = (*(name for name, kind in SCHEDULER_KINDS.items() if kind.in_raysweep_block), "fifo")  # fifo: none


MAX_SHOWN_BAND = 10**6  # W&B's min_iter bands go on for 100 multiples of eta; show the reachable ones


def wandb_bands(min_iter: int | None, max_iter: int | None, s: int | None, eta: float) -> list[int]:
    """W&B's hyperband bands (sweeps' ``hyperband_stop_runs``): ``max_iter / eta^k`` for k = 1..s
    when ``max_iter`` is given (``min_iter`` is then ignored), else ``min_iter * eta^k``, unbounded."""
    bands: list[int] = []
    if max_iter is not None:
        band: float = max_iter
        for _ in range(int(s or 0)):
            band /= eta
            if band < 1:
                break
            bands.append(int(band))
        return sorted(bands)
    band = min_iter or 1
    for _ in range(100):
        bands.append(int(band))
        band *= eta
    return bands


@dataclass(frozen=True)
class Resources:
    cpus_per_worker: float = 1.0
    use_gpu: str | bool = "auto"
    gpus_per_worker: float = 1.0  # < 1 packs that many 1-worker trials onto one GPU (0.25: four)
    memory_per_worker_gb: float = 0.0  # held per worker as Ray's memory resource; 0: not asked
    network_interface: str | None = None  # a rank's GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME


@dataclass(frozen=True)
class Budget:
    """``raysweep.budget``: what the sweep may spend, in GPU-hours (worker-hours on CPUs): each
    trial costs its workers x its wall time, start-up included."""

    gpu_hours: float | None = None
    epoch_seconds: float | None = None  # an estimate of one report's seconds, for the plan (--epoch-seconds)


@dataclass(frozen=True)
class CheckpointPolicy:
    """``raysweep.checkpoints``: what a sweep keeps on its storage (``driver/checkpoint_policy.py``)."""

    keep_best_trials: int | None = 3  # None ("all"): every trial keeps its checkpoints (Tune's default)
    keep_per_trial: int = 2  # Tune's CheckpointConfig(num_to_keep)


@dataclass(frozen=True)
class Searcher:
    """Optuna's settings for ``method: bayes``: TPE by default, or a Gaussian process (W&B's
    own bayes is one) with ``sampler: gp``."""

    sampler: str = "tpe"  # one of SAMPLERS
    n_startup_trials: int = 10
    constant_liar: bool = True
    skip_duplicates: bool = True  # never run a configuration again once it has a result (search/searchers.py)


@dataclass(frozen=True)
class WandbSettings:
    project: str | None = None
    entity: str | None = None
    group: str | None = None
    mode: str | None = None  # None: offline unless an API key is configured

    @property
    def project_name(self) -> str:
        """The W&B project of the sweep's runs (and of its W&B sweep)."""
        return self.project or DEFAULT_PROJECT


@dataclass(frozen=True)
class SweepSpec:
    method: str
    parameters: tuple[Param, ...]
    # what it optimizes: no metric, W&B's `metric:`, or `metrics:` (several); the one notion every reader ranks by
    objectives: Objectives = Objectives()
    scheduler: Scheduler | None = None
    name: str | None = None
    description: str | None = None
    train_loop: str | None = None
    # A Python function given to raysweep.run instead: "raysweep" (train(config), as a train_loop)
    # or "wandb" (main() reading wandb.config, as wandb.agent runs it). Its code is never stored.
    function: str | None = None
    program: str | None = None
    command: tuple[str, ...] | None = None
    base_config: dict = field(default_factory=dict)
    num_gpus: int | None = None  # raysweep.num_gpus: every trial's size, not passed to the script
    run_cap: int | None = None
    max_concurrent: int | None = None
    max_failures: int = 0
    max_preemptions: int = 10  # restarts after a draining or lost node, apart from max_failures (trial/preemption.py)
    max_initial_failures: int = 5  # the sweep stops when its first this many trials all fail (W&B's agent: 5)
    report_timeout_s: float | None = None
    process_group_timeout_s: float = PROCESS_GROUP_TIMEOUT_S
    # from holding its resources to every worker started (trial/start_bound.py; docs/sweep-file.md says why 300)
    worker_start_timeout_s: float = WORKER_START_TIMEOUT_S
    reuse_actors: bool = True  # trials of one size run one after another in one Tune actor process
    ddp_workers: Runner = (
        Runner.WARM
    )  # 2+ workers: warm DDP workers kept across trials, or a TorchTrainer run per trial
    seed: int | None = None  # None: not fixed, so each sweep draws its own (draw_seed), as W&B's searches do
    resources: Resources = Resources()
    budget: Budget = Budget()
    checkpoints: CheckpointPolicy = CheckpointPolicy()
    searcher: Searcher = Searcher()
    wandb: WandbSettings = WandbSettings()
    source: str | None = None
    wandb_document: dict = field(default_factory=dict)  # the file's W&B keys as read: a W&B sweep's config
    notes: tuple[str, ...] = ()  # one-line notes for the user (deprecated spellings, ignored keys)
    engine: Engine | None = None  # W&B's `scheduler:` block: a custom engine (method custom)
    # the sizes a define-by-run space gave when the driver sampled it (its num_gpus comes from a function)
    sampled_sizes: tuple[int, ...] = ()
    grow: Growth | None = None  # raysweep.grow: trials start at its first size and grow when promoted

    @property
    def defines_by_run(self) -> bool:
        """Its space is a function of an Optuna trial (the engine's ``search_space``)."""
        return self.engine is not None and self.engine.record.defines_by_run and self.engine.search_space is not None

    @property
    def runs_program(self) -> bool:
        """Trials run W&B's ``program:`` script or ``command:`` (a ``train_loop`` or a function takes precedence)."""
        return self.train_loop is None and self.function is None

    @property
    def command_uses_program(self) -> bool:
        return self.command is None or any("${program}" in c for c in self.command)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.parameters if p.name == name), None)

    def world_size(self, flat_config: Mapping[str, Any]) -> int:
        """A trial's DDP world size: its ``num_gpus`` parameter, else ``raysweep.num_gpus``, else
        the first of ``raysweep.grow.sizes``, else 1 (a trial that grew has its size in its config).

        The one place ``num_gpus`` becomes a number of workers. A spec's own values are checked
        when it is read; a value from elsewhere (a resumed run's config) that is not a whole
        number >= 1 is a ``ValueError`` the trial fails with.
        """
        value = flat_config.get(SIZE, self.num_gpus or (self.grow.sizes[0] if self.grow else 1))
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or value < 1 or value != int(value):
            raise ValueError(f"num_gpus must be a whole number >= 1, got {value!r}")
        return int(value)

    @property
    def world_sizes(self) -> set[int]:
        """Every size a trial of this sweep can ask for (a define-by-run space's: those it gave when sampled)."""
        if self.grow is not None:
            return set(self.grow.sizes)
        if self.sampled_sizes:
            return set(self.sampled_sizes)
        return world_sizes(self.param(SIZE), self.num_gpus)

    @property
    def grid_size(self) -> int | None:
        """W&B's grid size: distinct values per parameter, multiplied (never materialised)."""
        if not self.search_method.enumerates:
            return None
        return math.prod(len(p.grid_values()) for p in self.parameters)

    @property
    def search_method(self) -> Method:
        return METHODS[self.method]

    def trial_budget(self, count: int | None = None, ran: int = 0) -> int | None:
        """The trials a driver adds to this sweep after ``ran``: ``--count`` (one agent's share) within
        what is left of ``run_cap`` (the whole sweep's: W&B's server ends a sweep at run_cap whatever
        an agent's --count), else that rest, else the grid size; None when unbounded."""
        left = None if self.run_cap is None else max(self.run_cap - ran, 0)
        if count is not None:
            return count if left is None else min(count, left)
        return self.grid_size if left is None else left

    def capped(self, budget: int) -> int:
        """A trial budget as the method runs it: a grid runs each of its points once, at most."""
        return min(budget, self.grid_size) if self.search_method.enumerates else budget

    def content_name(self) -> str:
        """A name for a sweep that has none (a dict given to ``raysweep.run``): its method and a hash
        of what it sweeps, so running the same dict again joins the same sweep, as a second agent."""
        import hashlib
        import json

        kept = {k: v for k, v in self.to_json().items() if k not in ("seed", "source", "notes", "function")}
        digest = hashlib.sha1(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:8]
        return f"{self.method}-{digest}"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["parameters"] = {p.name: p.to_json() for p in self.parameters}
        out["objectives"] = self.objectives.to_json()
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SweepSpec:
        """Rebuild the spec a run dir recorded (``resume`` uses this)."""
        data = dict(data)
        params = tuple(
            Param(
                name=n,
                **{
                    k: tuple(v) if isinstance(v, list) and k in ("values", "probabilities", "nest") else v
                    for k, v in d.items()
                },
            )
            for n, d in data.pop("parameters").items()
        )
        data["objectives"] = Objectives.from_json(data)
        data.pop("metric", None)  # a record from before objectives (one metric, or none)
        nested = {
            "scheduler": Scheduler,
            "resources": Resources,
            "budget": Budget,
            "checkpoints": CheckpointPolicy,
            "searcher": Searcher,
            "wandb": WandbSettings,
        }
        for key, kind in nested.items():
            if data.get(key) is not None:
                data[key] = kind(**{k: tuple(v) if isinstance(v, list) else v for k, v in data[key].items()})
        for key in ("command", "notes", "sampled_sizes"):
            if data.get(key) is not None:
                data[key] = tuple(data[key])
        if data.get("engine") is not None:
            data["engine"] = Engine(**data["engine"])
        data["grow"] = Growth.from_json(data.get("grow"))
        if "ddp_workers" in data:
            data["ddp_workers"] = Runner(data["ddp_workers"])
        return cls(parameters=params, **data)


def draw_seed() -> int:
    """A sweep's own seed, for a file and a command that fix none: two sweeps of one file (or two
    agents of one sweep) try different configurations, as under W&B; it is kept, so ``resume``
    and ``--seed`` repeat it."""
    import secrets

    return secrets.randbelow(2**31)


def world_sizes(size_param: Param | None, num_gpus: int | None) -> set[int]:
    """The sizes a sweep's trials can ask for, from a checked ``num_gpus`` parameter (constant,
    categorical or int_uniform) or ``raysweep.num_gpus``. A wide int_uniform counts its first 65
    sizes and its largest: enough to tell the smallest, the largest and which never fit."""
    if size_param is None:
        return {num_gpus or 1}
    if size_param.distribution == "int_uniform":
        low, high = int(size_param.min), int(size_param.max)
        return set(range(low, min(high, low + 64) + 1)) | {high}
    return {int(v) for v in size_param.grid_values()}
