"""GPU placement without a GPU (issue 21): Ray advertises GPUs that do not exist and still hands
them out, so which trial and rank gets which GPU is tested on every machine, CI included.

Each cluster here is a real ``ray start --num-gpus N`` on loopback. The probe (tests/gpu_probe.py)
never touches CUDA: it records what it was given and waits until the trials that must share
the machine are all running, so "at the same time" is shown, not timed.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import RAY, ROOT, cli_env, ensure_ray_token, free_port, raysweep, show, stop_cluster, write_spec

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def fake_gpus():
    """A one-node cluster advertising ``gpus`` GPUs (none exist), started on first use and shared
    by the module's tests that ask for the same one; yields its address."""
    started: dict[tuple[int, int], str] = {}

    def start(gpus: int, cpus: int) -> str:
        if (gpus, cpus) in started:
            return started[gpus, cpus]
        port = free_port()
        ensure_ray_token()
        env = {k: v for k, v in cli_env().items() if k != "CUDA_VISIBLE_DEVICES"}
        subprocess.run(
            [RAY, "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1", f"--num-cpus={cpus}",
             f"--num-gpus={gpus}", "--resources", json.dumps({"raysweep_slot": gpus}), "--include-dashboard=false",
             "--disable-usage-stats"],
            check=True, capture_output=True, cwd=ROOT, env=env,
        )  # fmt: skip
        started[gpus, cpus] = f"127.0.0.1:{port}"
        return started[gpus, cpus]

    yield start
    stop_cluster(*started.values())


def run(spec: Path, cluster: str) -> subprocess.CompletedProcess:
    return raysweep("run", str(spec), "--address", cluster, "--storage", str(spec.parent / "runs"), "--wandb", "disabled")


def seen(barrier_dir: Path) -> dict[str, list[dict]]:
    """What every rank recorded, by trial, in rank order."""
    by_trial: dict[str, list[dict]] = {}
    for path in sorted(barrier_dir.glob("*.json")):
        record = json.loads(path.read_text())
        by_trial.setdefault(record["trial"], []).append(record)
    return {t: sorted(rs, key=lambda r: r["rank"]) for t, rs in by_trial.items()}


def test_concurrent_trials_get_disjoint_gpus_and_rank_r_the_rth(tmp_path, fake_gpus):
    cluster = fake_gpus(gpus=4, cpus=4)
    barrier = tmp_path / "seen"
    barrier.mkdir()
    spec = write_spec(
        tmp_path / "g.yaml", name="g", method="grid", metric={"name": "score"},
        parameters={"x": {"values": [1, 2]}},
        raysweep={"train_loop": "tests.gpu_probe:train", "num_gpus": 2,
                  "base_config": {"barrier_dir": str(barrier), "barrier": 2}},
    )  # fmt: skip
    out = run(spec, cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    assert "cluster: 4 GPU slot(s)" in out.stdout
    trials = seen(barrier)
    assert len(trials) == 2  # both ran at once (the probe waited for both)
    devices = {t: [r["device"] for r in ranks] for t, ranks in trials.items()}
    for ranks in devices.values():
        assert len(ranks) == 2 and len(set(ranks)) == 2, devices  # a GPU of its own per rank
        ids = [int(d.removeprefix("cuda:")) for d in ranks]
        assert ids == sorted(ids) and all(0 <= i < 4 for i in ids)  # rank r: the r-th GPU Ray gave the trial
    first, second = devices.values()
    assert not set(first) & set(second), devices  # concurrent trials: disjoint GPUs


def test_a_program_script_sees_cuda_visible_devices_and_local_rank_that_agree(tmp_path, fake_gpus):
    cluster = fake_gpus(gpus=4, cpus=4)
    barrier = tmp_path / "seen"
    barrier.mkdir()
    spec = write_spec(
        tmp_path / "p.yaml", name="p", method="grid", metric={"name": "score"}, program=str(ROOT / "tests" / "gpu_probe.py"),
        parameters={"x": {"values": [1, 2]}, "barrier_dir": {"value": str(barrier)}, "barrier": {"value": 2},
                    "num_gpus": {"value": 2}},
    )  # fmt: skip
    out = run(spec, cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    trials = seen(barrier)
    assert len(trials) == 2
    picked = {}
    for trial, ranks in trials.items():
        visible = [r["cuda_visible_devices"].split(",") for r in ranks]
        assert visible[0] == visible[1] and len(visible[0]) == 2, ranks  # the trial's two GPUs, for both ranks
        picked[trial] = [v[int(r["local_rank"])] for v, r in zip(visible, ranks, strict=True)]
        assert len(set(picked[trial])) == 2  # LOCAL_RANK r picks the r-th: each rank its own GPU
    first, second = picked.values()
    assert not set(first) & set(second), picked


def test_gpus_per_worker_packs_four_one_worker_trials_onto_one_gpu(tmp_path, fake_gpus):
    """resources.gpus_per_worker 0.25: four 1-worker trials run on the one GPU at once. (With a
    whole GPU each they run one at a time, and the probe's barrier of 4 fails every trial.)"""
    cluster = fake_gpus(gpus=1, cpus=4)
    barrier = tmp_path / "seen"
    barrier.mkdir()
    spec = write_spec(
        tmp_path / "k.yaml", name="k", method="grid", metric={"name": "score"},
        parameters={"x": {"values": [1, 2, 3, 4]}},
        raysweep={"train_loop": "tests.gpu_probe:train", "resources": {"gpus_per_worker": 0.25},
                  "base_config": {"barrier_dir": str(barrier), "barrier": 4}},
    )  # fmt: skip
    out = run(spec, cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    assert "cluster: 4 GPU worker (0.25 GPU each) slot(s) on 1 node(s)" in out.stdout
    assert [t["status"] for t in show(tmp_path / "runs" / "k")["trials"]] == ["done"] * 4
    assert {r["device"] for ranks in seen(barrier).values() for r in ranks} == {"cuda:0"}  # one GPU, shared
