"""GPU-hour budgets and the plan (issue 43), on an embedded Ray with 4 GPUs that do not exist:
trials of 1 and 2 workers of a loop whose report takes a known time (the smoke loop's sleep).

The budget: the spend stays within the budget plus one report of the trials running when it ran
out; the sweep ends with the sentence, resumable; ``resume --budget-gpu-hours`` with a larger one
goes on, counting what was spent. The plan: ``validate --plan`` against what the sweeps spent.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, cli_env, raysweep, write_spec

from raysweep.runs.files import TRIALS_FILE, read_trials

pytestmark = pytest.mark.ray

REPORT_S = 1.0  # the smoke loop's sleep: one report's seconds


def sweep(tmp_path: Path, name: str, **raysweep_keys) -> Path:
    doc = {
        "name": name,
        "method": "grid",
        "metric": {"name": "score", "goal": "minimize"},
        "parameters": {"x": {"values": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}, "num_gpus": {"values": [1, 2]}},
        "raysweep": {"train_loop": "train_loops.smoke:train", "base_config": {"epochs": 3, "sleep": REPORT_S}}
        | raysweep_keys,
    }
    return write_spec(tmp_path / f"{name}.yaml", **doc)


def cli(*args: str) -> subprocess.CompletedProcess:
    env = cli_env() | {"RAYSWEEP_FAKE_GPUS": "4"}
    return subprocess.run([sys.executable, "-m", "raysweep", *args], capture_output=True, text=True, env=env, cwd=ROOT)


def spent(run_dir: Path) -> float:
    """What the sweep's trials cost, from its record: workers x the seconds each ran."""
    return sum(r["num_workers"] * r.get("run_s", 0.0) for r in read_trials(run_dir / TRIALS_FILE)) / 3600


def test_a_budget_is_never_overspent_and_resume_with_a_larger_one_goes_on(tmp_path):
    budget = 0.012  # 43 worker-seconds: about three quarters of the 12 trials' 56
    spec = sweep(tmp_path, "capped")
    storage = str(tmp_path / "runs")
    out = cli("run", str(spec), "--storage", storage, "--wandb", "disabled", "--budget-gpu-hours", str(budget))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "sweep capped: budget spent: " in out.stdout and f"of {budget:g} GPU-hours" in out.stdout, out.stdout
    assert "--budget-gpu-hours H" in out.stdout
    run_dir = tmp_path / "runs" / "capped"
    first = spent(run_dir)
    report = 2 * (REPORT_S + 0.5) / 3600  # one report of the largest trial (2 workers) that may be running
    assert budget * 0.8 < first <= budget + report, first
    rows = read_trials(run_dir / TRIALS_FILE)
    waiting = [r for r in rows if r["status"] == "pending"]
    assert waiting and len(rows) < 12 + 1
    settings = json.loads((run_dir / "run.json").read_text())
    assert settings["stopped"].startswith("budget spent:")

    again = cli("resume", str(run_dir), "--budget-gpu-hours", "0.05")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "finished" in again.stdout
    rows = read_trials(run_dir / TRIALS_FILE)
    assert len(rows) == 12 and {r["status"] for r in rows} == {"done"}
    total = spent(run_dir)
    assert first < total <= 0.05 and total < first + 0.02  # counted on from the first driver's spend
    shown = raysweep("show", str(run_dir), "--json")
    cost = json.loads(shown.stdout)["cost"]
    assert cost["budget_hours"] == 0.05 and cost["spent_hours"] == pytest.approx(total, rel=1e-3)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget-gpu-hours", "0"], "--budget-gpu-hours must be a number of hours > 0, got 0.0"),
        (["--budget-gpu-hours", "-2"], "--budget-gpu-hours must be a number of hours > 0, got -2.0"),
        (
            ["--budget-gpu-hours", "0.0001", "--epoch-seconds", "1"],
            "budget 0.0001 GPU-hours is below one trial's cost: the cheapest trial (num_gpus=1, to its first "
            "rung at 1 s a report) costs 0.0008333",
        ),
    ],
)
def test_a_budget_that_cannot_be_is_one_sentence_and_exit_2(tmp_path, args, message):
    spec = sweep(tmp_path, "bad")
    out = cli("run", str(spec), "--storage", str(tmp_path / "runs"), "--wandb", "disabled", *args)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert not (tmp_path / "runs" / "bad").exists()  # nothing written


def test_the_plan_of_a_grid_sweep_is_within_ten_percent_of_its_spend(tmp_path):
    spec = sweep(tmp_path, "planned", max_concurrent=2)
    plan = cli("validate", str(spec), "--plan", "--json", "--epoch-seconds", str(REPORT_S))
    assert plan.returncode == 0, plan.stderr
    hours = json.loads(plan.stdout)["hours"]
    assert hours == pytest.approx(6 * (1 + 2) * 3 * REPORT_S / 3600)  # 6 trials of each size, 3 reports each
    out = cli("run", str(spec), "--storage", str(tmp_path / "runs"), "--wandb", "disabled", "--epoch-seconds", "1")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "plan: expected 0.015 GPU-hours at 1 s a report" in out.stdout  # the banner says it too
    assert spent(tmp_path / "runs" / "planned") == pytest.approx(hours, rel=0.10)


def test_the_plan_of_an_asha_sweep_counts_the_reports_its_early_stopping_leaves(tmp_path):
    """ASHA's stops depend on the order trials come in: the plan runs ASHA itself on trials of
    random quality. A random sweep of 16 trials, one at a time, fixed seed: the reports it made
    against the plan's worker-reports (what it spends, before seconds)."""
    doc = {
        "name": "halving",
        "method": "random",
        "run_cap": 16,
        "metric": {"name": "score", "goal": "minimize"},
        "parameters": {"x": {"min": 0.0, "max": 1.0}, "num_gpus": {"values": [1, 2]}},
        "raysweep": {
            "train_loop": "train_loops.smoke:train",
            "base_config": {"epochs": 4, "sleep": 0.05},
            "scheduler": {"type": "asha", "grace_period": 1, "max_t": 4, "reduction_factor": 2},
            "max_concurrent": 1,
            "seed": 3,
        },
    }
    spec = write_spec(tmp_path / "halving.yaml", **doc)
    plan = json.loads(cli("validate", str(spec), "--plan", "--json").stdout)
    assert 1 < plan["reports_per_trial"] < 4  # early stopping counted: not every trial runs to max_t
    out = cli("run", str(spec), "--storage", str(tmp_path / "runs"), "--wandb", "disabled")
    assert out.returncode == 0, out.stderr[-2000:]
    rows = read_trials(tmp_path / "runs" / "halving" / TRIALS_FILE)
    made = sum(r["num_workers"] * r["iterations"] for r in rows)
    assert made == pytest.approx(plan["worker_reports"], rel=0.10), (made, plan)
