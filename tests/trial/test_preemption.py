"""A node that announces its end (a spot VM reclaimed): drained through Ray's GCS with a deadline,
as ``ray drain-node --reason DRAIN_NODE_REASON_PREEMPTION`` and autoscaler v2 do, then killed at
the deadline. The trials on it leave at their next checkpoint and go on elsewhere: every epoch
once, none failed under ``max_failures: 0``, nothing new placed on it, ``show`` says "preempted".

The cluster: a head that hosts no trial (the driver's), and for each test a node to drain and a
node to go on on, at their own loopback addresses (tests/support/loopback.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import RAY, ROOT, cli_env, driver_script, ensure_ray_token, raysweep, stop_cluster, write_spec
from loopback import head_port_for, kill_node, start_node

pytestmark = pytest.mark.ray

HEAD_IP = "127.0.0.8"
LOOP = "tests.support.preempt_loop:train"
NOTICE_S = 6


@pytest.fixture(scope="module")
def head():
    ensure_ray_token()
    address = f"{HEAD_IP}:{head_port_for(HEAD_IP)}"
    try:
        start_node(HEAD_IP, "node_head", slots=0)
        yield address
    finally:
        stop_cluster(address)


def records(record_dir: Path) -> list[dict]:
    return [json.loads(line) for p in sorted(record_dir.glob("*.jsonl")) for line in p.read_text().splitlines()]


def node_id(address: str, name: str) -> str:
    body = f"print(next(n['NodeID'] for n in ray.nodes() if n['Alive'] and {name!r} in n['Resources']))"
    out = driver_script(address, body)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def drain(address: str, name: str, deadline_s: int) -> float:
    """Drain the node ``name`` as a spot reclaim does; returns when the GCS had taken it (epoch seconds)."""
    cmd = [RAY, "drain-node", f"--address={address}", f"--node-id={node_id(address, name)}"]
    cmd += ["--reason=DRAIN_NODE_REASON_PREEMPTION", "--reason-message=spot reclaim"]
    cmd += [f"--deadline-remaining-seconds={deadline_s}"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return time.time()


def test_trials_on_a_draining_node_leave_at_their_next_checkpoint_and_lose_no_epoch(head, tmp_path):
    victim_port = start_node("127.0.0.9", "node_victim", head=head)
    start_node("127.0.0.10", "node_spare", head=head)
    record_dir = tmp_path / "records"
    record_dir.mkdir()
    spec = write_spec(
        tmp_path / "spot.yaml",
        name="spot",
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        # every epoch, or every 4 reading the notice: both save at their next report
        parameters={"x": {"values": [0.1, 0.2]}, "checkpoint_every": {"values": [1, 4]}},
        raysweep={
            "train_loop": LOOP,
            "base_config": {"epochs": 12, "sleep": 1.0, "record_dir": str(record_dir)},
            "max_failures": 0,
        },
    )
    cmd = [sys.executable, "-m", "raysweep", "run", str(spec), "--address", head, "--storage", str(tmp_path / "runs")]
    driver = subprocess.Popen(cmd + ["--wandb", "disabled"], cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 240
        while not any(r["node"] == "node_victim" and r["epoch"] >= 2 for r in records(record_dir)):
            assert driver.poll() is None and time.time() < deadline, "no trial reached epoch 2 on the node to drain"
            time.sleep(0.2)
        drained_at = drain(head, "node_victim", NOTICE_S)
        time.sleep(max(0.0, drained_at + NOTICE_S - time.time()))
        kill_node(victim_port)  # the reclaim, at its deadline
        stdout, _ = driver.communicate(timeout=300)
    finally:
        driver.kill()
    assert driver.returncode == 0, stdout[-3000:]

    seen = records(record_dir)
    moved = {r["trial"] for r in seen if r["node"] == "node_victim"}
    assert moved, seen
    assert len({r["trial"] for r in seen}) == 4
    for trial in {r["trial"] for r in seen}:
        epochs = [r["epoch"] for r in seen if r["trial"] == trial]
        assert sorted(epochs) == list(range(1, 13)), (trial, epochs)  # each epoch once: none lost, none repeated
    for trial in moved:  # it went on on the other node
        assert {r["node"] for r in seen if r["trial"] == trial} == {"node_victim", "node_spare"}, trial
    # nothing ran on the node after its notice but the epoch each trial was in, and the next at most
    # (the notice is read every 0.5 s: one report may pass before it is seen)
    late = [(r["trial"], r["epoch"], round(r["t"] - drained_at, 2)) for r in seen if r["node"] == "node_victim"]
    assert all(after < 2.5 for _, _, after in late), late
    shown = json.loads(raysweep("show", str(tmp_path / "runs" / "spot"), "--json").stdout)
    assert sorted(t["status"] for t in shown["trials"]) == ["done"] * 4
    preempted = [t for t in shown["trials"] if t.get("preemptions")]
    assert preempted and all(t["preemptions"] == 1 for t in preempted), shown["trials"]
    table = raysweep("show", str(tmp_path / "runs" / "spot")).stdout
    assert "done (preempted 1x)" in table, table
