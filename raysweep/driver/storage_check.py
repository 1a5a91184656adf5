"""A local ``--storage`` on a cluster: every node that can host a trial must see the run dir, as
Tune writes each trial's checkpoints there from the trial's node. Checked the way Ray checks its
own storage path (a marker written here, looked for from a task on every node), before any trial
runs, so a node with a disk of its own is one sentence, not trials failing at their first report.
A draining node is not asked: Ray places nothing new there, and no trial of this sweep will run
there either (``trial/preemption.py``)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raysweep.errors import UserError
from raysweep.private_api import draining_nodes
from raysweep.runs.storage import MARKER

ANSWER_S = 60.0  # a task with no resources starts at once on a live node


@ray.remote(num_cpus=0)
def _sees(path: str, token: str) -> bool:
    try:
        return Path(path).read_text() == token
    except OSError:
        return False


def check_seen_by_every_node(run_dir: Path) -> None:
    """Refuse a run dir some node of the cluster cannot see (nothing to check on one node)."""
    draining = draining_nodes()
    nodes = [
        n
        for n in ray.nodes()
        if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0 and n["NodeID"] not in draining
    ]
    if len(nodes) < 2:
        return
    marker = run_dir / MARKER
    token = uuid.uuid4().hex
    marker.write_text(token)
    try:
        answers = [
            _sees.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(
                str(marker), token
            )
            for n in nodes
        ]
        deadline = time.monotonic() + ANSWER_S
        seen = [_answer(answer, deadline) for answer in answers]
    finally:
        marker.unlink(missing_ok=True)
    blind = [n["NodeManagerAddress"] for n, ok in zip(nodes, seen) if not ok]
    if blind:
        raise UserError(
            f"--storage {run_dir.parent}: node(s) {', '.join(blind)} of the cluster cannot see it (the run dir "
            f"{run_dir} is on this machine's disk), and Ray Tune writes each trial's checkpoints there from the "
            "trial's node; use a directory every node mounts at the same path (NFS, a shared scratch) or a cloud "
            "URI (--storage s3://bucket/prefix)"
        )


def _answer(answer: ray.ObjectRef, deadline: float) -> bool:
    """A node's answer; a node that left or began to drain since it was listed hosts no trial: no matter."""
    try:
        return ray.get(answer, timeout=max(0.1, deadline - time.monotonic()))
    except ray.exceptions.TaskUnschedulableError:
        return True
