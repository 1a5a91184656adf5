"""Sweeps whose ``--storage`` is an S3 URI, against a real S3 API (moto's server) and a real Ray
cluster whose nodes read the credentials from their environment: the bucket holds the run dir
(spec, settings, trials, results, checkpoints, W&B runs); ``show``, ``report``, ``load()`` and
``resume`` read it with no local copy left; a killed driver's sweep resumes from the bucket alone.
Nodes with disks of their own: tests/trial/test_separate_disks.py."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, cli_env, one_node_cluster, raysweep, write_spec

pytestmark = pytest.mark.ray

LOOP = "tests.support.node_loop:train"  # records every epoch each rank ran, checkpoints every epoch


@pytest.fixture(scope="module")
def cluster(s3):
    """A one-node cluster started with moto's credentials in its environment, as a node of a real
    cluster has its machine's."""
    yield from one_node_cluster(cli_env())


def epochs_sweep(tmp_path: Path, name: str, values: list[float], epochs: int, sleep: float) -> tuple[Path, Path]:
    records = tmp_path / "records"
    records.mkdir()
    spec = write_spec(
        tmp_path / f"{name}.yaml",
        name=name,
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        parameters={"x": {"values": values}},
        raysweep={"train_loop": LOOP, "base_config": {"epochs": epochs, "sleep": sleep, "record_dir": str(records)}},
    )
    return spec, records


def ran_epochs(records: Path) -> dict[float, list[int]]:
    out: dict[float, list[int]] = {}
    for path in records.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            out.setdefault(r["x"], []).append(r["epoch"])
    return out


def test_a_sweep_on_s3_leaves_its_run_dir_in_the_bucket_and_every_reader_reads_it_from_there(s3, cluster, tmp_path):
    bucket = s3.bucket()
    uri = s3.uri(bucket)
    cache = {"RAYSWEEP_CACHE_DIR": str(tmp_path / "cache")}
    spec, _ = epochs_sweep(tmp_path, "ons3", [0.1, 0.3], epochs=2, sleep=0.0)
    out = raysweep("run", str(spec), "--address", cluster, "--storage", uri, "--wandb", "offline", env=cache)
    assert out.returncode == 0, out.stderr + out.stdout
    # the commands it prints name the bucket, never the local copy (which another machine lacks)
    assert f"show '{s3.uri(bucket, 'runs/ons3')}'" in out.stdout
    keys = s3.keys(bucket)
    assert {"runs/ons3/spec.json", "runs/ons3/run.json", "runs/ons3/trials.jsonl"} <= set(keys)
    trial_dirs = {k.split("/")[2] for k in keys if k.startswith("runs/ons3/run_trial_")}
    assert len(trial_dirs) == 2
    for trial in trial_dirs:
        inside = [k for k in keys if k.startswith(f"runs/ons3/{trial}/")]
        assert f"runs/ons3/{trial}/result.json" in inside
        assert any("/checkpoint_" in k for k in inside)
        assert any("/wandb/offline-run-" in k and k.endswith(".wandb") for k in inside)

    shutil.rmtree(tmp_path / "cache")  # only the bucket is left
    shown = raysweep("show", "ons3", "--storage", uri, "--json", env=cache)
    assert shown.returncode == 0, shown.stderr
    trials = json.loads(shown.stdout)["trials"]
    assert [t["status"] for t in trials] == ["done", "done"] and trials[0]["config"]["x"] == 0.3
    report = raysweep("report", s3.uri(bucket, "runs/ons3"), "-o", str(tmp_path / "r.html"), env=cache)
    assert report.returncode == 0, report.stderr
    assert "ons3" in (tmp_path / "r.html").read_text()
    code = (
        "import raysweep, sys\n"
        f"r = raysweep.load('ons3', storage={uri!r})\n"
        "df = r.dataframe()\n"
        "print(len(df), len(r.history(df.trial_id[0])))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=cli_env() | cache, timeout=120
    )
    assert loaded.stdout.split() == ["2", "2"], loaded.stderr


EPOCHS = 6


def test_a_killed_driver_resumes_from_the_bucket_alone_with_no_epoch_lost_or_repeated(s3, cluster, tmp_path):
    bucket = s3.bucket()
    uri = s3.uri(bucket)
    cache = {"RAYSWEEP_CACHE_DIR": str(tmp_path / "cache")}
    spec, records = epochs_sweep(tmp_path, "kill", [0.1, 0.2, 0.3], epochs=EPOCHS, sleep=1.0)
    cmd = [sys.executable, "-m", "raysweep", "run", str(spec), "--address", cluster, "--storage", uri]
    driver = subprocess.Popen(cmd + ["--wandb", "disabled"], cwd=ROOT, env=cli_env() | cache, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    while time.time() < deadline:  # the bucket holds Tune's state, the trials and a second checkpoint
        assert driver.poll() is None, driver.stderr.read()
        keys = " ".join(s3.keys(bucket))
        if "experiment_state" in keys and "trials.jsonl" in keys and "checkpoint_000002" in keys:
            break
        time.sleep(0.3)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    before = ran_epochs(records)
    assert len(before) < 3 or any(len(e) < EPOCHS for e in before.values()), before  # killed mid-sweep

    shutil.rmtree(tmp_path / "cache")  # a resume from another machine: the bucket alone
    out = raysweep("resume", s3.uri(bucket, "runs/kill"), "--address", cluster, env=cache)
    assert out.returncode == 0, out.stderr + out.stdout
    shown = json.loads(raysweep("show", "kill", "--storage", uri, "--json", env=cache).stdout)
    assert sorted(t["status"] for t in shown["trials"]) == ["done"] * 3
    for x, epochs in ran_epochs(records).items():
        # every epoch once, except one whose checkpoint the killed driver's Tune had not yet stored
        assert sorted(set(epochs)) == list(range(1, EPOCHS + 1)), (x, epochs)
        assert len(epochs) - EPOCHS <= 1, (x, epochs, restarts(tmp_path / "cache"), out.stdout[-2000:])


def test_a_program_script_goes_on_from_its_trial_checkpoint_directory_after_a_killed_driver(s3, cluster, tmp_path):
    """The script keeps its state in RAYSWEEP_CHECKPOINT_DIR; what it wrote there is on S3 with each
    report and put back before the resumed trial's script starts.

    Guarantee: "A `program:` script that keeps its checkpoints in `RAYSWEEP_CHECKPOINT_DIR` goes on
    from them after a resume, a node lost or a retry: what rank 0's script wrote there is kept with
    its next report and put back on every node before the restarted scripts start
    (tests/driver/test_s3_storage.py)."
    """
    bucket = s3.bucket()
    uri = s3.uri(bucket)
    cache = {"RAYSWEEP_CACHE_DIR": str(tmp_path / "cache")}
    records = tmp_path / "records"
    records.mkdir()
    spec = write_spec(
        tmp_path / "script.yaml",
        name="script",
        method="grid",
        program=str(ROOT / "tests" / "support" / "programs" / "resumable.py"),
        metric={"name": "score", "goal": "minimize"},
        parameters={
            "x": {"values": [0.1, 0.3]},
            "epochs": {"value": EPOCHS},
            "sleep": {"value": 1.0},
            "record_dir": {"value": str(records)},
        },
    )
    cmd = [sys.executable, "-m", "raysweep", "run", str(spec), "--address", cluster, "--storage", uri]
    driver = subprocess.Popen(cmd + ["--wandb", "offline"], cwd=ROOT, env=cli_env() | cache, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    while time.time() < deadline:  # both trials' results on S3 name two checkpoints each, and Tune's state is there
        assert driver.poll() is None, driver.stderr.read()
        keys = s3.keys(bucket)
        results = [k for k in keys if k.endswith("/result.json")]
        synced = len(results) == 2 and all(_lines(s3, bucket, k) >= 2 for k in results)
        if synced and any("experiment_state" in k for k in keys):
            break
        time.sleep(0.3)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    assert any(len(e) < EPOCHS for e in ran_epochs(records).values()), ran_epochs(records)

    shutil.rmtree(tmp_path / "cache")
    out = raysweep("resume", s3.uri(bucket, "runs/script"), "--address", cluster, env=cache)
    assert out.returncode == 0, out.stderr + out.stdout
    for x, epochs in ran_epochs(records).items():  # started again, the script went on from its directory
        assert sorted(set(epochs)) == list(range(1, EPOCHS + 1)), (x, epochs)
        assert epochs.count(1) == 1 and len(epochs) - EPOCHS <= 2, (x, epochs, restarts(tmp_path / "cache"))


def test_after_an_early_stopped_sweep_the_bucket_holds_only_what_the_checkpoint_policy_keeps(s3, cluster, tmp_path):
    """Stopped trials keep no checkpoint, finished ones outside the best keep_best_trials none
    either: here the best one's, its newest two (keep_per_trial)."""
    bucket = s3.bucket()
    cache = {"RAYSWEEP_CACHE_DIR": str(tmp_path / "cache")}
    records = tmp_path / "records"
    records.mkdir()
    spec = write_spec(
        tmp_path / "policy.yaml",
        name="policy",
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        parameters={"x": {"values": [0.3, 0.9, 0.2, 0.8, 0.4, 1.0]}},
        early_terminate={"type": "hyperband", "min_iter": 1, "eta": 2},
        raysweep={
            "train_loop": LOOP,
            "base_config": {"epochs": 4, "sleep": 0.0, "record_dir": str(records)},
            "checkpoints": {"keep_best_trials": 1},
            "max_concurrent": 1,
        },
    )
    out = raysweep(
        "run", str(spec), "--address", cluster, "--storage", s3.uri(bucket), "--wandb", "disabled", env=cache
    )
    assert out.returncode == 0, out.stderr + out.stdout
    shown = json.loads(raysweep("show", "policy", "--storage", s3.uri(bucket), "--json", env=cache).stdout)
    by_status: dict[str, list[str]] = {}
    for t in shown["trials"]:
        by_status.setdefault(t["status"], []).append(t["trial_id"])
    assert by_status.get("stopped") and len(by_status.get("done", [])) >= 2, by_status  # the policy has work
    best = shown["best"]["trial_id"]
    holding = {k.split("/")[2].split("_")[2] for k in s3.keys(bucket) if "/checkpoint_" in k}
    assert holding == {best}, (holding, best, by_status)
    assert shown["storage"]["checkpoints"] == 2


def restarts(cache: Path) -> list[str]:
    """What the resumed driver's log says of where each trial went on from (a failure's evidence)."""
    words = ("goes on from", "starts over", "checkpoint", "restor", "WARNING", "ERROR")
    return [
        line[:300]
        for log in cache.rglob("driver.log")
        for line in log.read_text().splitlines()
        if any(w in line for w in words)
    ][-40:]


def _lines(s3, bucket: str, key: str) -> int:
    return s3.client().get_object(Bucket=bucket, Key=key)["Body"].read().count(b"\n")
