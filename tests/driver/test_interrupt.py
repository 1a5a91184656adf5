"""Interrupting a sweep of 2-worker trials, under both runners, and continuing it each time.

One sweep (one trial of two ranks) per runner is interrupted in turn, each time continued by
the command a user (or SLURM) runs next: Ctrl-C then ``resume``; SIGTERM (what SLURM sends before its time limit) then
the requeued job's ``run --resume-existing``; a killed driver then ``resume``; two Ctrl-Cs then
``resume``, which finishes it. SIGTERM and the second Ctrl-C are the driver's own signal handling,
the same under either runner: they run under ``warm`` only. At the end every epoch was reported once, by both ranks. (Embedded Ray's Ctrl-C as the sweep starts is in test_edges.py; a ``program:`` script's
SIGTERM in test_program.py; SLURM's two jobs on one node in test_slurm.py.)

Modules: ``driver/interrupt.py``, ``driver/outcome.py``.
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
from conftest import ROOT, cli_env, processes, show, write_spec
from wandb_server import API_KEY, FakeWandb, serve

from raysweep.runs.files import TRIALS_FILE, read_trials

pytestmark = pytest.mark.ray

WORKERS = {"warm": "DDPWorker", "torchtrainer": "RayTrainWorker"}  # the title of a rank's process
EPOCHS = 8  # four interruptions, each after one new report, leave epochs to run


def _start(cluster: str, storage: Path, *args: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "raysweep", *args, "--address", cluster, "--storage", str(storage)]
    return subprocess.Popen(cmd, cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _reports(trials_file: Path) -> int:
    return sum(r.get("iterations") or 0 for r in read_trials(trials_file)) if trials_file.exists() else 0


def _wait_for_a_new_report(driver: subprocess.Popen, trials_file: Path, cluster: str, marker: str) -> None:
    """Until the trial running now has reported in this driver's life, and its ranks are live."""
    before = _reports(trials_file)
    deadline = time.time() + 240
    while _reports(trials_file) <= before or len(processes(marker, cluster)) < 2:
        if driver.poll() is not None or time.time() >= deadline:
            driver.kill()
            out, err = driver.communicate()
            log = trials_file.parent / "driver.log"  # what Ray and Tune said: the console has only raysweep's lines
            pytest.fail(
                f"no new report; the driver {'exited ' + str(driver.returncode) if driver.returncode != -9 else 'ran on'}"
                f"\n{out[-3000:]}\n{err[-3000:]}\ndriver.log: {log.read_text()[-5000:] if log.exists() else '(none)'}"
            )
        time.sleep(0.3)


def _ranks_end(cluster: str, marker: str) -> None:
    """The trial's rank processes end with the driver (the pattern matched them before)."""
    _, alive = psutil.wait_procs(processes(marker, cluster), timeout=60)
    assert not alive, [p.cmdline() for p in alive]


# make test runs it on warm workers; under torchtrainer (Ray ends a dead owner's Train workers) it is
# slow, and `make test-ray-versions` runs it on every Ray version of the range
@pytest.mark.parametrize("ddp_workers", ["warm", pytest.param("torchtrainer", marks=pytest.mark.slow)])
def test_ctrl_c_sigterm_a_killed_driver_and_two_ctrl_cs_each_resume_without_losing_an_epoch(
    tmp_path, ray_cluster, ddp_workers
):
    """Guarantee: "One Ctrl-C or SIGTERM stops the sweep with its state saved (exit 130, every
    unfinished trial, running or never started, listed as pending, no `program:` script left running, even
    one whose trial's process had died: the driver ends its warm workers, their scripts first, before it
    exits); a second exits at once. That holds
    from the command's first second: a Ctrl-C inside `ray.init` used to crash the interpreter's exit
    (exit 139) and leave a run dir that `resume` met with a traceback." (The first second:
    test_edges.py; scripts, and a trial's process that died: test_program.py.)

    And of resume's guarantee (whole in test_driver.py): "`resume` (after a killed or interrupted
    driver) reads the run dir and runs only what is unfinished, each trial listed once; unfinished
    trials continue from their last checkpoint".
    """
    marker = WORKERS[ddp_workers]
    spec = write_spec(
        tmp_path / "i.yaml",
        name="i",
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        parameters={"x": {"values": [0.3]}, "num_gpus": {"value": 2}},
        raysweep={
            "train_loop": "train_loops.smoke:train",
            "ddp_workers": ddp_workers,
            "base_config": {"epochs": EPOCHS, "sleep": 1.0},
        },
    )
    storage, run_dir = tmp_path / "runs", tmp_path / "runs" / "i"
    trials_file = run_dir / TRIALS_FILE
    resume = ("resume", "i")

    # Ctrl-C: exit 130, the running trial pending, the command to continue printed.
    driver = _start(ray_cluster, storage, "run", str(spec), "--wandb", "offline")
    _wait_for_a_new_report(driver, trials_file, ray_cluster, marker)
    driver.send_signal(signal.SIGINT)
    out, err = driver.communicate(timeout=120)
    assert driver.returncode == 130, out + err
    assert (
        "sweep i interrupted; its state is saved." in err and "Continue it with: " in err and "raysweep resume" in err
    )
    assert "Traceback" not in err
    statuses = [t["status"] for t in show(run_dir)["trials"]]
    assert "pending" in statuses and "running" not in statuses, statuses
    _ranks_end(ray_cluster, marker)

    if ddp_workers == "warm":  # the driver's own signal handling: the same under either runner
        # SIGTERM, then what the requeued SLURM job runs: the same `run` with --resume-existing.
        driver = _start(ray_cluster, storage, "run", str(spec), "--wandb", "offline", "--resume-existing")
        _wait_for_a_new_report(driver, trials_file, ray_cluster, marker)
        driver.send_signal(signal.SIGTERM)
        out, err = driver.communicate(timeout=120)
        assert driver.returncode == 130, out + err
        assert "its run dir exists; continuing it" in out and "raysweep resume" in err
        assert "running" not in [t["status"] for t in show(run_dir)["trials"]]
        _ranks_end(ray_cluster, marker)

    # A killed driver: Ray ends the workers it owned; resume goes on from the last checkpoint.
    driver = _start(ray_cluster, storage, *resume)
    _wait_for_a_new_report(driver, trials_file, ray_cluster, marker)
    driver.kill()
    driver.communicate()
    _ranks_end(ray_cluster, marker)

    if ddp_workers == "warm":
        # Two Ctrl-Cs: the second exits at once, without waiting for the sweep to save.
        driver = _start(ray_cluster, storage, *resume)
        _wait_for_a_new_report(driver, trials_file, ray_cluster, marker)
        driver.send_signal(signal.SIGINT)
        time.sleep(0.2)
        driver.send_signal(signal.SIGINT)
        out, err = driver.communicate(timeout=30)
        assert driver.returncode == 130, out + err
        assert "interrupted again; exiting now (continue the sweep with: " in err and "Traceback" not in err
        _ranks_end(ray_cluster, marker)

    finish = _start(ray_cluster, storage, *resume)
    out, err = finish.communicate(timeout=400)
    assert finish.returncode == 0, out + err
    trials = show(run_dir)["trials"]
    assert [t["config"]["x"] for t in trials] == [0.3]  # the trial listed once
    assert all(t["status"] == "done" and t["iterations"] == EPOCHS for t in trials), trials
    reported_by_trial = [_results(row) for row in read_trials(trials_file)]
    for reported in reported_by_trial:
        assert [r["epoch"] for r in reported] == list(range(1, EPOCHS + 1))  # no epoch lost, none twice
        assert all(r["world_size"] == 2 and r["rank"] == 0.5 for r in reported)  # both ranks, every report
    assert max(r["resumed_from"] for reported in reported_by_trial for r in reported) > 0  # went on from a checkpoint
    if ddp_workers == "warm":  # the driver writes the W&B runs, the same under either runner
        _published_as_one_run(run_dir, trials[0]["trial_id"])


def _published_as_one_run(run_dir: Path, trial_id: str) -> None:
    """The trial's W&B run has an offline dir per start of its driver; ``publish`` syncs them as
    that one run, every epoch in its history (tests/support/wandb_server.py stands in for W&B). The killed
    driver's dir and the two-Ctrl-C one are cut short, and wandb 0.31 could not read them when
    this was written: publish names such dirs, and the last start's dir, which logged every result
    again, holds every epoch."""
    assert len(list(run_dir.glob(f"*/wandb/offline-run-*-{trial_id}"))) >= 4
    server = FakeWandb()
    serve(server)
    env = cli_env() | {"WANDB_BASE_URL": server.url, "WANDB_API_KEY": API_KEY}
    out = subprocess.run(
        [sys.executable, "-m", "raysweep", "publish", str(run_dir)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("published 1 runs to W&B sweep")
    assert "Traceback" not in out.stderr  # the cut-short dirs, if wandb cannot read them, are named in a sentence
    assert {c.variables["name"] for c in server.calls if c.operation == "UpsertBucket"} == {trial_id}
    (sweep,) = server.sweeps.values()
    assert sweep["runs"] == [trial_id]
    assert {h["epoch"] for h in server.runs[trial_id]["history"]} == set(range(1, EPOCHS + 1))


def _results(row: dict) -> list[dict]:
    return [json.loads(line) for line in (Path(row["trial_dir"]) / "result.json").read_text().splitlines()]
