"""Faults with real processes and real signals, on a real ``ray start`` cluster.

A killed DDP worker, a loop that raises, a diverging metric, a hung rank, ranks that report
different numbers of times, and a 200-trial sweep: the sweep goes on, nothing finished is
lost, and every failure has a sentence. (The killed driver and resume live in test_driver.)

Modules: ``trial/watchdog.py``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from conftest import processes, raysweep, show, start_sweep, wait_for_iterations, write_spec

from raysweep.runs.files import TRIALS_FILE, read_trials

pytestmark = pytest.mark.ray

LOOP = "train_loops.smoke:train"


def sweep(tmp_path: Path, name: str, **doc) -> Path:
    base = {"name": name, "metric": {"name": "score", "goal": "minimize"}, "train_loop": LOOP, "method": "grid"}
    return write_spec(tmp_path / f"{name}.yaml", **(base | doc))


def run(spec: Path, cluster: str, *flags: str) -> subprocess.CompletedProcess:
    return raysweep(
        "run", str(spec), "--address", cluster, "--storage", str(spec.parent / "runs"), "--wandb", "disabled", *flags
    )


# Each 2+-worker fault runs under both trial paths; the process title of a worker in each.
WORKERS = {"warm": "DDPWorker", "torchtrainer": "RayTrainWorker"}
both_paths = pytest.mark.parametrize("ddp_workers", ["warm", pytest.param("torchtrainer", marks=pytest.mark.slow)])


def results(run_dir: Path, trial_id: str) -> list[dict]:
    row = next(r for r in read_trials(run_dir / TRIALS_FILE) if r["trial_id"] == trial_id)
    return [json.loads(line) for line in (Path(row["trial_dir"]) / "result.json").read_text().splitlines()]


@both_paths
def test_a_killed_train_worker_restarts_from_its_checkpoint(tmp_path, ray_cluster, ddp_workers):
    """Guarantee: "A DDP worker that dies mid-trial (killed, OOM) ends the trial's worker group,
    and the trial restarts on new workers from its last checkpoint when `max_failures` allows:
    epochs continue with no gap and no repeat."
    """
    spec = sweep(
        tmp_path,
        "wk",
        max_failures=1,
        base_config={"epochs": 4, "sleep": 1.5},
        ddp_workers=ddp_workers,
        parameters={"x": {"value": 0.3}, "num_gpus": {"value": 2}},
    )
    driver = start_sweep(spec, ray_cluster)
    wait_for_iterations(driver, tmp_path / "runs" / "wk" / TRIALS_FILE, 2)  # epochs 1-2 reported, and checkpointed
    victims = processes(WORKERS[ddp_workers], ray_cluster)
    assert len(victims) == 2
    victims[-1].send_signal(signal.SIGKILL)
    out, err = driver.communicate(timeout=400)
    assert driver.returncode == 0, err + out

    (trial,) = show(tmp_path / "runs" / "wk")["trials"]
    assert trial["status"] == "done"
    reported = results(tmp_path / "runs" / "wk", trial["trial_id"])
    assert [r["epoch"] for r in reported] == [1, 2, 3, 4]  # no gap, no epoch twice
    restarted = [r for r in reported if r["resumed_from"] > 0]
    assert restarted, "the worker group was not restarted from a checkpoint"
    assert restarted[0]["epoch"] == restarted[0]["resumed_from"] + 1 >= 3  # not from zero


def test_a_raising_loop_is_retried_up_to_max_failures_and_the_sweep_goes_on(tmp_path, ray_cluster):
    """Guarantee: "A loop that raises fails its trial with the error in `show`; it is retried up
    to `max_failures` times from its last checkpoint; the other trials go on. If every trial fails,
    `run` exits 1 and prints the first error."
    """
    spec = sweep(
        tmp_path,
        "rf",
        max_failures=1,
        base_config={"epochs": 3, "fail_at_epoch": 2},
        parameters={"fail_attempts": {"values": [1, 5]}},  # fails once (then resumes) / fails every attempt
    )
    out = run(spec, ray_cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    run_dir = tmp_path / "runs" / "rf"
    trials = {t["config"]["fail_attempts"]: t for t in show(run_dir)["trials"]}
    once = trials[1]
    assert once["status"] == "done"
    assert [r["epoch"] for r in results(run_dir, once["trial_id"])] == [1, 2, 3]  # retried from epoch 1's checkpoint
    always = trials[5]
    assert always["status"] == "failed" and "planned failure at epoch 2" in always["error"]
    row = next(r for r in read_trials(run_dir / TRIALS_FILE) if r["trial_id"] == always["trial_id"])
    assert (Path(row["trial_dir"]) / "smoke_failures").read_text() == "xx"  # 1 try + max_failures=1 retry


def test_trials_whose_warm_worker_dies_fail_with_a_sentence_and_the_sweep_goes_on(tmp_path, ray_cluster):
    """Guarantee: "A trial whose warm worker died, past its retries, fails with a sentence naming
    the rank, and the sweep's other trials run."

    Here the worker's process is SIGKILLed, as by the OOM killer. Before, Ray's bare
    ``ActorDiedError`` left the trial, and Tune takes one for the death of the trial's own actor
    (``gang.WorkerDied``)."""
    spec = sweep(
        tmp_path,
        "wd",
        train_loop="tests.support.dying_loop:train",
        base_config={"epochs": 2},
        parameters={"die": {"values": [True, False]}, "x": {"values": [0.2, 0.4]}},
    )
    out = run(spec, ray_cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    trials = show(tmp_path / "runs" / "wd")["trials"]
    assert sorted(t["status"] for t in trials) == ["done", "done", "failed", "failed"], trials
    for trial in trials:
        if trial["config"]["die"]:
            assert "the warm worker of rank 0 of 1 died (its process was killed" in trial["error"], trial["error"]


def test_a_nan_metric_fails_the_trial_and_optuna_records_it_failed(tmp_path, ray_cluster):
    """Guarantee: "A metric that is NaN or inf fails its trial with a sentence (`'score' is nan
    (the trial diverged)`); Optuna records the trial as failed and never sees the value; ASHA never
    ranks it."
    """
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    spec = sweep(
        tmp_path,
        "nan",
        method="bayes",
        run_cap=6,
        seed=3,
        base_config={"epochs": 3},
        parameters={"x": {"min": 0.0, "max": 1.0}, "nan_at_epoch": {"values": [2, 99]}},
    )
    out = run(spec, ray_cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    run_dir = tmp_path / "runs" / "nan"
    data = show(run_dir)
    assert len(data["trials"]) == 6
    diverged = [t for t in data["trials"] if t["config"]["nan_at_epoch"] == 2]
    healthy = [t for t in data["trials"] if t["config"]["nan_at_epoch"] == 99]
    assert diverged and healthy, "seed 3 should draw both values"
    assert all(t["status"] == "failed" and "'score' is nan (the trial diverged)" in t["error"] for t in diverged)
    assert all(t["status"] == "done" for t in healthy)
    assert data["best"]["config"]["nan_at_epoch"] == 99

    study = optuna.load_study(
        study_name="nan", storage=JournalStorage(JournalFileBackend(str(run_dir / "optuna.journal")))
    )
    states = {round(t.params["x"], 9): t.state for t in study.trials}
    for t in diverged:
        assert states[round(t["config"]["x"], 9)] == optuna.trial.TrialState.FAIL
    for t in healthy:
        assert states[round(t["config"]["x"], 9)] == optuna.trial.TrialState.COMPLETE
    assert all(v is None or v == v for t in study.trials for v in (t.values or []))  # no NaN value reached Optuna


def test_watchdog_ends_a_hung_loop_with_an_explanation(tmp_path, ray_cluster):
    spec = sweep(
        tmp_path,
        "h1",
        report_timeout_s=10,
        base_config={"epochs": 3},  # 10 s: a loaded machine's first epoch fits
        parameters={"hang_at_epoch": {"values": [2, 99]}},
    )
    out = run(spec, ray_cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    trials = {t["config"]["hang_at_epoch"]: t for t in show(tmp_path / "runs" / "h1")["trials"]}
    assert trials[99]["status"] == "done"
    assert trials[2]["status"] == "failed"
    assert (
        "watchdog: the train loop sent no report for 10 s (report_timeout_s) after its report #1" in trials[2]["error"]
    )


@pytest.mark.slow  # make test: the same faults on warm workers; the in-process path in test_gpu_placement
def test_a_one_worker_torchtrainer_trial_runs_in_its_own_process_through_every_fault(tmp_path, ray_cluster):
    """Under ``ddp_workers: torchtrainer`` a 1-worker trial runs in the Tune trial's own process
    (``in_process``), not a TorchTrainer: its reports, a retried raise, a NaN and a hang each end
    as on the other runners, the hang with the watchdog's explanation."""
    cases = {  # in the grid's order: the hang's two 30-s waits in one slot, the other trials in the other
        "hangs": {"hang_at_epoch": 2},
        "ok": {},
        "raises once": {"fail_at_epoch": 2, "fail_attempts": 1},
        "raises always": {"fail_at_epoch": 2},
        "nan": {"nan_at_epoch": 2},
    }
    spec = sweep(
        tmp_path,
        "ip",
        train_loop="tests.support.case_loop:train",
        ddp_workers="torchtrainer",
        max_failures=1,
        report_timeout_s=30,  # a fresh process imports torch before its first report: 10 s was too short under CI's load
        base_config={"epochs": 3},
        parameters={"case": {"values": list(cases.values())}},
    )
    out = run(spec, ray_cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    run_dir = tmp_path / "runs" / "ip"
    rows = {json.dumps(r["config"]["case"], sort_keys=True): r for r in read_trials(run_dir / TRIALS_FILE)}
    trials = {name: rows[json.dumps(case, sort_keys=True)] for name, case in cases.items()}
    for row in trials.values():  # the Tune trial's process ran the loop
        cmdline = (Path(row["trial_dir"]) / "cmdline.rank0").read_text()
        assert "ImplicitFunc" in cmdline and "RayTrainWorker" not in cmdline, cmdline
    for name in ("ok", "raises once"):
        assert trials[name]["status"] == "done", (name, trials[name].get("error"))
        assert [r["epoch"] for r in results(run_dir, trials[name]["trial_id"])] == [1, 2, 3]
        assert all(r["world_size"] == 1 for r in results(run_dir, trials[name]["trial_id"]))
    assert [r["resumed_from"] for r in results(run_dir, trials["raises once"]["trial_id"])] == [0, 1, 1]
    assert "planned failure at epoch 2" in trials["raises always"]["error"]
    assert "'score' is nan (the trial diverged)" in trials["nan"]["error"]
    # The retry went on from epoch 1's checkpoint and hung at once, at epoch 2: the last attempt's words.
    hang = "watchdog: the train loop sent no report for 30 s (report_timeout_s) before its first report"
    assert hang in trials["hangs"]["error"], trials["hangs"]["error"]
    assert all(trials[name]["status"] == "failed" for name in ("raises always", "nan", "hangs"))


@both_paths
def test_watchdog_ends_a_rank_stuck_in_a_collective(tmp_path, ray_cluster, ddp_workers):
    """Guarantee: "With `report_timeout_s`, a rank that sends no report for that long (a loop
    that hangs, a rank stuck in a collective because another rank stopped) ends its trial as failed;
    the error names the rank and the number of reports each rank made. The rank's process is ended
    (a thread stuck inside gloo or NCCL cannot be interrupted), so Ray frees its slot;
    `max_failures` retries apply."
    """
    spec = sweep(
        tmp_path,
        "h2",
        report_timeout_s=5,
        ddp_workers=ddp_workers,
        base_config={"epochs": 3, "collective": True, "hang_at_epoch": 2, "hang_rank": 1},
        parameters={"num_gpus": {"value": 2}},
    )
    driver = start_sweep(spec, ray_cluster)
    deadline = time.time() + 180
    while not processes(WORKERS[ddp_workers], ray_cluster):  # the title names the trial's live workers
        assert driver.poll() is None and time.time() < deadline, driver.communicate()
        time.sleep(0.2)
    out, err = driver.communicate(timeout=300)
    assert driver.returncode == 1, out + err
    (trial,) = show(tmp_path / "runs" / "h2")["trials"]
    assert trial["status"] == "failed"
    assert "of 2 sent no report for 5 s (report_timeout_s) after its report #1" in trial["error"]
    assert "reports per rank: rank 0: 1, rank 1: 1" in trial["error"]
    deadline = time.time() + 30  # Ray Train ends its worker group as the trial fails
    while processes(WORKERS[ddp_workers], ray_cluster) and time.time() < deadline:
        time.sleep(0.5)
    assert not processes(WORKERS[ddp_workers], ray_cluster)


@both_paths
def test_ranks_that_report_different_numbers_of_times_fail_with_an_explanation(tmp_path, ray_cluster, ddp_workers):
    """Guarantee: "Ranks that report a different number of times (one rank's loop returns while
    the others report again) fail the trial at once, naming the ranks and the report count (under
    `torchtrainer`, when `report_timeout_s` is set: the ranks' records then tell the cause)."
    """
    spec = sweep(
        tmp_path,
        "h3",
        report_timeout_s=5,
        base_config={"epochs": 2, "extra_report_rank": 0},
        ddp_workers=ddp_workers,
        parameters={"num_gpus": {"value": 2}},
    )
    out = run(spec, ray_cluster)
    assert out.returncode == 1
    (trial,) = show(tmp_path / "runs" / "h3")["trials"]
    assert trial["status"] == "failed"
    assert "rank(s) 1 of 2 ended after 2 report(s) while the others reported again" in trial["error"]


@pytest.mark.slow  # a scale run
def test_two_hundred_trials_all_recorded_with_flat_driver_memory(tmp_path, ray_cluster):
    """Guarantee: "A 200-trial sweep at the cluster's concurrency records all 200 trials with
    the driver's memory flat (figures in the test's output)."
    """
    spec = sweep(
        tmp_path,
        "load",
        method="random",
        run_cap=200,
        base_config={"epochs": 1},
        parameters={"x": {"min": 0.0, "max": 1.0}},
    )
    driver = start_sweep(spec, ray_cluster)
    proc = psutil.Process(driver.pid)
    trials_file = tmp_path / "runs" / "load" / TRIALS_FILE
    samples: list[tuple[int, float]] = []  # (trials finished, driver RSS in MiB)
    while driver.poll() is None:
        rows = read_trials(trials_file) if trials_file.exists() else []
        try:
            samples.append((sum(r.get("status") == "done" for r in rows), proc.memory_info().rss / 2**20))
        except psutil.NoSuchProcess:  # the driver just ended
            break
        time.sleep(1.0)
    out, err = driver.communicate()
    assert driver.returncode == 0, err + out
    rows = read_trials(trials_file)
    assert len(rows) == 200 and all(r["status"] == "done" for r in rows)
    assert len({r["trial_id"] for r in rows}) == 200

    def rss_at(done: int) -> float:
        return max(rss for n, rss in samples if n <= done)

    assert min(n for n, _ in samples) <= 10 and max(n for n, _ in samples) >= 150, samples  # sampled the whole sweep
    early, late = rss_at(50), rss_at(200)
    print(
        f"\ndriver RSS: {rss_at(10):.0f} MiB after 10 trials, {early:.0f} after 50, {late:.0f} after 200 "
        f"(+{late - early:.0f} MiB over the last 150); wall {samples and len(samples)} s"
    )
    assert late - early < 64, samples  # flat: no per-trial growth worth the name
