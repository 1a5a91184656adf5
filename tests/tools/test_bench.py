"""The benchmark's quick mode runs end to end and writes a results file with the expected keys.

Only the cheap part (per-trial overhead, 1 worker: raysweep, Optuna + torchrun, plain Tune)
runs here, on a real local Ray and a real torchrun; no timing is asserted, machines differ.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench  # run by `make bench` before its parts, not by `make test`

REPO = Path(__file__).resolve().parents[2]
LOCK = "/tmp/raysweep-ray.lock"  # other sessions' Ray tests share this machine


def quick_part(tmp_path: Path, module: str, results: str, timeout: int) -> dict:
    """``module --quick`` under the Ray lock, its results written under ``tmp_path``: the file ``results``.json."""
    env = {**os.environ, "BENCH_RESULTS_DIR": str(tmp_path)}
    cmd = ["flock", LOCK, sys.executable, "-m", module, "--quick"]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads((tmp_path / f"{results}.json").read_text())


@pytest.mark.skipif(shutil.which("flock") is None, reason="needs flock(1)")
def test_quick_overhead_part_writes_results(tmp_path: Path) -> None:
    cmd = [
        "flock",
        LOCK,
        sys.executable,
        "-m",
        "bench.overhead",
        "--workers",
        "1",
        "--quick",
        "--systems",
        "acd",
        "--trials",
        "1",
    ]
    env = {**os.environ, "BENCH_RESULTS_DIR": str(tmp_path)}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]

    data = json.loads((tmp_path / "overhead_1w_quick.json").read_text())
    assert data["part"] == "overhead_1w" and data["quick"] is True and data["workers"] == 1
    assert data["machine"]["cpus"] >= 1
    for key in ("a_raysweep", "c_torchrun_agent", "d_plain_tune"):
        system = data["systems"][key]
        assert system["failed"] == [], system["failed"]
        assert system["trials_done"] == data["trials"]
        assert system["per_trial_s"] > 0
        assert all(s > 0 for s in system["each_s"])


@pytest.mark.skipif(shutil.which("flock") is None, reason="needs flock(1)")
def test_quick_scale_part_records_every_trial(tmp_path: Path) -> None:
    cmd = ["flock", LOCK, sys.executable, "-m", "bench.scale", "--quick", "--trials", "8"]
    env = {**os.environ, "BENCH_RESULTS_DIR": str(tmp_path)}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]

    data = json.loads((tmp_path / "scale_quick.json").read_text())
    sweep = data["sweep"]
    assert sweep["exit_code"] == 0 and sweep["recorded"] == sweep["done_with_3_reports"] == 8
    assert sweep["ideal_s"] == 4.0 and sweep["efficiency"] > 0 and len(sweep["driver_rss_mib_by_tenth"]) == 10
    assert set(data["driver_per_result_us"]) == {"10_trials_us", "100_trials_us"}


@pytest.mark.skipif(shutil.which("flock") is None, reason="needs flock(1)")
def test_quick_wandb_agent_search_runs_wandbs_engine_with_torchrun(tmp_path: Path, wandb_oracle) -> None:  # noqa: ARG001  (its venv)
    """System (c) of part 3: W&B's engine proposes each trial and its hyperband runs every 2 s."""
    cmd = ["flock", LOCK, sys.executable, "-m", "bench.search", "--method", "bayes", "--quick", "--wandb-agent", "2"]
    env = {**os.environ, "BENCH_RESULTS_DIR": str(tmp_path)}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]

    data = json.loads((tmp_path / "search_wandb_bayes_every2s_quick.json").read_text())  # the summary
    (run,) = json.loads((tmp_path / "raw" / "search_wandb_bayes_every2s_quick.json").read_text())["runs"]
    assert data["system"] == "wandb agent, hyperband every 2 s" and data["failed"] == []
    assert "trials" not in data["runs"][0] and data["runs"][0]["trials_done"] == 3
    assert run["trials_done"] == 3 and len(run["trials"]) == 3
    for t in run["trials"]:
        assert 1 <= t["config"]["arch.stages.0.repeat"] <= 4 and t["epochs"] in (1, 2)  # W&B's draw, its reports


def test_quick_readers_part_times_show_and_report(tmp_path: Path) -> None:
    env = {**os.environ, "BENCH_RESULTS_DIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "bench.readers", "--quick"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    data = json.loads((tmp_path / "readers_quick.json").read_text())
    assert data["trials"] == 16 and all(data[k] > 0 for k in ("show_s", "show_json_s", "report_s"))


def test_quick_first_report_part_stamps_both_sizes(tmp_path: Path) -> None:
    data = quick_part(tmp_path, "bench.first_report", "first_report_quick", timeout=600)
    for size in ("1w", "2w"):
        (run,) = data["runs"][size]
        assert (
            0
            < run["raysweep imported"]
            < run["Tuner.fit called"]
            < run["loop's first report"]
            == pytest.approx(data["median_s"][size], abs=0.01)
        )


def test_search_proxy_replays_samplers_on_the_grids_recorded_values(tmp_path: Path) -> None:
    import shutil

    shutil.copy(REPO / "bench" / "results" / "search_grid.json", tmp_path)
    env = {**os.environ, "BENCH_RESULTS_DIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "bench.search_proxy", "--seeds", "2"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    data = json.loads((tmp_path / "search_proxy_quick.json").read_text())
    for row in data["variants"].values():
        assert len(row["counts"]) == 2 and all(1 <= c <= data["budget"] + 1 for c in row["counts"])
    assert "| TPE, raysweep's defaults (10 random first) |" in proc.stdout


def test_quick_storage_part_counts_what_each_policy_leaves_and_times_a_persist(tmp_path: Path) -> None:
    data = quick_part(tmp_path, "bench.storage", "storage_quick", timeout=900)
    assert data["tune_default"]["checkpoints"] > data["policy"]["checkpoints"] > 0
    assert all(s["s3"] > 0 and s["local"] > 0 for s in data["persist_s"].values())


def test_quick_preemption_part_preempts_and_loses_no_epoch(tmp_path: Path) -> None:
    data = quick_part(tmp_path, "bench.preemption", "preemption_quick", timeout=900)
    assert data["with"]["preemptions"] >= 1 and data["with"]["epochs_trained_again"] == 0
    assert data["with"]["done"] == data["without"]["done"] == data["trials"]


def test_quick_fill_part_runs_the_tail_and_replays_it(tmp_path: Path) -> None:
    data = quick_part(tmp_path, "bench.fill", "fill_quick", timeout=900)
    assert len(data["sizes_real"]) == len(data["sizes_simulated"]) == 7
    assert data["wall_s"]["real"] > 0 and data["slots_busy"]["simulated"] > 0
