"""A real two-node Ray cluster on this machine: trials spread over nodes, DDP workers stay on one,
and a node killed mid-sweep loses no trial.

Both nodes are ``ray start`` processes on 127.0.0.1 sharing Ray's temp dir (a second node may
not have its own), so the worker node gets its own ports. Each node advertises
``raysweep_slot`` and a resource naming it (``node_head`` / ``node_worker``); the loop
(tests/node_loop.py) records the node every rank of every trial ran on.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import RAY, ROOT, cli_env, ensure_ray_token, free_port, raysweep, show, stop_cluster, write_spec

pytestmark = pytest.mark.ray

LOOP = "tests.node_loop:train"


def _ray_start(*args: str) -> None:
    out = subprocess.run(
        [RAY, "start", "--node-ip-address=127.0.0.1", "--num-cpus=2", "--disable-usage-stats", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=cli_env(),
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.fixture(scope="module")
def two_nodes():
    """Head and worker, 2 CPUs and 2 worker slots each; yields (address, the worker's raylet port)."""
    port, raylet_port = free_port(), free_port()
    ensure_ray_token()
    try:
        _ray_start(
            "--head",
            f"--port={port}",
            "--include-dashboard=false",
            "--resources",
            json.dumps({"raysweep_slot": 2, "node_head": 1}),
        )
        _ray_start(
            f"--address=127.0.0.1:{port}",
            "--resources",
            json.dumps({"raysweep_slot": 2, "node_worker": 1}),
            f"--node-manager-port={raylet_port}",
            f"--object-manager-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}",
            f"--dashboard-agent-grpc-port={free_port()}",
            f"--runtime-env-agent-port={free_port()}",
            f"--metrics-export-port={free_port()}",
            "--min-worker-port=20000",
            "--max-worker-port=20999",
        )
        yield f"127.0.0.1:{port}", raylet_port
    finally:
        stop_cluster(f"127.0.0.1:{port}")


def records(record_dir: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(record_dir.glob("*.jsonl")) for line in path.read_text().splitlines()]


def node_sweep(tmp_path: Path, name: str, **doc) -> tuple[Path, Path]:
    record_dir = tmp_path / f"{name}-records"
    record_dir.mkdir()
    doc["base_config"] = {"record_dir": str(record_dir)} | doc.get("base_config", {})
    spec = write_spec(
        tmp_path / f"{name}.yaml",
        name=name,
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        train_loop=LOOP,
        **doc,
    )
    return spec, record_dir


def test_trials_run_on_both_nodes_and_ddp_workers_share_one(tmp_path, two_nodes):
    address, _ = two_nodes
    spec, record_dir = node_sweep(
        tmp_path,
        "spread",
        base_config={"epochs": 2, "sleep": 1.0},
        parameters={"x": {"values": [0.1, 0.2]}, "num_gpus": {"values": [1, 2]}},
    )
    out = raysweep("run", str(spec), "--address", address, "--storage", str(tmp_path / "runs"), "--wandb", "disabled")
    assert out.returncode == 0, out.stderr + out.stdout
    assert "cluster: 4 CPU worker slot(s) on 2 node(s), at most 2 on one node" in out.stdout
    trials = show(tmp_path / "runs" / "spread")["trials"]
    assert len(trials) == 4 and all(t["status"] == "done" for t in trials)

    seen = records(record_dir)
    assert {r["node"] for r in seen} == {"node_head", "node_worker"}
    assert len({r["node_id"] for r in seen}) == 2
    for x in (0.1, 0.2):
        ddp = [r for r in seen if r["x"] == x and r["world_size"] == 2]
        assert {r["rank"] for r in ddp} == {0, 1}
        assert len({r["node_id"] for r in ddp}) == 1, ddp  # both workers of the trial on one node


def _kill_node(raylet_port: int) -> int:
    """SIGKILL the worker node's raylet and everything under it (its workers and agents)."""
    raylet = next(
        p
        for p in psutil.process_iter(["name", "cmdline"])
        if p.info["name"] == "raylet" and f"--node_manager_port={raylet_port}" in (p.info["cmdline"] or [])
    )
    tree = [*raylet.children(recursive=True), raylet]
    for p in tree:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(tree, timeout=30)
    return len(tree)


def test_killing_a_node_mid_sweep_loses_no_trial(tmp_path, two_nodes):
    address, raylet_port = two_nodes
    xs = [0.1, 0.2, 0.3, 0.4, 0.5]
    spec, record_dir = node_sweep(
        tmp_path,
        "kill",
        base_config={"epochs": 4, "sleep": 1.0},
        max_failures=2,
        parameters={"x": {"values": xs}},
    )
    cmd = [
        sys.executable,
        "-m",
        "raysweep",
        "run",
        str(spec),
        "--address",
        address,
        "--storage",
        str(tmp_path / "runs"),
        "--wandb",
        "disabled",
    ]
    driver = subprocess.Popen(cmd, cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not any(r["node"] == "node_worker" and r["epoch"] >= 2 for r in records(record_dir)):
            assert driver.poll() is None and time.time() < deadline, "no trial reached epoch 2 on the worker node"
            time.sleep(0.2)
        before = records(record_dir)
        on_worker = {r["x"] for r in before if r["node"] == "node_worker"}
        checkpointed = {r["x"] for r in before if r["node"] == "node_worker" and r["epoch"] >= 2}  # epoch 1 saved
        assert _kill_node(raylet_port) > 1
        stdout, stderr = driver.communicate(timeout=300)
    finally:
        driver.kill()
    assert driver.returncode == 0, stderr + stdout

    trials = {t["config"]["x"]: t for t in show(tmp_path / "runs" / "kill")["trials"]}
    summary = {x: (t["status"], t["iterations"], (t.get("error") or "")[-300:]) for x, t in trials.items()}
    all_done = sorted(trials) == xs and all(t["status"] == "done" and t["iterations"] == 4 for t in trials.values())
    assert all_done, f"{summary}\n{stdout[-3000:]}\n{stderr[-3000:]}"
    seen = records(record_dir)
    moved = {r["x"] for r in seen if r["node"] == "node_head"} & on_worker
    assert moved, "a trial that ran on the killed node was not retried on the head"
    for x in moved:  # each went on to the last epoch on the head
        assert max(r["epoch"] for r in seen if r["x"] == x and r["node"] == "node_head") == 4
    assert checkpointed & moved, (checkpointed, moved)  # the trial seen at epoch 2 was cut off there, and retried
    for x in checkpointed & moved:  # and one that had saved a checkpoint went on from it
        assert min(r["epoch"] for r in seen if r["x"] == x and r["node"] == "node_head") >= 2
