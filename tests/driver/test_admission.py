"""Admission that never waits forever (issue 44), on an embedded Ray with 4 GPUs that do not exist
on this 2-CPU machine: a node's slots are its GPUs, but its CPUs host 2 workers.

A 4-worker trial there once waited forever (Ray's "insufficient resources" in driver.log each
minute), and a Ctrl-C then printed "finished" and lost the trials that never started. Now it fails
at once naming the CPUs; on a cluster that can grow (an autoscaler's config on the head) it waits,
said once on the screen; a Ctrl-C lists every trial still pending, exits 130, and ``resume`` runs them.

Modules: ``driver/admission.py`` (a size that never fits), ``driver/outcome.py`` (what a Ctrl-C says),
``ray_settings.py`` (the embedded Ray's workers at nice 0).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import ROOT, cli_env, write_spec

from raysweep.env import RESOURCE_REPORT
from raysweep.ray_settings import STARTED_RAY
from raysweep.runs.files import TRIALS_FILE, read_trials

pytestmark = pytest.mark.ray


def sweep(tmp_path: Path) -> Path:
    return write_spec(
        tmp_path / "mixed.yaml",
        name="mixed",
        method="random",
        run_cap=6,
        metric={"name": "score", "goal": "minimize"},
        parameters={"x": {"min": 0.0, "max": 1.0}, "num_gpus": {"values": [1, 4]}},
        raysweep={"train_loop": "train_loops.smoke:train", "base_config": {"epochs": 2}, "seed": 0},
    )


def start(spec: Path, *args: str, home: Path | None = None) -> subprocess.Popen:
    env = cli_env() | {"RAYSWEEP_FAKE_GPUS": "4"} | ({"HOME": str(home)} if home else {})
    cmd = [sys.executable, "-m", "raysweep", *args, "--storage", str(spec.parent / "runs")]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def ray_workers(driver: int) -> dict[int, tuple[str, int]]:
    """The Ray worker processes under a driver's embedded Ray (their titles begin ``ray::``):
    pid -> (title, niceness), each read once (a worker that ends meanwhile is left out)."""
    found = {}
    for p in psutil.Process(driver).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            title = (p.cmdline() or [""])[0]
            if title.startswith("ray::"):
                found[p.pid] = (title, p.nice())
    return found


def rows(spec: Path) -> dict[str, dict]:
    path = spec.parent / "runs" / "mixed" / TRIALS_FILE
    return {r["trial_id"]: r for r in read_trials(path)} if path.exists() else {}


def test_a_trial_that_never_fits_fails_naming_the_cpus_and_a_growing_cluster_waits_until_ctrl_c(tmp_path):
    spec = sweep(tmp_path)
    home = tmp_path / "head-home"  # an autoscaler's config, as `ray up` leaves it on the head
    home.mkdir()
    (home / "ray_bootstrap_config.yaml").write_text("max_workers: 2\n")
    driver = start(spec, "run", str(spec), "--wandb", "disabled", home=home)
    deadline = time.time() + 120
    while sum(r.get("status") == "done" for r in rows(spec).values()) < 2:  # the 1-worker trials ran
        if driver.poll() is not None or time.time() > deadline:
            driver.kill()
            pytest.fail("the 1-worker trials did not run:\n" + "\n".join(driver.communicate()))
        time.sleep(0.3)
    time.sleep(2)  # the 4-worker ones wait for nodes
    assert driver.poll() is None
    # The embedded Ray runs its workers at nice 0 (ray_settings: Ray's own default is 15), the
    # warm DDP workers that ran the 1-worker trials among them.
    workers = ray_workers(driver.pid)
    assert any(name.startswith("ray::DDPWorker") for name, _ in workers.values()), workers
    assert {nice for _, nice in workers.values()} == {0}, workers
    # Its GCS and raylet started with raysweep's settings: a waiting trial gets freed slots soon.
    control = {
        p.name(): p.environ()
        for p in psutil.Process(driver.pid).children(recursive=True)
        if p.name() in ("raylet", "gcs_server")
    }
    assert set(control) == {"raylet", "gcs_server"}, control.keys()
    for name, environ in control.items():
        assert {k: environ.get(k) for k in STARTED_RAY} == STARTED_RAY, name
    assert control["raylet"][RESOURCE_REPORT] == "20"  # it tells the GCS of freed slots within 20 ms
    driver.send_signal(signal.SIGINT)
    out, err = driver.communicate(timeout=120)
    assert driver.returncode == 130, out + err
    assert "its autoscaler may add nodes" in out and "they wait for nodes" in out, out
    pending = {k for k, r in rows(spec).items() if r["status"] == "pending"}
    assert len(pending) == 4 and {rows(spec)[k]["config"]["num_gpus"] for k in pending} == {4}
    assert "4 of its 6 trials are pending: " in err and all(k in err for k in pending), err
    assert "finished" not in out + err

    # Without the autoscaler they can never be placed: resume runs them, and they fail at once.
    resumed = start(spec, "resume", str(spec.parent / "runs" / "mixed"))
    out, err = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, out + err
    after = rows(spec)
    assert {after[k]["status"] for k in pending} == {"failed"}
    for k in pending:
        assert after[k]["error"].startswith(
            "num_gpus=4 can never be placed: the largest node hosts 2 worker(s) (2 CPU(s), cpus_per_worker 1)"
        ), after[k]["error"]
    assert sum(r["status"] == "done" for r in after.values()) == 2


def test_a_sweep_whose_every_trial_never_fits_is_refused_before_it_starts(tmp_path):
    spec = write_spec(
        tmp_path / "big.yaml",
        name="big",
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        parameters={"num_gpus": {"values": [3, 4]}},
        raysweep={"train_loop": "train_loops.smoke:train"},
    )
    out = start(spec, "run", str(spec), "--wandb", "disabled")
    stdout, stderr = out.communicate(timeout=120)
    assert out.returncode == 2, stdout + stderr
    assert "num_gpus=3 can never be placed: the largest node hosts 2 worker(s) (2 CPU(s)" in stderr
    assert "Sizes that fit: 1-2" in stderr and "Traceback" not in stderr
    assert not (tmp_path / "runs" / "big").exists()  # nothing written
