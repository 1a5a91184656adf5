"""A trial's ``TrialJob``, built once where the trial comes in from Tune (``build_job``), with
the runner the driver chose for its size (``Sweep.runners``). The job itself is plain data
(``job.py``), its entry point a record of its kind (``entries.py``); building a script's (or a
W&B-style function's) writes the param files it reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from raysweep.growth import global_batch, per_rank_batch
from raysweep.placement import NeverPlaced, shape
from raysweep.trial.entries import kind_of
from raysweep.trial.job import Sweep, TrialJob


class InfeasibleTrial(RuntimeError):
    """A trial asks for a size the cluster can never place (``placement.shape`` says why)."""


def build_job(sweep: Sweep, flat_config: dict[str, Any], trial_id: str, staging_dir: str) -> TrialJob:
    """The job of the trial Tune started with ``flat_config`` (its files go in its run-dir dir)."""
    spec, capacity = sweep.spec, sweep.capacity
    world_size = spec.world_size(flat_config)
    try:
        where = shape(world_size, capacity)
    except NeverPlaced as e:
        raise InfeasibleTrial(str(e)) from None
    if spec.grow is not None:
        flat_config = _rank_batch(spec, flat_config, world_size)
    trial_dir = trial_files_dir(staging_dir, sweep.run_dir)
    common = {
        "trial_id": trial_id,
        "trial_dir": trial_dir,
        "world_size": world_size,
        "shape": where,
        "runner": sweep.runner_for(world_size),
        "metric": spec.objectives.reported,
        "report_timeout_s": spec.report_timeout_s,
        "group_timeout_s": spec.process_group_timeout_s,
        "start_timeout_s": spec.worker_start_timeout_s,
        "holdings": sweep.holdings,
        "network_interface": spec.resources.network_interface,
        "capacity": capacity,
        "max_failures": spec.max_failures,
        "max_preemptions": spec.max_preemptions,
    }
    kind = kind_of(spec)
    job = TrialJob(entry=kind.build(sweep, flat_config, trial_dir, trial_id), **common)
    return job.new_attempt() if kind.runs_own_process else job


def _rank_batch(spec: Any, flat_config: dict[str, Any], world_size: int) -> dict[str, Any]:
    """A growing sweep's trial (``growth.py``): each rank takes its share of the global batch, so
    the trial keeps its batch, and its learning rate, at every size."""
    batch = global_batch(spec.grow, flat_config, spec.base_config)
    return {**flat_config, spec.grow.batch: per_rank_batch(batch, world_size)}


def trial_files_dir(staging_dir: str, run_dir: str) -> str:
    """Where a trial's own files go.

    Its dir in the run dir when this node sees the run dir (the driver's node, or shared
    storage), so they sit next to its results and W&B run from the first write and outlive
    Ray's session; else Ray's staging dir on this node.
    """
    target = Path(run_dir) / Path(staging_dir).name
    if not target.parent.is_dir():
        return staging_dir
    target.mkdir(parents=True, exist_ok=True)
    return str(target)
