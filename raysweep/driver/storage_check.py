"""A local ``--storage`` on a cluster: every node that can host a trial must see the run dir, as
Tune writes each trial's checkpoints there from the trial's node. Checked the way Ray checks its
own storage path (a marker written here, looked for from a task on every node), before any trial
runs, so a node with a disk of its own is one sentence, not trials failing at their first report."""

from __future__ import annotations

import uuid
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raysweep.errors import UserError
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
    nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]
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
        seen = ray.get(answers, timeout=ANSWER_S)
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
