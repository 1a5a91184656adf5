"""The driver on a real local Ray cluster: search, scheduling, sizing, failures, resume, W&B.

Modules: ``driver/sweep.py``, ``driver/wandb_logging.py``.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, cli_env, raysweep, show, write_spec
from wandb_records import run_contents

from raysweep.runs.files import TRIALS_FILE, read_trials

pytestmark = pytest.mark.ray

LOOP = "train_loops.smoke:train"


def sweep(tmp_path: Path, name: str = "s", **doc) -> Path:
    base = {"name": name, "metric": {"name": "score", "goal": "minimize"}, "train_loop": LOOP}
    return write_spec(tmp_path / f"{name}.yaml", **(base | doc))


def objectives_sweep(tmp_path: Path, name: str, objectives: list[str], **doc) -> Path:
    """W&B's new format: ``metrics:`` (no ``metric:``), ``method: custom``, one trial at a time of
    the objectives loop."""
    base = {
        "name": name,
        "method": "custom",
        "metrics": [{"name": n} for n in objectives],
        "max_concurrent": 1,
        "train_loop": "tests.support.objectives_loop:train",
    }
    return write_spec(tmp_path / f"{name}.yaml", **(base | doc))


def front_by_hand(trials: list[dict]) -> list[bool]:
    """Whether each trial of ``show --json`` is beaten by no other on every objective (all minimized)."""

    def beats(a: dict, b: dict) -> bool:
        return (
            all(a["objectives"][k] <= b["objectives"][k] for k in b["objectives"])
            and a["objectives"] != b["objectives"]
        )

    return [not any(beats(o, t) for o in trials) for t in trials]


def run(spec: Path, cluster: str, *flags: str) -> subprocess.CompletedProcess:
    return raysweep("run", str(spec), "--address", cluster, "--storage", str(spec.parent / "runs"), *flags)


@pytest.mark.parametrize(
    ("doc", "reuse"),
    [
        ({}, True),
        ({"parameters": {"num_gpus": {"values": [1, 2]}}}, True),  # warm workers stop at a report
        ({"parameters": {"num_gpus": {"values": [1, 2]}}, "ddp_workers": "torchtrainer"}, False),  # fit() goes on
        ({"parameters": {"num_gpus": {"value": 2}}, "ddp_workers": "torchtrainer"}, False),
        ({"ddp_workers": "torchtrainer"}, True),  # 1-worker trials never start a TorchTrainer
        ({"reuse_actors": False}, False),
        ({"train_loop": None, "program": "train.py"}, False),  # a script ends only with its process
    ],
)
def test_actor_reuse_is_chosen_where_a_stopped_trial_ends_at_its_report(tmp_path, doc, reuse):
    """The decision only; test_warm_workers.py's reuse test shows Tune running the next trial in
    the same process when it says yes, and in a new one when it says no."""
    from raysweep.driver.trainable import runners
    from raysweep.driver.tuner import reuse_actors
    from raysweep.spec import load_spec

    path = sweep(tmp_path, method="grid", **{"parameters": {"x": {"value": 1}}} | doc)
    write_spec(path, **{k: v for k, v in yaml.safe_load(path.read_text()).items() if v is not None})
    spec = load_spec(path)
    assert reuse_actors(spec, runners(spec)) is reuse


def test_grid_runs_its_grid_and_logs_every_trial_to_wandb(tmp_path, ray_cluster):
    spec = sweep(tmp_path, method="grid", base_config={"epochs": 2}, parameters={"x": {"values": [0.1, 0.3, 0.5]}})
    out = run(spec, ray_cluster, "--wandb", "offline")
    assert out.returncode == 0, out.stderr
    data = show(tmp_path / "runs" / "s")
    assert sorted(t["config"]["x"] for t in data["trials"]) == [0.1, 0.3, 0.5]
    assert all(t["status"] == "done" and t["iterations"] == 2 for t in data["trials"])
    assert data["best"]["config"]["x"] == 0.3
    assert data["best"]["metric"] == pytest.approx(0.5)  # (0.3-0.3)^2 + 1/2
    assert "wandb sync" in out.stdout

    runs = sorted((tmp_path / "runs" / "s").glob("*/wandb/offline-run-*/*.wandb"))
    assert len(runs) == 3
    by_id = {t["trial_id"]: t for t in data["trials"]}
    for path in runs:
        logged = run_contents(path)
        trial = by_id[logged["run"]["id"]]
        assert logged["run"]["group"] == "s"
        assert logged["config"]["x"] == trial["config"]["x"]
        assert [h["score"] for h in logged["history"]] == pytest.approx(
            [(trial["config"]["x"] - 0.3) ** 2 + 1 / e for e in (1, 2)]
        )


@pytest.mark.parametrize("method", ["grid", "random", "bayes"])
def test_max_concurrent_holds_for_every_method(tmp_path, ray_cluster, method):
    spec = sweep(
        tmp_path,
        name=f"c{method}",
        method=method,
        run_cap=3,
        base_config={"epochs": 1, "sleep": 0.5},
        parameters={"x": {"values": [0.1, 0.2, 0.3]}},
    )
    out = run(spec, ray_cluster, "--wandb", "disabled", "--max-concurrent", "1")
    assert out.returncode == 0, out.stderr
    rows = sorted(read_trials(tmp_path / "runs" / f"c{method}" / TRIALS_FILE), key=lambda r: r["start"])
    assert len(rows) == 3
    for earlier, later in zip(rows, rows[1:]):
        assert later["start"] >= earlier["end"], rows  # one trial at a time: the cluster has room for two


def test_bayes_uses_optuna_and_keeps_its_journal(tmp_path, ray_cluster):
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    spec = sweep(
        tmp_path,
        name="b",
        method="bayes",
        run_cap=4,
        base_config={"epochs": 2},
        parameters={"x": {"min": 0.0, "max": 1.0}},
        searcher={"n_startup_trials": 2},
    )
    out = run(spec, ray_cluster, "--wandb", "disabled")
    assert out.returncode == 0, out.stderr
    data = show(tmp_path / "runs" / "b")
    assert len(data["trials"]) == 4 and all(t["status"] == "done" for t in data["trials"])
    storage = JournalStorage(JournalFileBackend(str(tmp_path / "runs" / "b" / "optuna.journal")))
    study = optuna.load_study(study_name="b", storage=storage)
    finished = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert sorted(t.params["x"] for t in finished) == pytest.approx(sorted(t["config"]["x"] for t in data["trials"]))
    assert sorted(t.value for t in finished) == pytest.approx(sorted(t["metric"] for t in data["trials"]))


def test_asha_stops_poor_trials_at_rungs(tmp_path, ray_cluster):
    xs = [0.3, 0.35, 2.0, 0.32, 3.0, 2.5]  # good trials first, so the poor ones meet a full rung
    spec = sweep(
        tmp_path,
        name="a",
        method="grid",
        base_config={"epochs": 9},
        max_concurrent=1,
        parameters={"x": {"values": xs}},
        scheduler={"type": "asha", "grace_period": 1, "max_t": 9, "reduction_factor": 3},
    )
    out = run(spec, ray_cluster, "--wandb", "disabled")
    assert out.returncode == 0, out.stderr
    trials = {t["config"]["x"]: t for t in show(tmp_path / "runs" / "a")["trials"]}
    stopped = [t for t in trials.values() if t["status"] == "stopped"]
    assert stopped, trials
    assert {t["iterations"] for t in stopped} <= {1, 3}
    assert trials[0.3]["status"] == "done" and trials[0.3]["iterations"] == 9
    assert all(trials[x]["status"] == "stopped" for x in (2.0, 3.0, 2.5))


def test_searched_num_gpus_sizes_each_trial_and_averages_over_ranks(tmp_path, ray_cluster):
    spec = sweep(
        tmp_path,
        name="g",
        method="grid",
        base_config={"epochs": 2},
        parameters={"x": {"values": [0.1, 0.2]}, "num_gpus": {"values": [1, 2]}},
    )
    out = run(spec, ray_cluster, "--wandb", "disabled")
    assert out.returncode == 0, out.stderr + out.stdout
    assert "no GPUs: each trial's num_gpus becomes that many CPU workers" in out.stdout
    rows = read_trials(tmp_path / "runs" / "g" / TRIALS_FILE)
    assert len(rows) == 4 and all(r["status"] == "done" for r in rows)
    for r in rows:
        n = r["config"]["num_gpus"]
        assert r["num_workers"] == n
        assert r["metrics"]["world_size"] == n
        assert r["metrics"]["rank"] == pytest.approx((n - 1) / 2)  # mean of ranks 0..n-1


def test_infeasible_num_gpus(tmp_path, ray_cluster):
    """Guarantee: "A trial that can never be placed fails at once with a sentence naming what
    bounds a node and the sizes that fit; a sweep none of whose trials fits is refused before it
    starts; a pending trial that the nodes left after a node died cannot hold fails at once. Nothing
    waits forever for room that cannot come, unless the cluster's autoscaler may add it." (Nodes that
    die and an autoscaler: test_multinode.py, test_admission.py.)"""
    spec = sweep(tmp_path, name="i", method="grid", parameters={"num_gpus": {"value": 4}})
    out = run(spec, ray_cluster, "--wandb", "disabled")
    assert out.returncode == 2
    assert not (tmp_path / "runs" / "i").exists()  # refused before any trial: nothing left behind
    assert "num_gpus=4 can never be placed: the largest node hosts 2 worker(s) (2 worker slot(s))" in out.stderr
    assert "Sizes that fit: 1-2" in out.stderr and "Traceback" not in out.stderr

    spec = sweep(
        tmp_path, name="i2", method="grid", base_config={"epochs": 1}, parameters={"num_gpus": {"values": [3, 1]}}
    )
    out = run(spec, ray_cluster, "--wandb", "disabled")
    assert out.returncode == 0, out.stderr
    trials = {t["config"]["num_gpus"]: t for t in show(tmp_path / "runs" / "i2")["trials"]}
    assert trials[1]["status"] == "done"
    assert trials[3]["status"] == "failed" and "num_gpus=3 can never be placed" in trials[3]["error"]


def test_every_trial_failing_exits_1_with_the_first_error(tmp_path, ray_cluster):
    spec = sweep(
        tmp_path,
        name="f",
        method="grid",
        base_config={"epochs": 2, "fail_at_epoch": 1},
        parameters={"x": {"values": [1, 2]}},
    )
    out = run(spec, ray_cluster, "--wandb", "disabled")
    assert out.returncode == 1
    assert "every trial failed" in out.stdout and "planned failure at epoch 1" in out.stdout
    data = show(tmp_path / "runs" / "f")
    assert [t["status"] for t in data["trials"]] == ["failed", "failed"]


def test_unknown_train_loop_is_a_user_error(tmp_path, ray_cluster):
    spec = sweep(tmp_path, name="u", method="grid", train_loop="train_loops.smoke:nope", parameters={"x": {"value": 1}})
    out = run(spec, ray_cluster)
    assert out.returncode == 2 and "train_loops.smoke:nope" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.slow  # make test: a killed driver, then resume (test_interrupt)
def test_driver_killed_mid_sweep_then_resume_completes_the_budget(tmp_path, ray_cluster):
    """Guarantee: "Finished and failed trials are never re-run (failed ones only with `resume
    --retry-failed`): `resume` (after a killed or interrupted driver) reads the run dir and runs
    only what is unfinished, each trial listed once; unfinished trials continue from their last
    checkpoint, and their W&B runs continue under the same run id rather than starting a second run.
    The resumed run logs the trial's earlier results again from its `result.json`: what the killed
    driver had not yet written to W&B is not lost (what it had written appears twice)."
    """
    spec = sweep(
        tmp_path,
        name="k",
        method="grid",
        base_config={"epochs": 3, "sleep": 1.0},
        parameters={"x": {"values": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]}},
    )
    storage = tmp_path / "runs"
    cmd = [
        sys.executable,
        "-m",
        "raysweep",
        "run",
        str(spec),
        "--address",
        ray_cluster,
        "--storage",
        str(storage),
        "--wandb",
        "offline",
    ]
    driver = subprocess.Popen(
        cmd, cwd=ROOT, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    trials_file = storage / "k" / TRIALS_FILE
    deadline = time.time() + 300
    done_before: dict = {}
    while time.time() < deadline:
        assert driver.poll() is None, driver.stderr.read()
        if trials_file.exists():
            rows = read_trials(trials_file)
            done_before = {r["trial_id"]: r for r in rows if r.get("status") == "done"}
            if len(done_before) >= 2:
                break
        time.sleep(0.5)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    assert 2 <= len(done_before) < 6

    out = raysweep("resume", "k", "--storage", str(storage), "--address", ray_cluster)
    assert out.returncode == 0, out.stderr
    data = show(storage / "k")
    assert len(data["trials"]) == 6
    assert all(t["status"] == "done" and t["iterations"] == 3 for t in data["trials"])
    assert sorted(t["config"]["x"] for t in data["trials"]) == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]
    # No epoch is recorded twice: finished trials were not re-run, unfinished ones went on from
    # their checkpoint. (A trial that finished just before the kill, while Tune's state still said
    # RUNNING, is restored at its end and re-sends its final result; one whose last checkpoint
    # the killed driver had not saved yet trains that epoch again. ResultLog keeps one line each.)
    for t in data["trials"]:
        row = next(r for r in read_trials(storage / "k" / TRIALS_FILE) if r["trial_id"] == t["trial_id"])
        results = [json.loads(r) for r in (Path(row["trial_dir"]) / "result.json").read_text().splitlines()]
        epochs = [r["epoch"] for r in results]
        assert epochs == [1, 2, 3], epochs
        assert max(r["training_iteration"] for r in results) == 3
        if t["trial_id"] in done_before:
            assert epochs[:3] == [1, 2, 3]
        # W&B: a resumed trial continues its own run (same id), it does not start a second one
        contents = [run_contents(f) for f in Path(row["trial_dir"]).glob("wandb/offline-run-*/*.wandb")]
        # A run the kill cut off before wandb-core flushed its records is a bare file header: it
        # holds nothing (the resumed run logs the trial's earlier results again, checked below).
        assert not any(c["history"] or c["config"] for c in contents if not c["run"])
        logged = [c for c in contents if c["run"]]
        assert logged and {r["run"]["id"] for r in logged} == {t["trial_id"]}
        assert sorted({h["epoch"] for r in logged for h in r["history"]}) == [1, 2, 3]


IN_ORDER = """import optuna


class InOrder(optuna.samplers.RandomSampler):
    def sample_independent(self, study, trial, name, distribution):
        return (0.9, 0.3)[trial.number % 2]


def make(sweep_info):
    return optuna.create_study(directions=["minimize", "minimize"], sampler=InOrder(seed=0))
"""


def test_each_wandb_run_says_whether_its_trial_is_on_the_front_and_one_beaten_later_is_marked_off(
    tmp_path, ray_cluster
):
    """W&B draws no Pareto front: each trial's run carries ``pareto`` in its summary, and the tag
    ``pareto`` while on the front. The first trial (x = 0.9) is alone on the front when it ends; the
    second (x = 0.3) beats it on both objectives, so the first run is opened again at the sweep's
    end and marked off, and the marks agree with ``show``."""
    (tmp_path / "in_order.py").write_text(IN_ORDER)
    spec = objectives_sweep(
        tmp_path,
        "front",
        ["score", "workers"],
        run_cap=2,
        base_config={"epochs": 2},
        parameters={"x": {"values": [0.3, 0.9]}},
        scheduler={"engine": "optuna", "source": "in_order.py", "optimizer": "make"},
    )
    out = run(spec, ray_cluster, "--wandb", "offline")
    assert out.returncode == 0, out.stderr + out.stdout
    trials = {t["config"]["x"]: t for t in show(tmp_path / "runs" / "front")["trials"]}
    assert {x: t["pareto"] for x, t in trials.items()} == {0.3: True, 0.9: False}
    marks = {}
    for x, t in trials.items():
        row = next(r for r in read_trials(tmp_path / "runs" / "front" / TRIALS_FILE) if r["trial_id"] == t["trial_id"])
        logged = [run_contents(f) for f in sorted(Path(row["trial_dir"]).glob("wandb/offline-run-*/*.wandb"))]
        marks[x] = [(c["summary"]["pareto"], c["run"]["tags"]) for c in logged if "pareto" in c["summary"]]
        assert {c["run"]["id"] for c in logged} == {t["trial_id"]}
    assert marks == {0.9: [(True, ["pareto"]), (False, [])], 0.3: [(True, ["pareto"])]}, marks


def test_a_metric_the_loop_never_reports_fails_with_the_names_it_did_report(tmp_path, ray_cluster):
    """Guarantee: "A metric a train loop never reports fails the trial at the first report,
    naming the keys it did report. A W&B-style function or a `program:` script that never logs it ends
    its trial as done, as under `wandb agent`, with one warning per sweep naming the keys it logged."
    (The function and the script: test_agent_move.py, test_program.py.)
    """
    spec = sweep(tmp_path, name="m", method="grid", metric={"name": "val/loss"}, parameters={"x": {"value": 1.0}})
    out = run(spec, ray_cluster, "--wandb", "disabled")
    assert out.returncode == 1
    assert "the sweep's metric 'val/loss' (metric.name in the spec) is missing from this report" in out.stdout
    assert "epoch, rank, resumed_from, samples_per_sec, score, world_size" in out.stdout


@pytest.mark.parametrize("method", [pytest.param("grid", marks=pytest.mark.slow), "bayes"])
def test_resume_keeps_failed_trials_failed_unless_asked_to_retry(tmp_path, ray_cluster, method):
    """README: resume runs only what is unfinished. ``--retry-failed`` runs failed trials again,
    and a retry that succeeds clears its old error (the loop fails only its first attempt)."""
    params = {"x": {"values": [0.1, 0.3]}} if method == "grid" else {"x": {"min": 0.0, "max": 1.0}}
    spec = sweep(
        tmp_path,
        name=f"r{method}",
        method=method,
        run_cap=2,
        max_initial_failures=0,
        base_config={"epochs": 2, "fail_at_epoch": 2, "fail_attempts": 1},
        parameters=params,
    )
    storage = str(tmp_path / "runs")
    assert run(spec, ray_cluster, "--wandb", "disabled").returncode == 1  # every trial failed once
    out = raysweep("resume", f"r{method}", "--storage", storage, "--address", ray_cluster)
    assert out.returncode == 1, out.stderr
    assert [t["status"] for t in show(tmp_path / "runs" / f"r{method}")["trials"]] == ["failed", "failed"]
    out = raysweep("resume", f"r{method}", "--storage", storage, "--address", ray_cluster, "--retry-failed")
    assert out.returncode == 0, out.stderr
    trials = show(tmp_path / "runs" / f"r{method}")["trials"]
    assert [(t["status"], t["iterations"], "error" in t) for t in trials] == [("done", 2, False)] * 2


def test_a_sweep_whose_first_trials_all_fail_stops_like_wandbs_agent(tmp_path, ray_cluster):
    """Guarantee: "A sweep whose first `raysweep.max_initial_failures` trials (default 5) all
    fail stops there (exit 1, the first error printed) instead of spending its whole budget."
    """
    spec = sweep(
        tmp_path,
        name="m",
        method="grid",
        max_concurrent=1,
        max_initial_failures=3,
        base_config={"epochs": 2, "fail_at_epoch": 1},
        parameters={"x": {"values": [1, 2, 3, 4, 5, 6, 7, 8]}},
    )
    out = run(spec, ray_cluster, "--wandb", "disabled")
    assert out.returncode == 1, out.stderr
    assert "Detected 3 failed runs in a row at start, killing sweep." in out.stdout, out.stdout
    assert "first 3 trials all failed" in out.stdout and "planned failure at epoch 1" in out.stdout
    statuses = [t["status"] for t in show(tmp_path / "runs" / "m")["trials"]]
    assert statuses.count("failed") == 3 and len(statuses) < 8, statuses


@pytest.mark.parametrize("method", [pytest.param("random", marks=pytest.mark.slow), "bayes"])
def test_validate_sample_previews_the_configurations_run_tries(tmp_path, ray_cluster, method):
    """`validate --sample N --seed S` prints the first N configurations `run --seed S` tries
    (issue 32: the preview drew from another generator than the run). The preview is the same at
    every call, so every run with one seed tries the same configurations; a run with another seed
    tries others."""
    params = {
        "epochs": {"distribution": "q_uniform", "min": 1, "max": 3, "q": 1},  # through sample_from
        "sleep": {"values": [0.0, 0.01, 0.02], "probabilities": [0.2, 0.3, 0.5]},
        "x": {"min": 0.0, "max": 1.0},  # a Tune domain
    }
    spec = sweep(tmp_path, method=method, run_cap=4, parameters=params, max_concurrent=1)

    def previewed(seed: str) -> list[dict]:
        preview = raysweep("validate", str(spec), "--sample", "4", "--seed", seed)
        assert preview.returncode == 0, preview.stderr
        return [json.loads(line) for line in preview.stdout.splitlines()]

    def tried(seed: str) -> list[dict]:
        out = run(spec, ray_cluster, "--seed", seed, "--wandb", "disabled", "--name", f"s{seed}")
        assert out.returncode == 0, out.stderr
        trials = sorted(
            read_trials(tmp_path / "runs" / f"s{seed}" / TRIALS_FILE), key=lambda t: t["start"]
        )  # one at a time
        return [{k: t["config"][k] for k in params} for t in trials]

    seven = tried("7")
    assert seven == previewed("7") == previewed("7")  # the same seed, the same configurations
    if method == "bayes":
        eight = tried("8")
        assert eight == previewed("8") != previewed("7")  # another seed, other configurations
        return
    # Issue 42: with no seed in the file or the command, each sweep draws its own (as W&B's searches
    # do), says it, and keeps it; --seed with that number repeats its draws.
    out = run(spec, ray_cluster, "--wandb", "disabled", "--name", "drawn")
    assert out.returncode == 0, out.stderr
    seed = int(re.search(r"seed (\d+), drawn for it \(--seed \1 repeats its draws\)", out.stdout).group(1))
    assert json.loads((tmp_path / "runs" / "drawn" / "spec.json").read_text())["seed"] == seed
    trials = sorted(read_trials(tmp_path / "runs" / "drawn" / TRIALS_FILE), key=lambda t: t["start"])
    drawn = [{k: t["config"][k] for k in params} for t in trials]
    assert drawn == previewed(str(seed)) != seven  # another seed, other configurations: its own, repeatable
    sample = raysweep("validate", str(spec), "--sample", "2")
    assert re.search(r"^seed \d+: this file fixes no seed, so each run draws its own", sample.stderr, re.M), (
        sample.stderr
    )


def test_run_count_a_private_run_dir_show_csv_and_a_failed_trials_wandb_exit_code(tmp_path, ray_cluster):
    """`run --count N` (README's run flags) runs N trials of a larger grid; the run dir is
    user-only (docs/clusters.md, Security); `show --csv` lists the trials; a failed trial's W&B run ends
    with exit code 1, a finished one's with 0. One sweep for all four."""
    spec = sweep(
        tmp_path,
        name="c",
        method="grid",
        base_config={"epochs": 2},
        parameters={"fail_at_epoch": {"values": [1, 99]}, "x": {"values": [0.1, 0.2]}},
    )
    out = run(spec, ray_cluster, "--count", "3", "--wandb", "offline")
    assert out.returncode == 0, out.stderr
    run_dir = tmp_path / "runs" / "c"
    assert run_dir.stat().st_mode & 0o777 == 0o700
    trials = show(run_dir)["trials"]
    assert len(trials) == 3 and {t["status"] for t in trials} == {"done", "failed"}, trials
    csv = raysweep("show", str(run_dir), "--csv")
    assert csv.returncode == 0, csv.stderr
    header, *rows = csv.stdout.strip().splitlines()
    columns = header.split(",")
    assert {"x", "status"} <= set(columns) and len(rows) == 3, csv.stdout
    assert sorted(r.split(",")[columns.index("status")] for r in rows) == sorted(t["status"] for t in trials)
    by_id = {t["trial_id"]: t["status"] for t in trials}
    ended = {}
    for path in run_dir.glob("*/wandb/offline-run-*/*.wandb"):
        contents = run_contents(path)
        ended.setdefault(by_id[contents["run"]["id"]], set()).add(contents["exit_code"])
    assert ended == {"failed": {1}, "done": {0}}, ended


def test_make_run_again_continues_the_sweep_and_printed_hints_run_as_printed(tmp_path, ray_cluster):
    """`make run` run a second time continues its sweep instead of refusing the name; a plain `run` of
    it joins it (a second W&B agent) with nothing left to add; a hint raysweep prints works pasted
    into a shell as printed."""
    spec = sweep(tmp_path, name="m", method="grid", base_config={"epochs": 1}, parameters={"x": {"values": [0.1, 0.3]}})
    flags = f"--storage {tmp_path / 'runs'} --wandb disabled --address {ray_cluster}"
    make = ["make", "-s", "run", f"RUN_SPEC={spec}", f"RUN_FLAGS={flags}"]
    first = subprocess.run(make, cwd=ROOT, capture_output=True, text=True, env=cli_env(), timeout=600)
    assert first.returncode == 0 and "sweep m finished" in first.stdout, first.stdout + first.stderr
    again = subprocess.run(make, cwd=ROOT, capture_output=True, text=True, env=cli_env(), timeout=600)
    assert again.returncode == 0 and "its run dir exists; continuing it" in again.stdout, again.stdout + again.stderr

    joined = run(spec, ray_cluster, "--wandb", "disabled")  # a second agent of the finished sweep: nothing to add
    assert joined.returncode == 0 and "sweep m has run its 2 trials; --count N" in joined.stdout, joined.stderr
    hint = first.stdout.split("results: ")[1].splitlines()[0]
    assert hint.startswith(".venv/bin/python -m raysweep show ") or hint.startswith(
        f"{sys.executable} -m raysweep show"
    ), hint
    pasted = subprocess.run(
        ["bash", "-c", hint],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=600,
    )
    assert pasted.returncode == 0, pasted.stdout + pasted.stderr
    assert [t["status"] for t in show(tmp_path / "runs" / "m")["trials"]] == ["done", "done"]


@pytest.mark.slow  # make test: the matrix's program-optuna-conditional and function-optuna-conditional-several cells
def test_a_program_on_a_conditional_space_runs_several_objectives_and_show_marks_the_front(tmp_path, ray_cluster):
    """W&B's new format as its release runs it: a ``program:`` script (W&B's style: ``wandb.init``,
    ``wandb.config``) on a conditional define-by-run space whose branch chooses num_gpus, and two
    objectives. Every rank of every trial gets the dict the space returned as its ``wandb.config``;
    ``show --json`` marks the Pareto front (tests/support/specs/scheduler/optuna_conditional.yaml)."""
    source = ROOT / "tests" / "support" / "specs" / "scheduler"
    doc = yaml.safe_load((source / "optuna_conditional.yaml").read_text())
    doc["program"] = str(source / "train.py")
    doc["scheduler"]["source"] = str(source / "objectives.py")
    spec = write_spec(tmp_path / "pareto.yaml", **doc, name="pareto", run_cap=4)
    out = run(spec, ray_cluster, "--wandb", "disabled", "--quiet")
    assert out.returncode == 0, out.stdout + out.stderr
    shown = show(tmp_path / "runs" / "pareto")
    assert [o["name"] for o in shown["objectives"]] == ["loss", "accuracy"]
    trials = shown["trials"]
    assert len(trials) == 4 and {t["status"] for t in trials} == {"done"}
    assert any(t["pareto"] for t in trials) and trials[0]["pareto"]  # the front first
    for t in trials:
        assert t["num_workers"] == t["config"]["num_gpus"]
        row = next(r for r in read_trials(tmp_path / "runs" / "pareto" / TRIALS_FILE) if r["trial_id"] == t["trial_id"])
        seen = [json.loads(p.read_text()) for p in sorted(Path(row["trial_dir"]).glob("seen.*.json"))]
        assert len(seen) == t["num_workers"] and all(s["config"] == t["config"] for s in seen), (t, seen)
        own = "width" if t["config"]["model"] == "small" else "depth"
        assert own in t["config"]


def test_an_optimizers_terminator_ends_the_sweep_finished_and_named(tmp_path, ray_cluster):
    """``optimizer(sweep_info)`` returning a study and a terminator (W&B's release): once it fires
    (three trials complete), no trial is proposed, and the sweep ends finished, exit 0, its last line
    naming the terminator."""
    source = ROOT / "tests" / "support" / "specs" / "conditional" / "space.py"
    spec = sweep(
        tmp_path,
        "term",
        method="custom",
        run_cap=8,
        max_concurrent=1,
        parameters={"x": {"min": 0.0, "max": 1.0}},
        scheduler={"engine": "optuna", "source": str(source), "optimizer": "study_and_terminator"},
    )
    out = run(spec, ray_cluster, "--wandb", "disabled", "--quiet")
    assert out.returncode == 0, out.stdout + out.stderr
    assert (
        "sweep term finished (the terminator that study_and_terminator() in space.py returned ended the search after "
        "3 trials)" in out.stdout
    ), out.stdout
    assert [t["status"] for t in show(tmp_path / "runs" / "term")["trials"]] == ["done"] * 3


def test_a_conditional_space_keeps_each_branch_apart_and_sizes_each_trial(tmp_path, ray_cluster):
    """W&B's new format: the space is a function (tests/support/specs/conditional/space.py); checked
    from the run dir: one branch's parameters never appear in the other's configs, and the num_gpus
    the space chose is the trial's size."""
    spec = sweep(
        tmp_path,
        "cond",
        method="custom",
        run_cap=6,
        seed=2,
        train_loop="tests.support.objectives_loop:train",
        scheduler={
            "engine": "optuna",
            "source": str(ROOT / "tests/support/specs/conditional/space.py"),
            "search_space": "space",
        },
    )
    out = run(spec, ray_cluster, "--wandb", "disabled")
    assert out.returncode == 0, out.stderr + out.stdout
    assert "trial sizes 1, 2: from 64 draws of space()" in out.stdout
    rows = read_trials(tmp_path / "runs" / "cond" / TRIALS_FILE)
    assert len(rows) == 6 and {r["config"]["model"] for r in rows} == {"shallow", "deep"}, [r["config"] for r in rows]
    for r in rows:
        own, other = ("width", "depth") if r["config"]["model"] == "shallow" else ("depth", "width")
        assert own in r["config"] and other not in r["config"], r["config"]
        assert r["num_workers"] == r["config"]["num_gpus"] == (1 if r["config"]["model"] == "shallow" else 2)
        assert r["status"] == "done" and r["iterations"] == 2  # epochs: the dict the space returned


GRID_STUDY = """import optuna


def make(sweep_info):
    grid = optuna.samplers.GridSampler({"x": [0.3, 0.9], "num_gpus": [1, 2]}, seed=0)
    return optuna.create_study(directions=["minimize", "minimize"], sampler=grid)
"""


def test_gpu_hours_as_an_objective_puts_the_best_scoring_larger_trial_and_the_cheapest_on_the_front(
    tmp_path, ray_cluster
):
    """metrics: score and raysweep's measured cost_hours. A 2-worker trial scores best (the loop's
    score falls with workers) and the cheapest trial costs least: both are on the front whatever
    the machine's speed, and the front is exactly the trials no other one beats on both. The user's
    study (W&B's optimizer(sweep_info)) is a grid of the four configurations, each run once."""
    (tmp_path / "grid.py").write_text(GRID_STUDY)
    spec = objectives_sweep(
        tmp_path,
        "cost",
        ["score", "cost_hours"],
        run_cap=4,
        seed=0,
        base_config={"epochs": 3},
        parameters={"x": {"values": [0.3, 0.9]}, "num_gpus": {"values": [1, 2]}},
        scheduler={"engine": "optuna", "source": "grid.py", "optimizer": "make"},
    )
    out = run(spec, ray_cluster, "--wandb", "disabled")
    assert out.returncode == 0, out.stderr + out.stdout
    trials = show(tmp_path / "runs" / "cost")["trials"]
    assert sorted((t["config"]["x"], t["num_workers"]) for t in trials) == [(0.3, 1), (0.3, 2), (0.9, 1), (0.9, 2)]
    seen = [(t["num_workers"], t["wall_s"], t["objectives"], t["pareto"]) for t in trials]
    best = min(trials, key=lambda t: t["objectives"]["score"])
    cheapest = min(trials, key=lambda t: t["objectives"]["cost_hours"])
    assert best["num_workers"] == 2 and best["pareto"] and cheapest["pareto"], seen

    assert [t["pareto"] for t in trials] == front_by_hand(trials), seen
    assert all(t["objectives"]["cost_hours"] > 0 for t in trials)
    table = raysweep("show", str(tmp_path / "runs" / "cost"))
    assert "the Pareto front (*" in table.stdout and "cost_hours" in table.stdout


def test_engine_ax_runs_a_sweep_of_two_objectives_through_tune(tmp_path, ray_cluster):
    """W&B's new format with engine ax (W&B's AxOptimizer, in search/wandb_engine.py's searcher): Ax
    proposes each trial, Tune runs it, and the front is the trials no other beats on both objectives."""
    spec = objectives_sweep(
        tmp_path,
        "ax",
        ["score", "cost_hours"],
        run_cap=3,
        seed=0,
        base_config={"epochs": 2},
        parameters={"x": {"min": 0.0, "max": 1.0}, "num_gpus": {"values": [1, 2]}},
        scheduler={"engine": "ax"},
    )
    out = run(spec, ray_cluster, "--wandb", "disabled")
    assert out.returncode == 0, out.stderr + out.stdout
    said = out.stdout + out.stderr
    assert "[INFO" not in said and "A new study created" not in said, said  # neither Ax's nor Optuna's log lines
    trials = show(tmp_path / "runs" / "ax")["trials"]
    assert len(trials) == 3 and {t["status"] for t in trials} == {"done"}, trials
    assert len({t["config"]["x"] for t in trials}) == 3 and all(0 <= t["config"]["x"] <= 1 for t in trials)
    assert all(t["num_workers"] == t["config"]["num_gpus"] for t in trials)
    assert [t["pareto"] for t in trials] == front_by_hand(trials), [(t["objectives"], t["pareto"]) for t in trials]
