"""Trials that grow when promoted (``raysweep.grow``), run for real: a trial ASHA promotes goes on
from its checkpoint on two DDP workers (gloo), each taking half of its global batch.

Modules: ``driver/promotions.py``, ``driver/admission.py`` (``promoted``), ``search/schedulers.py``
(the pause), ``trial/job_builder.py`` (each rank's batch), ``runs/rows.py`` (``sizes``).
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from conftest import raysweep, show, start_sweep, write_spec

from raysweep.runs.files import TRIALS_FILE, read_trials
from raysweep.runs.results import load

pytestmark = pytest.mark.ray

EPOCHS = 3
# dropout off and one global batch: the digits loop's steps are then the same samples at every size
BASE = {"epochs": EPOCHS, "hidden": 32, "dropout": 0.0, "lr": 0.003, "warmup_steps": 0}
ASHA = {"type": "asha", "grace_period": 1, "max_t": EPOCHS, "reduction_factor": 2}  # rungs at 1 and 2
GROW = {"sizes": [1, 2], "batch": "batch_size"}


def digits_sweep(tmp_path: Path, name: str, **raysweep_block) -> Path:
    doc = {
        "name": name,
        "method": "grid",
        "metric": {"name": "val/loss", "goal": "minimize"},
        "parameters": {"batch_size": {"value": 64}},
        "raysweep": {"train_loop": "train_loops.digits:train", "base_config": BASE, **raysweep_block},
    }
    return write_spec(tmp_path / f"{name}.yaml", **doc)


def reports(run_dir: Path) -> tuple[dict, list[dict]]:
    (row,) = read_trials(run_dir / TRIALS_FILE)
    lines = (Path(row["trial_dir"]) / "result.json").read_text().splitlines()
    return row, [json.loads(line) for line in lines]


def run(spec: Path, cluster: str) -> Path:
    out = raysweep(
        "run", str(spec), "--address", cluster, "--storage", str(spec.parent / "runs"), "--wandb", "disabled"
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return spec.parent / "runs" / spec.stem


@pytest.mark.parametrize(
    "runner",
    ["warm", pytest.param("torchtrainer", marks=pytest.mark.slow)],  # make test: the warm runner's, same rule
)
def test_a_promoted_trial_grows_to_two_workers_and_learns_as_it_would_have_on_one(tmp_path, ray_cluster, runner):
    """The grown trial's curve is the one-worker trial's within 1e-4 (same samples per step, half
    a batch per rank; float sums in another order): without the split each rank would take the
    whole batch, twice the steps' samples, and the curve would differ from epoch 2 on."""
    grown = run(digits_sweep(tmp_path, "grown", scheduler=ASHA, grow=GROW, ddp_workers=runner), ray_cluster)
    fixed = run(digits_sweep(tmp_path, "fixed"), ray_cluster)
    row, grown_reports = reports(grown)
    _, fixed_reports = reports(fixed)

    assert [r["training_iteration"] for r in grown_reports] == [1, 2, 3]
    assert row["status"] == "done" and row["num_workers"] == 2 and row["config"]["num_gpus"] == 2
    assert [(size, iterations) for size, _, iterations, _ in row["sizes"]] == [(1, 0), (2, 1)]
    assert row["worker_s"] > row["run_s"]  # its last two epochs held two workers
    for grown_epoch, fixed_epoch in zip(grown_reports, fixed_reports, strict=True):
        assert grown_epoch["val/loss"] == pytest.approx(fixed_epoch["val/loss"], rel=1e-4)
    assert "grows to 2 workers" in (grown / "driver.log").read_text()
    # every reader takes a grown row: its size reached, its cost charged per segment
    (shown,) = show(grown)["trials"]
    assert shown["num_workers"] == 2 and shown["cost_hours"] == pytest.approx(row["worker_s"] / 3600, abs=1e-6)
    assert load(grown).dataframe()["num_workers"].tolist() == [2]
    page = tmp_path / "grown.html"
    out = raysweep("report", str(grown), "-o", str(page))
    assert out.returncode == 0 and "(2w)" in page.read_text(), out.stderr  # the timeline's row of the trial


@pytest.mark.parametrize(
    "stop",
    # make test: the kill's resume of a grown trial, and test_interrupt.py's Ctrl-C then resume
    [signal.SIGKILL, pytest.param(signal.SIGINT, marks=pytest.mark.slow)],
    ids=["kill", "ctrl-c"],
)
def test_a_driver_stopped_after_a_trial_grew_resumes_it_at_the_size_it_reached(tmp_path, ray_cluster, stop):
    """SIGKILL (or a Ctrl-C, which saves the sweep and exits 130) once the trial runs at 2 workers,
    then ``resume``: it goes on from its checkpoint at 2, each rank with half the global batch, and
    its row keeps the two sizes it held."""
    spec = write_spec(
        tmp_path / "k.yaml",
        name="k",
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        parameters={"batch_size": {"value": 64}},
        raysweep={
            "train_loop": "train_loops.smoke:train",
            "base_config": {"epochs": 4, "sleep": 2.0},
            "scheduler": {"type": "asha", "grace_period": 1, "max_t": 4, "reduction_factor": 2},
            "grow": GROW,
        },
    )
    driver = start_sweep(spec, ray_cluster)
    trials, deadline = tmp_path / "runs" / "k" / TRIALS_FILE, time.time() + 240
    while time.time() < deadline and driver.poll() is None:
        rows = read_trials(trials) if trials.exists() else []
        if rows and rows[0].get("sizes"):  # it started again at 2 workers
            break
        time.sleep(0.2)
    driver.send_signal(stop)
    code = driver.wait(timeout=120)
    assert rows and rows[0].get("sizes"), driver.stderr.read()
    assert code == (130 if stop == signal.SIGINT else -signal.SIGKILL)

    out = raysweep("resume", "k", "--storage", str(tmp_path / "runs"), "--address", ray_cluster)
    assert out.returncode == 0, out.stdout + out.stderr
    row, results = reports(tmp_path / "runs" / "k")
    assert row["status"] == "done" and row["num_workers"] == 2 and row["iterations"] == 4
    assert [size for size, *_ in row["sizes"]] == [1, 2]
    last = {r["training_iteration"]: r for r in results}
    assert [last[i]["world_size"] for i in (1, 2, 3, 4)] == [1, 2, 2, 2]
    assert [last[i]["batch_size"] for i in (1, 2, 3, 4)] == [64, 32, 32, 32]
