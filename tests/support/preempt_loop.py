"""A loop for preemption tests (tests/trial/test_preemption.py): each epoch every rank appends
``{trial, rank, epoch, node, t}`` to ``<record_dir>/<trial>.jsonl`` (``trial``: its x and
checkpoint_every); rank 0 checkpoints every
``checkpoint_every`` epochs, or at once when ``raysweep.get_context().preemption`` says a node of
the trial drains, and a restarted trial goes on from its checkpoint."""

from __future__ import annotations

import json
import os
import tempfile
import time

import ray

import raysweep


def _node_name() -> str | None:
    here = ray.get_runtime_context().get_node_id()
    node = next(n for n in ray.nodes() if n["NodeID"] == here)
    return next((r for r in node["Resources"] if r.startswith("node_")), None)


def train(config: dict) -> None:
    ctx = raysweep.get_context()
    name = _node_name()
    start = 0
    ckpt = raysweep.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d, open(os.path.join(d, "state.json")) as f:
            start = json.load(f)["epoch"]
    for epoch in range(start + 1, config["epochs"] + 1):
        time.sleep(config["sleep"])
        trial = f"x={config['x']},every={config['checkpoint_every']}"
        record = {"trial": trial, "rank": ctx.rank, "epoch": epoch, "node": name, "t": time.time()}
        with open(os.path.join(config["record_dir"], f"{trial}.jsonl"), "a") as f:
            f.write(json.dumps(record) + "\n")
        metrics = {"score": (config["x"] - 0.3) ** 2 + 1.0 / epoch, "epoch": epoch}
        saves = epoch % config["checkpoint_every"] == 0 or ctx.preemption is not None
        if ctx.is_main and saves:
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump({"epoch": epoch}, f)
                raysweep.report(metrics, checkpoint=d)
        else:
            raysweep.report(metrics)
