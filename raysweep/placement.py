"""Admission control: how many DDP workers each node hosts, where a trial's workers go, and what
a trial holds while it runs.

Every node advertises ``raysweep_slot`` = the DDP workers it can host (its GPUs, or CPUs /
cpus_per_worker). A trial holds as many slots as it has workers on each of its nodes, with their
CPUs, GPUs and memory, and holds nothing else while its workers start, so mixed 1- and 2-worker
trials queue instead of starving each other (Ray 2.60: a trial holding a CPU while its
TorchTrainer waits for more livelocks a small node).

A trial of one node's size or less runs on one node. A larger one takes whole nodes, the same
number of ranks on each (Determined's rule): 16 workers on 8-worker nodes take 2 nodes. A size
the cluster can never place is known here, with the sentence that says why, before anything
waits for it. Pure decisions, no Ray: the driver and each trial use them.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

SLOT = "raysweep_slot"
GIB = 2**30
# What a trial that can never be placed holds: a token, so that it starts at once and fails with
# its explanation instead of pending forever.
NEVER_PLACED = [{"memory": 1}]


def token_bundles(address: str) -> list[dict[str, float]]:
    """The placement group of a trial process that places its slots itself (``trial/slots.py``):
    a token on the node at ``address``, where its rank 0 runs. Every such group has one shape per
    node, so Tune runs trials of every size in the same actors, and starts one before its slots are free."""
    return [{"memory": 1, f"node:{address}": 0.001}]


def is_token(bundles: list[dict[str, float]]) -> bool:
    """``bundles`` are ``token_bundles``' (no trial's slots are ever pinned to a node by name)."""
    return bool(bundles) and any(key.startswith("node:") for key in bundles[0])


@dataclass(frozen=True)
class Node:
    """One node that hosts workers: its id, its address, and its totals (Ray's resources)."""

    id: str
    address: str
    slots: int
    cpus: float
    gpus: float = 0.0
    memory: float = 0.0  # bytes


@dataclass(frozen=True)
class Capacity:
    """The cluster's nodes that host workers, and what each worker of a trial needs."""

    nodes: tuple[Node, ...]
    use_gpu: bool
    cpus_per_worker: float
    managed_slots: bool  # nodes advertise raysweep_slot (else a fallback is used)
    gpus_per_worker: float = 1.0  # resources.gpus_per_worker: < 1 packs 1-worker trials onto one GPU
    memory_per_worker: float = 0.0  # bytes (resources.memory_per_worker_gb); 0: not asked
    grows: str | None = None  # why the cluster can gain nodes (an autoscaler), else None

    @property
    def slots_per_node(self) -> tuple[int, ...]:
        return tuple(n.slots for n in self.nodes)

    @property
    def node_ids(self) -> tuple[str, ...]:
        return tuple(n.id for n in self.nodes)

    @property
    def largest_node(self) -> int:
        """The most workers one node hosts (every resource counted)."""
        return max((self.hosts(n) for n in self.nodes), default=0)

    @property
    def total(self) -> int:
        return sum(self.hosts(n) for n in self.nodes)

    def hosts(self, node: Node) -> int:
        """The workers ``node`` hosts: its slots, and as many as its CPUs, GPUs and memory hold."""
        return min(limit for limit, _ in self.limits(node))

    def limits(self, node: Node) -> list[tuple[int, str]]:
        """Each resource's count of workers on ``node``, with the words that name it."""
        limits = [(node.slots, f"{node.slots} {'GPU' if self.use_gpu else 'worker'} slot(s)")]
        if self.cpus_per_worker > 0:
            cpus = workers_on(node.cpus, self.cpus_per_worker)
            limits.append((cpus, f"{node.cpus:g} CPU(s), cpus_per_worker {self.cpus_per_worker:g}"))
        if self.use_gpu:
            gpus = workers_on(node.gpus, self.gpus_per_worker)
            limits.append((gpus, f"{node.gpus:g} GPU(s), gpus_per_worker {self.gpus_per_worker:g}"))
        if self.memory_per_worker > 0:
            memory = workers_on(node.memory, self.memory_per_worker)
            words = f"{node.memory / GIB:.1f} GiB of memory, memory_per_worker_gb {self.memory_per_worker / GIB:g}"
            limits.append((memory, words))
        return limits

    def describe(self) -> str:
        unit = "GPU" if self.use_gpu else "CPU worker"
        if self.use_gpu and self.gpus_per_worker != 1:
            unit = f"GPU worker ({self.gpus_per_worker:g} GPU each)"
        text = f"{self.total} {unit} slot(s) on {len(self.nodes)} node(s), at most {self.largest_node} on one node"
        bound = [n for n in self.nodes if self.hosts(n) < n.slots]
        if bound:  # a node whose CPUs (or memory) hold fewer workers than its slots
            limit, words = min(self.limits(bound[0]), key=lambda lw: lw[0])
            text += f" (a node of {bound[0].slots} slots hosts {limit}: {words})"
        return text


@dataclass(frozen=True)
class Shape:
    """Where a trial's ranks go: ``per_node`` ranks on each of ``nodes`` nodes."""

    nodes: int
    per_node: int

    @property
    def world_size(self) -> int:
        return self.nodes * self.per_node


class NeverPlaced(ValueError):
    """A trial size no node (or set of whole nodes) of the cluster can ever hold; the message says why."""


def shape(world_size: int, capacity: Capacity) -> Shape:
    """The trial's nodes and ranks per node, or ``NeverPlaced`` with the sentence that says why.

    One node when a node hosts ``world_size`` workers; else whole nodes of the largest node's
    size, the same number of ranks on each. A cluster that can grow (an autoscaler) may yet
    gain the nodes, so its trials always get a shape (they wait).
    """
    largest = capacity.largest_node
    if world_size <= largest:
        return Shape(1, world_size)
    if capacity.grows:
        per_node = largest or world_size
        return Shape(world_size // per_node, per_node) if world_size % per_node == 0 else Shape(1, world_size)
    whole = sum(1 for n in capacity.nodes if capacity.hosts(n) >= largest) if largest else 0
    if largest and world_size % largest == 0 and world_size // largest <= whole:
        return Shape(world_size // largest, largest)
    raise NeverPlaced(_never_placed_text(world_size, capacity, largest, whole))


def _never_placed_text(world_size: int, capacity: Capacity, largest: int, whole: int) -> str:
    """Why ``world_size`` never fits: the resource that bounds the largest node, then the whole-node
    rule, then the sizes that fit."""
    node = max(capacity.nodes, key=capacity.hosts, default=None)
    if node is None:
        return f"num_gpus={world_size} can never be placed: no node of the cluster hosts a worker"
    limit, words = min(capacity.limits(node), key=lambda lw: lw[0])
    why = f"the largest node hosts {limit} worker(s) ({words})"
    if world_size % largest:
        why += (
            f", and a larger trial takes whole nodes of {largest} ranks each: {world_size} is no multiple of {largest}"
        )
    else:
        why += f", and a larger trial needs {world_size // largest} whole nodes of {largest}: the cluster has {whole}"
    return f"num_gpus={world_size} can never be placed: {why}. Sizes that fit: {fitting_sizes(capacity)}"


def never_placed(sizes: set[int], capacity: Capacity) -> dict[int, str]:
    """The sizes among ``sizes`` this cluster can never place, each with its sentence."""
    out = {}
    for size in sorted(sizes):
        try:
            shape(size, capacity)
        except NeverPlaced as e:
            out[size] = str(e)
    return out


def fitting_sizes(capacity: Capacity) -> str:
    """The trial sizes this cluster places, in words: ``1-4, 8, 12``."""
    largest = capacity.largest_node
    if not largest:
        return "none"
    whole = sum(1 for n in capacity.nodes if capacity.hosts(n) >= largest)
    sizes = ["1" if largest == 1 else f"1-{largest}"] + [str(largest * k) for k in range(2, whole + 1)]
    return ", ".join(sizes)


def trial_bundles(world_size: int, capacity: Capacity, holds_workers: bool = True) -> tuple[list[dict], str]:
    """The placement group a trial holds while it runs: its bundles and their strategy.

    One bundle per node of the trial's ``shape`` (STRICT_PACK for one node, STRICT_SPREAD for
    several: one node each). Each holds that node's share of the trial's slots, and, with
    ``holds_workers``, its workers' CPUs, GPUs and memory: warm workers hold nothing themselves,
    so the trial process (in the first bundle) learns its GPUs from Ray and hands one to each rank.
    A ``TorchTrainer`` run's actors ask for their own (``holds_workers`` False). A trial that can
    never be placed holds a token amount so it starts, and fails at once with its explanation.
    """
    try:
        where = shape(world_size, capacity)
    except NeverPlaced:
        return NEVER_PLACED, "STRICT_PACK"
    holds = where.per_node if holds_workers else 0
    gpu = capacity.gpus_per_worker if capacity.use_gpu else 0
    wants = {"CPU": capacity.cpus_per_worker, "GPU": gpu, "memory": capacity.memory_per_worker}
    bundle = {k: v * holds for k, v in wants.items() if v * holds}
    if capacity.managed_slots:  # a GPU node's slots are its GPUs: a packed worker holds its share
        bundle[SLOT] = where.per_node * (gpu or 1)
    bundle = bundle or {"memory": 1}
    return [dict(bundle) for _ in range(where.nodes)], "STRICT_PACK" if where.nodes == 1 else "STRICT_SPREAD"


def nodes_from(
    ray_nodes: list[dict[str, Any]], use_gpu: bool, cpus_per_worker: float, gpus_per_worker: float
) -> tuple[Node, ...]:
    """The nodes that host workers, from ``ray.nodes()``'s records (the dead left out): a node
    advertising ``raysweep_slot`` has that many slots (a GPU node's are its GPUs), and where no node
    does, a node's slots are what its GPUs or CPUs hold."""
    alive = [n for n in ray_nodes if n.get("Alive")]
    managed = any(SLOT in n["Resources"] for n in alive)
    nodes = []
    for n in alive:
        resources = n["Resources"]
        if managed:
            slots = workers_on(resources.get(SLOT, 0), gpus_per_worker) if use_gpu else int(resources.get(SLOT, 0))
        else:
            slots = slots_for(resources, use_gpu, cpus_per_worker, gpus_per_worker)
        if slots > 0:
            cpus, gpus, memory = (resources.get(k, 0.0) for k in ("CPU", "GPU", "memory"))
            nodes.append(Node(n["NodeID"], n["NodeManagerAddress"], slots, cpus, gpus, memory))
    return tuple(nodes)


def slots_for(
    node_resources: dict[str, float], use_gpu: bool, cpus_per_worker: float, gpus_per_worker: float = 1.0
) -> int:
    """The DDP workers a node without ``raysweep_slot`` hosts: its GPUs / gpus_per_worker, or its
    CPUs / cpus_per_worker."""
    if use_gpu:
        return workers_on(node_resources.get("GPU", 0), gpus_per_worker)
    return int(node_resources.get("CPU", 0) // cpus_per_worker)


def workers_on(amount: float, per_worker: float) -> int:
    """Whole workers that fit in ``amount`` (a little slack for float sums such as 3 x 0.1)."""
    return int(amount / per_worker + 1e-9)


def concurrency_limit(capacity: Capacity, max_workers: int, requested: int | None) -> int | None:
    """Without managed slots, allow only as many trials as fit at once at their largest size."""
    if capacity.managed_slots:
        return requested
    fit = max(1, sum(s // max_workers for s in capacity.slots_per_node))
    return min(requested, fit) if requested else fit


def warm_workers(capacity: Capacity, sizes: set[int], trials_at_once: int) -> dict[str, tuple[int, int]]:
    """Each node's warm workers to start before the first trial, and the most it hosts: what
    ``trials_at_once`` trials of the sweep's largest share of one node can use.
    A sweep of one 1-worker trial starts one worker, not one per slot (each imports torch)."""
    shares = []
    for size in sizes:
        with contextlib.suppress(NeverPlaced):
            shares.append(shape(size, capacity).per_node)
    most = max(shares, default=0) * trials_at_once
    return {n.id: (min(capacity.hosts(n), most), capacity.hosts(n)) for n in capacity.nodes}


def rank_gpus(assigned: list[Any], workers: int) -> list[str]:
    """Each rank's GPU among those Ray assigned to one node's bundle, in order: one each, the
    first of each rank's share with ``gpus_per_worker`` > 1, the one shared GPU when packed."""
    ids = sorted((str(g) for g in assigned), key=lambda g: (len(g), g))
    return [ids[(r * len(ids)) // workers] for r in range(workers)] if ids else []


@dataclass(frozen=True)
class RankPlace:
    """Where one rank of a trial runs: its node (by id, never by address), its index there, and
    its GPU with the node's GPUs for the trial (what a script's CUDA_VISIBLE_DEVICES lists)."""

    node_id: str
    address: str
    node_rank: int
    local_rank: int
    local_world_size: int
    gpu: str | None = None
    node_gpus: tuple[str, ...] = ()


def rank_places(nodes: list[tuple[str, str, list[Any]]], per_node: int) -> list[RankPlace]:
    """Every rank's place, rank r = node index x ``per_node`` + its local rank: ``nodes`` is each
    node of the trial, in order (the trial's own first): its id, its address, the GPUs Ray gave
    its bundle."""
    places = []
    for node_rank, (node_id, address, gpu_ids) in enumerate(nodes):
        gpus = rank_gpus(gpu_ids, per_node)
        shown = tuple(sorted({str(g) for g in gpu_ids}, key=lambda g: (len(g), g)))
        for local in range(per_node):
            gpu = gpus[local] if gpus else None
            places.append(RankPlace(node_id, address, node_rank, local, per_node, gpu, shown))
    return places
