"""``raysweep.run`` / ``resume`` from a user's script (tests/support/api_script.py), whose functions live in
its ``__main__``: W&B's style and raysweep's, on one shared ``ray start`` cluster.

Modules: ``trial/wandb_function.py``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, cli_env, raysweep, show
from wandb_records import run_contents

import raysweep as api
from raysweep.runs.files import TRIALS_FILE, read_trials

SCRIPT = ROOT / "tests" / "support" / "api_script.py"


def script(mode: str, cluster: str, storage: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), mode, cluster, str(storage)],
        cwd=ROOT,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, out + err
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.ray
@pytest.mark.parametrize("ddp_workers", ["warm", pytest.param("torchtrainer", marks=pytest.mark.slow)])
def test_a_wandb_style_function_of_main_runs_on_two_ranks_reaches_asha_and_logs_offline(
    tmp_path, ray_cluster, ddp_workers
):
    """``wandb.agent(sweep_id, function=main)`` becomes ``raysweep.run(sweep, function=main)``: every
    rank's ``wandb.config`` is its trial's, ``wandb.log`` of the metric is a report ASHA acts on,
    and the trial's offline W&B run holds what was logged, a stopped trial's too.

    Guarantee: "A trial the scheduler stops ends its ranks at a report, their W&B runs finished and
    written (a W&B-style function's offline run holds every step it logged), under `torchtrainer` as on
    warm workers: a stopped Ray Train run's ranks end at their next report (they do not wait at each
    report for Tune's word, as warm ranks do, so they may log a step past the one Tune stopped at)."
    """
    data = finished(script(f"wandb {ddp_workers}", ray_cluster, tmp_path / "runs"))
    trials = {t["config"]["lr"]: t for t in data["trials"]}
    assert sorted(trials) == ([0.3, 2.0, 3.0] if ddp_workers == "warm" else [0.3, 2.0])
    assert {trials[lr]["status"] for lr in trials if lr > 1} == {"stopped"} and trials[2.0]["iterations"] == 1
    assert trials[0.3]["status"] == "done" and trials[0.3]["iterations"] == 3
    for row in read_trials(tmp_path / "runs" / "wb" / TRIALS_FILE):
        trial_dir = Path(row["trial_dir"])
        seen = [json.loads((trial_dir / f"config.rank{r}.json").read_text()) for r in (0, 1)]
        assert seen == [{"lr": row["config"]["lr"], "epochs": 3, "num_gpus": 2, "world_size": 2}] * 2
        runs = [run_contents(f) for f in trial_dir.glob("wandb/offline-run-*/*.wandb")]
        # no sweep id W&B did not create (docs/differences-from-wandb.md)
        assert all(r["run"].get("sweep_id", "") == "" for r in runs)
        (trial_run,) = [r for r in runs if r["run"].get("id") == row["trial_id"]]  # rank 0's run is the trial's
        assert trial_run["config"]["lr"] == row["config"]["lr"] and trial_run["run"]["group"] == "wb"
        epochs = [h["epoch"] for h in trial_run["history"]]
        if ddp_workers == "warm":  # its ranks wait at each report for Tune's word
            assert epochs == list(range(1, row["iterations"] + 1))
        else:  # Ray Train's ranks go on while Tune decides: they stop at a later report, every step logged
            assert epochs == list(range(1, len(epochs) + 1)) and len(epochs) >= row["iterations"]
        assert trial_run["exit_code"] == 0
    assert {"trial_id", "status", "lr", "loss", "epoch", "iterations", "num_workers", "wall_s"} <= set(data["columns"])
    assert {r["trial_id"]: r["loss"] for r in data["rows"]} == {t["trial_id"]: t["metric"] for t in data["trials"]}


@pytest.mark.ray
def test_a_closure_is_swept_and_its_results_come_back_as_a_dataframe(tmp_path, ray_cluster):
    data = finished(script("closure", ray_cluster, tmp_path / "runs"))
    assert [t["status"] for t in data["trials"]] == ["done"] * 3
    for t in data["trials"]:  # the captured 0.25, not a default, was used
        assert t["metric"] == pytest.approx((t["config"]["x"] - 0.25) ** 2 + 0.5)
    assert data["trials"] == show(tmp_path / "runs" / "closure")["trials"]
    assert [r["trial_id"] for r in data["rows"]] == [t["trial_id"] for t in data["trials"]]  # best first
    assert {"x", "score", "status", "iterations"} <= set(data["columns"])


@pytest.mark.ray
def test_ctrl_c_in_a_script_raises_keyboard_interrupt_and_resume_with_the_function_finishes(tmp_path, ray_cluster):
    """One Ctrl-C saves the sweep as on the command line, and the caller gets KeyboardInterrupt;
    ``raysweep.resume`` wants the function again (a run dir stores no code), then finishes it."""
    storage = tmp_path / "runs"
    proc = script("slow", ray_cluster, storage)
    trials_file = storage / "slow" / TRIALS_FILE
    deadline = time.time() + 240
    while not (trials_file.exists() and any((r.get("iterations") or 0) >= 2 for r in read_trials(trials_file))):
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, out + err
    assert "KeyboardInterrupt: sweep slow interrupted; its state is saved: raysweep.resume(" in out
    assert "function=slow_train)" in out and "Traceback" not in err
    assert "pending" in [t["status"] for t in show(storage / "slow")["trials"]]

    refused = subprocess.run(
        [sys.executable, str(SCRIPT), "resume without the function", ray_cluster, str(storage)],
        cwd=ROOT,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "runs the Python function __main__.slow_train, and a run dir stores no code: pass it again" in refused.stdout

    data = finished(script("resume", ray_cluster, storage))
    assert [t["status"] for t in data["trials"]] == ["done", "done"] and all(
        t["iterations"] == 6 for t in data["trials"]
    )
    for row in read_trials(trials_file):  # every epoch once: the pending trial went on from its checkpoint
        results = [json.loads(line) for line in (Path(row["trial_dir"]) / "result.json").read_text().splitlines()]
        assert [r["epoch"] for r in results] == [1, 2, 3, 4, 5, 6]


@pytest.mark.ray
def test_three_sweeps_in_one_process_show_each_trials_line_once(tmp_path, ray_cluster):
    """Guarantee: "A trial's output line reaches the console once, however many sweeps the
    process has run (a script or notebook that runs several sweeps)."

    Ray keeps every output handler added in a process: the third sweep's lines were shown three times."""
    proc = script("three sweeps", ray_cluster, tmp_path / "runs")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, out + err
    for k in (1, 2, 3):
        (trial_id,) = [r["trial_id"] for r in read_trials(tmp_path / "runs" / f"echo{k}" / TRIALS_FILE)]
        assert out.count(f"echo of sweep {k}") == 1, out
        assert f"[{trial_id}] echo of sweep {k}\n" in out


def test_a_bad_spec_dict_raises_spec_error_with_the_cli_sentence(tmp_path):
    bad = {"method": "grid", "metric": {"name": "loss"}, "parameters": {"lr": {"min": 0.1, "max": 0.01}}}
    with pytest.raises(api.SpecError) as caught:
        api.run(bad, function=lambda config: None, storage=str(tmp_path / "runs"))
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad | {"raysweep": {"train_loop": "train_loops.smoke:train"}}))
    cli = raysweep("run", str(path), "--storage", str(tmp_path / "runs"))
    assert cli.returncode == 2
    assert caught.value.problems and all(f"  - {p}" in cli.stderr for p in caught.value.problems), (
        caught.value,
        cli.stderr,
    )
    assert not (tmp_path / "runs").exists()  # nothing written


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"count": 0}, "count must be a whole number >= 1, got 0"),
        ({"wandb": "on"}, "wandb must be one of offline, online, disabled, got 'on'"),
        ({"function": lambda a, b: None}, "takes 2 arguments; a sweep calls it as train(config)"),
    ],
)
def test_bad_options_raise_a_user_error_before_anything_starts(tmp_path, kwargs, message):
    sweep = {"method": "grid", "parameters": {"x": {"value": 1}}}
    with pytest.raises(api.UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        api.run(sweep, **({"function": lambda config: None} | kwargs), storage=str(tmp_path / "runs"))
    assert not (tmp_path / "runs").exists()


def test_the_shipped_example_is_a_valid_wandb_style_sweep():
    """train_loops/wandb_quickstart.py (docs/python-api.md) stays runnable: its main is W&B's style and its dict validates."""
    import importlib.util

    from raysweep.api import function_style
    from raysweep.spec import parse_spec

    spec_ = importlib.util.spec_from_file_location("wandb_quickstart", ROOT / "train_loops" / "wandb_quickstart.py")
    example = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(example)
    assert function_style(example.main) == "wandb"
    spec = parse_spec(example.sweep_config, function="wandb")
    assert spec.function == "wandb" and spec.scheduler is not None and spec.objectives.single.name == "val/accuracy"
