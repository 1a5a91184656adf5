"""Two Ray nodes that share no disk, as two machines: the worker node runs in a mount namespace of
its own with an empty tmpfs over the head's disk (``head_disk``: the local storage, the driver's
local copies), so nothing the head writes there is visible to it (needs root; skipped elsewhere).

* A local ``--storage`` there is refused before any trial runs, naming the two fixes.
* On S3, trials run on both nodes, one spans both, and a node killed under a trial costs it a
  restart from its checkpoint on S3, on the node left: every epoch once, nothing failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, cli_env, ensure_ray_token, raysweep, stop_cluster, write_spec
from loopback import head_port_for, kill_node, start_node

pytestmark = [
    pytest.mark.ray,
    pytest.mark.skipif(os.geteuid() != 0, reason="a node with a disk of its own needs root (unshare -m, mount)"),
]

HEAD_IP, WORKER_IP = "127.0.0.6", "127.0.0.7"
LOOP = "tests.support.node_loop:train"


@pytest.fixture(scope="module")
def head_disk(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("head_disk")


@pytest.fixture(scope="module")
def apart(s3, head_disk):
    """Head and worker, 2 slots (fake GPUs) each, the worker blind to ``head_disk``; (address, worker raylet port)."""
    ensure_ray_token()
    address = f"{HEAD_IP}:{head_port_for(HEAD_IP)}"
    try:
        start_node(HEAD_IP, "node_head")
        port = start_node(WORKER_IP, "node_worker", head=address, own_disk=str(head_disk))
        yield address, port
    finally:
        stop_cluster(address)


def records(record_dir: Path) -> list[dict]:
    return [json.loads(line) for p in sorted(record_dir.glob("*.jsonl")) for line in p.read_text().splitlines()]


def node_sweep(tmp_path: Path, name: str, **raysweep_block) -> tuple[Path, Path]:
    record_dir = tmp_path / f"{name}-records"  # outside head_disk: both nodes write it
    record_dir.mkdir()
    base = {"record_dir": str(record_dir)} | raysweep_block.pop("base_config", {})
    spec = write_spec(
        tmp_path / f"{name}.yaml",
        name=name,
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        parameters=raysweep_block.pop("parameters"),
        raysweep={"train_loop": LOOP, "base_config": base, **raysweep_block},
    )
    return spec, record_dir


def test_a_local_storage_the_worker_node_cannot_see_is_refused_before_any_trial(apart, head_disk, tmp_path):
    address, _ = apart
    spec, record_dir = node_sweep(tmp_path, "local", parameters={"x": {"values": [0.1, 0.2, 0.3, 0.4]}})
    storage = head_disk / "runs"
    out = raysweep("run", str(spec), "--address", address, "--storage", str(storage), "--wandb", "disabled")
    assert out.returncode == 2, out.stderr + out.stdout
    assert f"node(s) {WORKER_IP} of the cluster cannot see it" in out.stderr, out.stderr
    assert "a directory every node mounts" in out.stderr and "--storage s3://" in out.stderr
    assert "Traceback" not in out.stderr
    assert records(record_dir) == []  # no trial ran
    assert not (storage / "local").exists()  # nothing left to block the retry


def run_on_s3(s3, address: str, head_disk: Path, spec: Path, bucket: str, **popen) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "raysweep", "run", str(spec), "--address", address, "--storage", s3.uri(bucket)]
    env = cli_env() | {"RAYSWEEP_CACHE_DIR": str(head_disk / "cache")}
    return subprocess.Popen(cmd + ["--wandb", "offline"], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)


def statuses(s3, bucket: str, name: str) -> list[str]:
    out = raysweep("show", s3.uri(bucket, f"runs/{name}"), "--json")
    assert out.returncode == 0, out.stderr
    return sorted(t["status"] for t in json.loads(out.stdout)["trials"])


@pytest.mark.parametrize(
    "ddp_workers",
    ["warm", pytest.param("torchtrainer", marks=pytest.mark.slow)],  # make test: warm, and S3 under torchtrainer's
)  # 1-worker path in tests/driver/test_s3_storage.py
def test_on_s3_a_trial_runs_on_the_worker_node_and_one_spans_both(s3, apart, head_disk, tmp_path, ddp_workers):
    """Guarantee: "Storage: a checkpoint reaches the storage from the node that made it (Tune's, from
    the trial's process; a warm rank 0 on another node stages its own there), and a trial restarted
    on any node reads it back from the storage, so nodes need share no disk when `--storage` is a URI
    (tests/trial/test_separate_disks.py: a node in a mount namespace of its own). A local `--storage`
    that some node of the cluster cannot see is refused before any trial runs." (With the tests
    around this one.)"""
    address, _ = apart
    bucket = s3.bucket()
    spec, record_dir = node_sweep(
        tmp_path,
        "span",
        # three 1-worker trials at once: the head has 2 slots, so one runs on the worker alone
        parameters={"num_gpus": {"values": [1, 4]}, "x": {"values": [0.1, 0.2, 0.3]}},
        base_config={"epochs": 2, "sleep": 1.0},
        ddp_workers=ddp_workers,
        checkpoints={"keep_best_trials": "all"},
    )
    driver = run_on_s3(s3, address, head_disk, spec, bucket)
    stdout, _ = driver.communicate(timeout=300)
    assert driver.returncode == 0, stdout[-3000:]
    assert statuses(s3, bucket, "span") == ["done"] * 6
    seen = records(record_dir)
    assert {r["node"] for r in seen if r["world_size"] == 4} == {"node_head", "node_worker"}
    assert "node_worker" in {r["node"] for r in seen if r["world_size"] == 1}  # a trial ran on the worker alone
    keys = s3.keys(bucket)
    trial_dirs = {k.split("/")[2] for k in keys if k.startswith("runs/span/run_trial_")}
    assert len(trial_dirs) == 6
    for trial in trial_dirs:  # each trial's checkpoints reached S3, from whichever node ran it
        assert any(k.startswith(f"runs/span/{trial}/checkpoint_") for k in keys), (trial, keys)


def test_on_s3_a_killed_node_costs_its_trial_a_restart_from_s3_on_the_node_left(s3, apart, head_disk, tmp_path):
    address, worker_port = apart
    bucket = s3.bucket()
    spec, record_dir = node_sweep(
        tmp_path,
        "kill",
        parameters={"x": {"values": [0.1, 0.2, 0.3, 0.4]}},
        base_config={"epochs": 4, "sleep": 1.0},
        max_failures=2,
    )
    driver = run_on_s3(s3, address, head_disk, spec, bucket)
    try:
        deadline = time.time() + 240
        # a trial on the worker node that has saved a checkpoint (its epoch 2 begun)
        while not any(r["node"] == "node_worker" and r["epoch"] >= 2 for r in records(record_dir)):
            assert driver.poll() is None and time.time() < deadline, "no trial reached epoch 2 on the worker node"
            time.sleep(0.2)
        before = records(record_dir)
        assert kill_node(worker_port) > 1
        stdout, _ = driver.communicate(timeout=300)
    finally:
        driver.kill()
    assert driver.returncode == 0, stdout[-3000:]
    assert statuses(s3, bucket, "kill") == ["done"] * 4
    seen = records(record_dir)
    cut = {r["x"] for r in before if r["node"] == "node_worker" and r["epoch"] >= 2}
    for x in cut:  # it went on on the head from its checkpoint on S3, which the worker node wrote
        head_epochs = [r["epoch"] for r in seen if r["x"] == x and r["node"] == "node_head"]
        assert head_epochs and min(head_epochs) >= 2 and max(head_epochs) == 4, (x, seen)
