"""A train loop that records which Ray node runs each rank of each trial (tests/trial/test_multinode.py).

Every epoch each rank appends one JSON line to ``<record_dir>/x=<x>.jsonl``: the trial's ``x``,
its rank and world size, the epoch, the Ray node id and the name of the node (the custom
resource starting with ``node_`` that the test gave it). A retried trial appends more lines,
so a trial moved to another node shows both. It checkpoints every epoch like the smoke loop.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

import ray

import raysweep


def node_name(node_id: str) -> str | None:
    node = next(n for n in ray.nodes() if n["NodeID"] == node_id)
    return next((r for r in node["Resources"] if r.startswith("node_")), None)


def train(config: dict) -> None:
    ctx = raysweep.get_context()
    node_id = ray.get_runtime_context().get_node_id()
    name = node_name(node_id)
    start = 0
    ckpt = raysweep.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d, open(os.path.join(d, "state.json")) as f:
            start = json.load(f)["epoch"]
    for epoch in range(start + 1, config["epochs"] + 1):
        time.sleep(config["sleep"])
        record = {
            "x": config["x"],
            "rank": ctx.rank,
            "world_size": ctx.world_size,
            "epoch": epoch,
            "node_id": node_id,
            "node": name,
        }
        with open(os.path.join(config["record_dir"], f"x={config['x']}.jsonl"), "a") as f:
            f.write(json.dumps(record) + "\n")
        metrics = {"score": (config["x"] - 0.3) ** 2 + 1.0 / epoch, "epoch": epoch}
        if ctx.is_main:
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump({"epoch": epoch}, f)
                raysweep.report(metrics, checkpoint=d)
        else:
            raysweep.report(metrics)
