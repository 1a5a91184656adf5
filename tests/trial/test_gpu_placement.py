"""GPU placement without a GPU (issue 21): Ray advertises GPUs that do not exist and still hands
them out, so which trial and rank gets which GPU is tested on every machine, CI included.

Each cluster here is a real ``ray start --num-gpus N`` on loopback. The probe (tests/support/gpu_probe.py)
never touches CUDA: it records what it was given and waits until the trials that must share
the machine are all running, so "at the same time" is shown, not timed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
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
            [
                RAY,
                "start",
                "--head",
                f"--port={port}",
                "--node-ip-address=127.0.0.1",
                f"--num-cpus={cpus}",
                f"--num-gpus={gpus}",
                "--resources",
                json.dumps({"raysweep_slot": gpus}),
                "--include-dashboard=false",
                "--disable-usage-stats",
            ],
            check=True,
            capture_output=True,
            cwd=ROOT,
            env=env,
        )
        started[gpus, cpus] = f"127.0.0.1:{port}"
        return started[gpus, cpus]

    yield start
    stop_cluster(*started.values())


def run(spec: Path, cluster: str) -> subprocess.CompletedProcess:
    return raysweep(
        "run", str(spec), "--address", cluster, "--storage", str(spec.parent / "runs"), "--wandb", "disabled"
    )


def seen(barrier_dir: Path) -> dict[str, list[dict]]:
    """What every rank recorded, by trial, in rank order."""
    by_trial: dict[str, list[dict]] = {}
    for path in sorted(barrier_dir.glob("*.json")):
        record = json.loads(path.read_text())
        by_trial.setdefault(record["trial"], []).append(record)
    return {t: sorted(rs, key=lambda r: r["rank"]) for t, rs in by_trial.items()}


def probe_sweep(tmp_path: Path, name: str, barrier: int, values: int = 2, **raysweep_keys) -> tuple[Path, Path]:
    """A grid of ``values`` trials of the probe, which waits until ``barrier`` trials have run;
    the spec and the dir the ranks record in."""
    seen_dir = tmp_path / "seen"
    seen_dir.mkdir()
    spec = write_spec(
        tmp_path / f"{name}.yaml",
        name=name,
        method="grid",
        metric={"name": "score"},
        parameters={"x": {"values": list(range(1, values + 1))}},
        raysweep={
            "train_loop": "tests.support.gpu_probe:train",
            **raysweep_keys,
            "base_config": {"barrier_dir": str(seen_dir), "barrier": barrier},
        },
    )
    return spec, seen_dir


def gpu_seen(record: dict) -> str:
    """The node's GPU this rank computes on: the entry of its process's CUDA_VISIBLE_DEVICES at the
    index its device names (a script uses cuda:LOCAL_RANK). Unset means every GPU, by index; an
    empty one hides every GPU (Ray before 2.56 in an actor that asks for none: issue 31)."""
    script = record["script"]
    index = int(record["local_rank"]) if script else int(record["device"].removeprefix("cuda:"))
    visible = record["cuda_visible_devices"]
    if visible is None:
        return str(index)
    entries = [e for e in visible.split(",") if e]
    assert entries and index < len(entries), (
        f"rank sees no GPU at index {index}: CUDA_VISIBLE_DEVICES={visible!r} ({record})"
    )
    return entries[index]


@pytest.mark.parametrize("runner", ["warm", pytest.param("torchtrainer", marks=pytest.mark.slow)])
def test_concurrent_trials_get_disjoint_gpus_and_rank_r_the_rth(tmp_path, fake_gpus, runner):
    """Each rank's process can see its GPU, at the index it uses, on every Ray version docs/clusters.md names."""
    cluster = fake_gpus(gpus=4, cpus=4)
    spec, barrier = probe_sweep(tmp_path, "g", barrier=2, num_gpus=2, ddp_workers=runner)
    out = run(spec, cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    assert "cluster: 4 GPU slot(s)" in out.stdout
    trials = seen(barrier)
    assert len(trials) == 2  # both ran at once (the probe waited for both)
    gpus = {t: [gpu_seen(r) for r in ranks] for t, ranks in trials.items()}
    for ranks in gpus.values():
        assert len(set(ranks)) == 2 and set(ranks) <= {"0", "1", "2", "3"}, gpus  # a GPU of its own per rank
        assert ranks == sorted(ranks)  # rank r: the r-th GPU Ray gave the trial
    first, second = gpus.values()
    assert not set(first) & set(second), gpus  # concurrent trials: disjoint GPUs


def test_a_one_worker_trial_in_the_trials_own_process_sees_its_gpu(tmp_path, fake_gpus):
    """ddp_workers: torchtrainer runs a 1-worker trial in the Tune trial's process (in_process)."""
    cluster = fake_gpus(gpus=4, cpus=4)
    spec, barrier = probe_sweep(tmp_path, "o", barrier=2, ddp_workers="torchtrainer")
    out = run(spec, cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    picked = [gpu_seen(r) for ranks in seen(barrier).values() for r in ranks]
    assert len(picked) == 2 and len(set(picked)) == 2, picked


def test_a_program_script_sees_cuda_visible_devices_and_local_rank_that_agree(tmp_path, fake_gpus):
    cluster = fake_gpus(gpus=4, cpus=4)
    barrier = tmp_path / "seen"
    barrier.mkdir()
    spec = write_spec(
        tmp_path / "p.yaml",
        name="p",
        method="grid",
        metric={"name": "score"},
        program=str(ROOT / "tests" / "support" / "gpu_probe.py"),
        parameters={
            "x": {"values": [1, 2]},
            "barrier_dir": {"value": str(barrier)},
            "barrier": {"value": 2},
            "num_gpus": {"value": 2},
        },
    )
    out = run(spec, cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    trials = seen(barrier)
    assert len(trials) == 2
    picked = {}
    for trial, ranks in trials.items():
        visible = [r["cuda_visible_devices"].split(",") for r in ranks]
        assert visible[0] == visible[1] and len(visible[0]) == 2, ranks  # the trial's two GPUs, for both ranks
        picked[trial] = [gpu_seen(r) for r in ranks]
        assert len(set(picked[trial])) == 2  # LOCAL_RANK r picks the r-th: each rank its own GPU
    first, second = picked.values()
    assert not set(first) & set(second), picked


def test_a_warm_worker_serves_one_gpu_for_its_whole_life(tmp_path, fake_gpus):
    """Trials of 1, 2 and 4 workers on 4 GPUs, mixed: every worker process computes on one GPU
    only (a second would cost it a second CUDA context), and 4 GPUs never see more than 4
    workers' contexts at once."""
    cluster = fake_gpus(gpus=4, cpus=4)
    barrier = tmp_path / "seen"
    barrier.mkdir()
    spec = write_spec(
        tmp_path / "m.yaml",
        name="m",
        method="random",
        metric={"name": "score"},
        run_cap=14,
        parameters={"num_gpus": {"values": [1, 1, 2, 4]}, "hold_s": {"values": [0.1, 1.0, 2.0]}},
        raysweep={
            "train_loop": "tests.support.gpu_probe:train",
            "seed": 3,
            "base_config": {"barrier_dir": str(barrier), "barrier": 1},
        },
    )
    out = run(spec, cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    records = [r for ranks in seen(barrier).values() for r in ranks]
    assert len(seen(barrier)) == 14 and {r["world_size"] for r in records} == {1, 2, 4}
    served: dict[int, set[str]] = {}
    for r in records:
        served.setdefault(r["pid"], set()).add(gpu_seen(r))
    assert all(len(gpus) == 1 for gpus in served.values()), served
    assert {g for gpus in served.values() for g in gpus} == {"0", "1", "2", "3"}


def test_gpus_per_worker_packs_four_one_worker_trials_onto_one_gpu(tmp_path, fake_gpus):
    """resources.gpus_per_worker 0.25: four 1-worker trials run on the one GPU at once. (With a
    whole GPU each they run one at a time, and the probe's barrier of 4 fails every trial.)"""
    cluster = fake_gpus(gpus=1, cpus=4)
    spec, barrier = probe_sweep(tmp_path, "k", barrier=4, values=4, resources={"gpus_per_worker": 0.25})
    out = run(spec, cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    assert "cluster: 4 GPU worker (0.25 GPU each) slot(s) on 1 node(s)" in out.stdout
    assert [t["status"] for t in show(tmp_path / "runs" / "k")["trials"]] == ["done"] * 4
    assert {gpu_seen(r) for ranks in seen(barrier).values() for r in ranks} == {"0"}  # one GPU, shared


@pytest.mark.slow  # make test: concurrent trials on disjoint GPUs
def test_two_embedded_sweeps_on_disjoint_gpus_run_side_by_side_and_ctrl_c_stops_only_one(tmp_path):
    """`run --gpus 0,1` and `run --gpus 2,3` on one machine (4 fake GPUs): each starts its own Ray
    with its own GPUs and ports, their first trials run at the same time (the probe waits for
    both), and Ctrl-C in one leaves the other to finish every trial (issue 37)."""
    barrier = tmp_path / "seen"
    barrier.mkdir()
    env = cli_env() | {"RAYSWEEP_FAKE_GPUS": "4"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    sweeps = {}
    for name, gpus in (("a", "0,1"), ("b", "2,3")):
        spec = write_spec(
            tmp_path / f"{name}.yaml",
            name=name,
            method="grid",
            metric={"name": "score"},
            parameters={"x": {"values": [1, 2, 3]}},
            raysweep={
                "train_loop": "tests.support.gpu_probe:train",
                "num_gpus": 2,
                "base_config": {"barrier_dir": str(barrier), "barrier": 2, "hold_s": 3.0},
            },
        )
        cmd = [
            sys.executable,
            "-m",
            "raysweep",
            "run",
            str(spec),
            "--gpus",
            gpus,
            "--storage",
            str(tmp_path / "runs"),
            "--wandb",
            "disabled",
        ]
        sweeps[name] = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
    try:
        deadline = time.time() + 300
        while len(list(barrier.glob("*.json"))) < 4:  # both sweeps' first trials, every rank
            assert time.time() < deadline and all(p.poll() is None for p in sweeps.values()), [
                p.communicate() for p in sweeps.values()
            ]
            time.sleep(0.3)
        os.killpg(sweeps["a"].pid, signal.SIGINT)  # Ctrl-C in a's terminal
        out_a, err_a = sweeps["a"].communicate(timeout=120)
        assert sweeps["a"].returncode == 130, out_a + err_a
        assert sweeps["b"].poll() is None, sweeps["b"].communicate()  # b goes on
        out_b, err_b = sweeps["b"].communicate(timeout=300)
    finally:
        for p in sweeps.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    assert sweeps["b"].returncode == 0, out_b + err_b
    assert [t["status"] for t in show(tmp_path / "runs" / "b")["trials"]] == ["done"] * 3
    for out in (out_a, out_b):
        assert "cluster: 2 GPU slot(s) on 1 node(s)" in out  # its own Ray, with its own two GPUs
    dashboards = [re.search(r"Ray dashboard (\S+)", out).group(1) for out in (out_a, out_b)]
    assert dashboards[0] != dashboards[1], dashboards
    by_sweep: dict[str, set[str]] = {"a": set(), "b": set()}
    for ranks in seen(barrier).values():
        for r in ranks:
            by_sweep["a" if "/runs/a/" in r["trial_dir"] else "b"].add(gpu_seen(r))
    assert by_sweep == {"a": {"0", "1"}, "b": {"2", "3"}}, by_sweep


@pytest.mark.slow  # make test: a rank whose device cannot be set (test_warm_workers)
def test_a_rank_that_cannot_use_its_gpu_fails_its_trial_with_a_sentence_in_show(tmp_path):
    """Guarantee (docs/guarantees.md; the rest in test_warm_workers.py): a rank whose device cannot be set "fails its
    trial with a sentence instead of leaving it waiting: on a machine with GPUs, one that cannot use
    the GPU Ray gave it says so, naming the GPU and `CUDA_VISIBLE_DEVICES`, before its loop starts".

    A GPU node whose torch has no CUDA, as a user meets it: Ray's GPUs are fake and this machine's
    torch is a CPU build; NVIDIA's device files are files of the test's. Seen through `run` and
    `show`, for a 1-worker and a 2-worker trial on warm workers."""
    (tmp_path / "nvidia0").touch()
    env = cli_env() | {"RAYSWEEP_FAKE_GPUS": "2", "RAYSWEEP_GPU_DEVICE_FILES": str(tmp_path / "nvidia[0-9]*")}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    spec = write_spec(
        tmp_path / "g.yaml",
        name="g",
        method="grid",
        metric={"name": "score"},
        parameters={"num_gpus": {"values": [1, 2]}},
        raysweep={"train_loop": "train_loops.smoke:train"},
    )
    cmd = [
        sys.executable,
        "-m",
        "raysweep",
        "run",
        str(spec),
        "--storage",
        str(tmp_path / "runs"),
        "--wandb",
        "disabled",
    ]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 1, out.stdout + out.stderr  # every trial failed
    trials = show(tmp_path / "runs" / "g")["trials"]
    assert sorted(t["num_workers"] for t in trials) == [1, 2]
    for t in trials:
        assert t["status"] == "failed" and t["iterations"] == 0, t
        assert "the rank cannot use its GPU" in t["error"] and "CUDA_VISIBLE_DEVICES='" in t["error"], t["error"]
        assert "a build without CUDA" in t["error"] or "CUDA here sees 0 device(s)" in t["error"], t["error"]
