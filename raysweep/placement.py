"""Admission control: how many DDP workers fit on each node, and what a trial holds while it runs.

Every node advertises ``raysweep_slot`` = the DDP workers it can host (its GPUs, or CPUs /
cpus_per_worker without GPUs). A trial holds as many slots as it has workers *on one node*, and
holds nothing else while its workers start, so mixed 1- and 2-worker trials queue instead of
starving each other (Ray 2.60: a trial holding a CPU while its TorchTrainer waits for more
livelocks a small node). Pure decisions, no Ray: the driver and each trial use them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SLOT = "raysweep_slot"


@dataclass(frozen=True)
class Capacity:
    """Worker slots per node, and whether the workers are GPUs."""

    slots_per_node: tuple[int, ...]
    use_gpu: bool
    cpus_per_worker: float
    managed_slots: bool  # nodes advertise raysweep_slot (else a fallback is used)
    node_ids: tuple[str, ...]  # of the nodes in slots_per_node, in the same order
    gpus_per_worker: float = 1.0  # resources.gpus_per_worker: < 1 packs 1-worker trials onto one GPU

    @property
    def largest_node(self) -> int:
        return max(self.slots_per_node, default=0)

    @property
    def total(self) -> int:
        return sum(self.slots_per_node)

    def describe(self) -> str:
        unit = "GPU" if self.use_gpu else "CPU worker"
        if self.use_gpu and self.gpus_per_worker != 1:
            unit = f"GPU worker ({self.gpus_per_worker:g} GPU each)"
        nodes = len(self.slots_per_node)
        return f"{self.total} {unit} slot(s) on {nodes} node(s), at most {self.largest_node} on one node"


def slots_for(
    node_resources: dict[str, float], use_gpu: bool, cpus_per_worker: float, gpus_per_worker: float = 1.0
) -> int:
    """The DDP workers a node without ``raysweep_slot`` hosts: its GPUs / gpus_per_worker, or its
    CPUs / cpus_per_worker."""
    if use_gpu:
        return workers_on(node_resources.get("GPU", 0), gpus_per_worker)
    return int(node_resources.get("CPU", 0) // cpus_per_worker)


def workers_on(gpus: float, gpus_per_worker: float) -> int:
    """Whole workers that fit in ``gpus`` GPUs (a little slack for float sums such as 3 x 0.1)."""
    return int(gpus / gpus_per_worker + 1e-9)


def trial_bundle(
    num_workers: int, capacity: Capacity, warm: bool = True, trainer: bool | None = None
) -> list[dict[str, float]]:
    """The placement-group bundles a trial holds while it runs (placed STRICT_PACK: one node).

    Warm workers (``pool.py``) hold nothing themselves: the trial's one bundle holds all of its
    workers' CPUs/GPUs and slots, so the trial process learns its GPUs from Ray and hands one to
    each rank. With ``ddp_workers: torchtrainer``, one worker runs in the trial process (its
    bundle holds the worker's CPU/GPU); several hold only their slots while the TorchTrainer's
    actors request their own. ``trainer``: whether the trial is a TorchTrainer run (default: with
    ``warm`` False, when it has several workers). A trial that can never fit holds a token amount so it starts, and
    fails at once with an explanation (instead of pending forever).
    """
    if num_workers > capacity.largest_node:
        return [{"memory": 1}]
    trainer = (not warm and num_workers > 1) if trainer is None else trainer
    holds = 0 if trainer else num_workers
    gpu = capacity.gpus_per_worker if capacity.use_gpu else 0
    bundle = {k: v * holds for k, v in {"CPU": capacity.cpus_per_worker, "GPU": gpu}.items() if v * holds}
    if capacity.managed_slots:  # a GPU node's slots are its GPUs: a packed worker holds its share
        bundle[SLOT] = num_workers * (gpu or 1)
    return [bundle or {"memory": 1}]


def concurrency_limit(capacity: Capacity, max_workers: int, requested: int | None) -> int | None:
    """Without managed slots, allow only as many trials as fit at once at their largest size."""
    if capacity.managed_slots:
        return requested
    fit = max(1, sum(s // max_workers for s in capacity.slots_per_node))
    return min(requested, fit) if requested else fit


def rank_gpus(assigned: list[Any], workers: int) -> list[str]:
    """Each rank's GPU among those Ray assigned to the trial's bundle, in order: one each, the
    first of each rank's share with ``gpus_per_worker`` > 1, the one shared GPU when packed."""
    ids = sorted((str(g) for g in assigned), key=lambda g: (len(g), g))
    return [ids[(r * len(ids)) // workers] for r in range(workers)] if ids else []
