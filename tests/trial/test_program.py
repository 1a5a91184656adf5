"""``program:`` specs: a W&B sweep's script, unchanged, as every DDP worker of a trial.

The command rendering and the process-group supervisor are checked directly; the scripts in
``tests/support/programs/`` (a torchrun + wandb script, a Hydra app) run on a real ``ray start`` cluster.

Modules: ``trial/program_hook/sitecustomize.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from conftest import ROOT, cli_env, raysweep, show, write_spec
from wandb_records import run_contents

from raysweep.errors import SpecError
from raysweep.runs.files import TRIALS_FILE, read_trials
from raysweep.spec import parse_spec
from raysweep.trial.program import DEFAULT_COMMAND, GRACE_S, RankZeroMetrics, render_command

PROGRAMS = ROOT / "tests" / "support" / "programs"


# --- rendering, as wandb agent renders ------------------------------------------------------


PARAMS = {"lr": 1e-05, "flag": False, "on": True, "arch.stages.0.repeat": 2, "name": "a b"}


def test_default_command_is_wandb_agents_with_this_python():
    argv = render_command(None, "train.py", PARAMS, "/x/args.json")
    assert argv == [
        "/usr/bin/env",
        sys.executable,
        "train.py",
        "--lr=1e-05",
        "--flag=False",
        "--on=True",
        "--arch.stages.0.repeat=2",
        "--name=a b",
    ]
    assert tuple(DEFAULT_COMMAND) == ("${env}", "${interpreter}", "${program}", "${args}")


@pytest.mark.parametrize(
    "macro, expected",
    [
        ("${args_no_hyphens}", ["lr=1e-05", "flag=False", "on=True", "arch.stages.0.repeat=2", "name=a b"]),
        ("${args_no_boolean_flags}", ["--lr=1e-05", "--on", "--arch.stages.0.repeat=2", "--name=a b"]),
        (
            "${args_json}",
            [json.dumps({"lr": 1e-05, "flag": False, "on": True, "arch.stages.0.repeat": 2, "name": "a b"})],
        ),
        ("${args_json_file}", ["/x/args.json"]),
        (
            "${args_override_hydra}",
            ["++lr=1e-05", "++flag=False", "++on=True", "++arch.stages.0.repeat=2", "++name=a b"],
        ),
    ],
)
def test_macros(macro, expected):
    assert render_command(("${interpreter}", "-u", "${program}", macro), "p.py", PARAMS, "/x/args.json") == [
        sys.executable,
        "-u",
        "p.py",
        *expected,
    ]


def test_envvar_macro(monkeypatch):
    monkeypatch.setenv("DATA_ROOT", "/data/x")
    argv = render_command(("${program}", "--data=${envvar:DATA_ROOT}"), "p.py", {}, "")
    assert argv == ["p.py", "--data=/data/x"]


def test_unknown_macro_is_a_spec_error_with_a_suggestion():
    doc = {
        "program": "t.py",
        "method": "random",
        "command": ["${interpreter}", "${program}", "${args_no_hyphen}"],
        "parameters": {"lr": {"values": [1, 2]}},
    }
    with pytest.raises(
        SpecError, match=r"command.2: unknown macro \$\{args_no_hyphen\} \(did you mean 'args_no_hyphens'\?\)"
    ):
        parse_spec(doc)


def test_rank_zero_metrics_merge_lines_and_report_only_lines_with_the_metric(tmp_path):
    path = tmp_path / "m.jsonl"
    reader = RankZeroMetrics(path, "score")
    assert reader.new_reports() == []  # rank 0's script has not written yet
    path.write_text(json.dumps({"source": "wandb", "metrics": {"loss": 3.0}}) + "\n")
    assert reader.new_reports() == []
    with open(path, "a") as f:
        f.write(json.dumps({"source": "wandb", "metrics": {"score": 1.0, "epoch": 1}}) + "\n")
        f.write('{"source": "wandb", "metr')  # half a line: read once it is complete
    assert reader.new_reports() == [{"loss": 3.0, "score": 1.0, "epoch": 1}]
    with open(path, "a") as f:
        f.write('ics": {"score": 0.5}}\n')
    assert reader.new_reports() == [{"loss": 3.0, "score": 0.5, "epoch": 1}]
    assert reader.logged.count == 2


def test_supervisor_ends_the_whole_process_group_sigkill_after_grace(tmp_path):
    """SIGTERM to the supervisor: the script and a child that ignores SIGTERM are gone after the grace."""
    script = tmp_path / "stubborn.py"
    script.write_text(
        "import signal, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"
        f"open({str(tmp_path / 'pid')!r}, 'w').write(str(child.pid))\n"
        "time.sleep(600)\n"
    )
    sup = subprocess.Popen(
        [sys.executable, "-m", "raysweep.trial.supervise", "1.5", str(os.getpid()), "--", sys.executable, str(script)]
    )
    for _ in range(100):
        if (tmp_path / "pid").exists() and (tmp_path / "pid").read_text():
            break
        time.sleep(0.1)
    child = psutil.Process(int((tmp_path / "pid").read_text()))
    sup.send_signal(signal.SIGTERM)
    assert sup.wait(20) == 128 + signal.SIGTERM
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE


def test_supervisor_passes_the_exit_code_through(tmp_path):
    code = subprocess.call(
        [
            sys.executable,
            "-m",
            "raysweep.trial.supervise",
            "1",
            str(os.getpid()),
            "--",
            sys.executable,
            "-c",
            "raise SystemExit(3)",
        ]
    )
    assert code == 3


# --- on a real cluster ---------------------------------------------------------------------


def _project(tmp_path: Path, name: str, **doc) -> Path:
    """A project dir as a W&B user has it: the script next to its sweep file."""
    for script in PROGRAMS.glob("*.py"):
        shutil.copy(script, tmp_path / script.name)
    return write_spec(tmp_path / f"{name}.yaml", **({"name": name} | doc))


def _run(spec: Path, cluster: str, *flags: str) -> subprocess.CompletedProcess:
    return raysweep("run", spec.name, "--address", cluster, "--storage", "runs", *flags, cwd=spec.parent)


def _last_result(trial_dir: Path) -> dict:
    return json.loads((trial_dir / "result.json").read_text().splitlines()[-1])


def _scripts_left(name: str, project: Path) -> list[psutil.Process]:
    """This test's scripts still running: named ``name``, run in ``project`` (as wandb agent runs
    them, in the directory of the command), so that a script another test left is not counted."""
    return [
        p
        for p in psutil.process_iter(["cmdline", "cwd"])
        if any(name in part for part in (p.info["cmdline"] or []))
        and Path(p.info["cwd"] or "/").is_relative_to(project)
    ]


@pytest.mark.ray
def test_torchrun_script_on_two_workers_gets_the_config_on_every_rank(tmp_path, ray_cluster):
    spec = _project(
        tmp_path,
        "tr",
        program="ddp_wandb.py",
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        parameters={"lr": {"values": [0.1, 0.3]}, "epochs": {"value": 2}, "num_gpus": {"value": 2}},
    )
    out = _run(spec, ray_cluster, "--wandb", "offline")
    assert out.returncode == 0, out.stderr + out.stdout
    data = show(tmp_path / "runs" / "tr")
    assert [t["status"] for t in data["trials"]] == ["done", "done"]
    assert data["best"]["config"]["lr"] == 0.3 and data["best"]["metric"] == pytest.approx(0.5)
    for t in data["trials"]:
        trial_dir = next((tmp_path / "runs" / "tr").glob(f"*{t['trial_id']}*"))
        last = _last_result(trial_dir)
        lr = t["config"]["lr"]
        assert last["lr_sum"] == pytest.approx(2 * lr)  # both ranks read lr from wandb.config
        assert last["world_size"] == 2 and last["epoch"] == 2 and last["training_iteration"] == 2
        assert "train/step_loss" in last  # logged without the metric: merged, not a report of its own
        # rank 0's W&B run is the trial's, with the sweep's config and the logged history
        (run_file,) = trial_dir.glob(f"wandb/offline-run-*-{t['trial_id']}/*.wandb")
        logged = run_contents(run_file)
        assert logged["config"]["lr"] == pytest.approx(lr) and logged["config"]["epochs"] == 2
        assert logged["run"]["group"] == "tr"
        scores = [h["score"] for h in logged["history"] if "score" in h]
        assert scores == pytest.approx([(lr - 0.3) ** 2 + 1 / e for e in (1, 2)], rel=1e-6)
    assert not _scripts_left("ddp_wandb.py", tmp_path)


@pytest.mark.ray
def test_asha_stops_a_script_live_and_no_script_is_left_running(tmp_path, ray_cluster):
    spec = _project(
        tmp_path,
        "ta",
        program="ddp_wandb.py",
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        max_concurrent=1,
        parameters={
            "lr": {"values": [0.3, 3.0]},
            "epochs": {"value": 4},
            "sleep": {"value": 0.5},
            "num_gpus": {"value": 2},
        },
        scheduler={"type": "asha", "grace_period": 1, "max_t": 4, "reduction_factor": 2},
    )
    out = _run(spec, ray_cluster, "--wandb", "disabled")
    assert out.returncode == 0, out.stderr + out.stdout
    trials = {t["config"]["lr"]: t for t in show(tmp_path / "runs" / "ta")["trials"]}
    assert trials[0.3]["status"] == "done" and trials[0.3]["iterations"] == 4
    assert trials[3.0]["status"] == "stopped" and trials[3.0]["iterations"] < 4, trials
    assert not _scripts_left("ddp_wandb.py", tmp_path)


@pytest.mark.ray
def test_a_failing_script_fails_its_trial_with_the_end_of_its_stderr(tmp_path, ray_cluster):
    spec = _project(
        tmp_path,
        "tf",
        program="ddp_wandb.py",
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        parameters={"lr": {"value": 0.3}, "epochs": {"value": 3}, "fail": {"values": ["no", "yes"]}},
    )
    out = _run(spec, ray_cluster, "--wandb", "disabled")
    assert out.returncode == 0, out.stderr + out.stdout
    trials = {t["config"]["fail"]: t for t in show(tmp_path / "runs" / "tf")["trials"]}
    assert trials["no"]["status"] == "done"
    failed = trials["yes"]
    assert failed["status"] == "failed"
    assert "program ddp_wandb.py exited with code 1 on rank 0 of 1" in failed["error"]
    assert "ddp_wandb: planned failure at epoch 2" in failed["error"]


@pytest.mark.ray
def test_hydra_app_with_args_no_hyphens_and_raysweep_report(tmp_path, ray_cluster):
    spec = _project(
        tmp_path,
        "th",
        program="hydra_app.py",
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        command=["${env}", "${interpreter}", "${program}", "${args_no_hyphens}"],
        parameters={"lr": {"values": [0.1, 0.3]}, "model.depth": {"values": [1, 2]}},
    )
    out = _run(spec, ray_cluster, "--wandb", "disabled")
    assert out.returncode == 0, out.stderr + out.stdout
    data = show(tmp_path / "runs" / "th")
    assert len(data["trials"]) == 4 and all(t["status"] == "done" and t["iterations"] == 2 for t in data["trials"])
    for t in data["trials"]:
        c = t["config"]
        assert t["metric"] == pytest.approx((c["lr"] - 0.3) ** 2 + c["model.depth"] + 0.5)
    assert data["best"]["config"] == {"lr": 0.3, "model.depth": 1}


@pytest.mark.ray
def test_the_origin_stages_sweep_runs_its_hydra_script_as_wandb_agent_would(tmp_path, ray_cluster):
    """The seed-003 shape: a Hydra program: sweep of dotted names into a list, no base_config,
    W&B's hyperband. The script gets the overrides exactly as wandb agent renders them."""
    spec = _project(
        tmp_path,
        "t3",
        program="hydra_app.py",
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        command=["${env}", "${interpreter}", "${program}", "${args_no_hyphens}"],
        parameters={
            "arch.stages.1.repeat": {"values": [1, 2]},
            "arch.stages.0.repeat": {"values": [1, 3]},
            "arch.stages.0.include_inputs": {"values": [True, False]},
            "epochs": {"value": 4},
        },
        early_terminate={"type": "hyperband", "min_iter": 3, "max_iter": 10, "s": 2, "eta": 3},
    )
    out = _run(spec, ray_cluster, "--wandb", "disabled")
    assert out.returncode == 0, out.stderr + out.stdout
    from wandb.sdk.launch.sweeps.utils import create_sweep_command_args

    trials = show(tmp_path / "runs" / "t3")["trials"]
    assert len(trials) == 8 and all(t["status"] in ("done", "stopped") for t in trials)
    for t in trials:
        trial_dir = next((tmp_path / "runs" / "t3").glob(f"*{t['trial_id']}*"))
        argv = json.loads((trial_dir / "argv.rank0.json").read_text())
        expected = create_sweep_command_args({"args": {k: {"value": v} for k, v in t["config"].items()}})[
            "args_no_hyphens"
        ]
        assert argv == expected  # e.g. arch.stages.0.include_inputs=True arch.stages.0.repeat=3 ...
        c = t["config"]
        assert _last_result(trial_dir)["repeats"] == c["arch.stages.0.repeat"] - 1 + c["arch.stages.1.repeat"] - 1


@pytest.mark.slow  # make test: the watchdog ends a hung loop (test_reliability)
@pytest.mark.ray
def test_the_watchdog_shows_the_end_of_a_hung_scripts_stderr(tmp_path, ray_cluster):
    spec = _project(
        tmp_path,
        "tw",
        program="ddp_wandb.py",
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        # the watchdog counts from the script's start, its imports included: 4 s was too short for
        # its first report under the suite's load (the stderr then held no line yet)
        report_timeout_s=30,
        parameters={"lr": {"value": 0.3}, "epochs": {"value": 3}, "hang_at": {"value": 2}},
    )
    out = _run(spec, ray_cluster, "--wandb", "disabled")
    assert out.returncode == 1, out.stderr + out.stdout
    (trial,) = show(tmp_path / "runs" / "tw")["trials"]
    assert trial["status"] == "failed", trial
    assert (
        "watchdog: program ddp_wandb.py logged no score for 30 s (report_timeout_s) after 1 report(s)" in trial["error"]
    )
    assert "ddp_wandb: stuck at epoch 2" in trial["error"]  # the tail of its stderr
    assert not _scripts_left("ddp_wandb.py", tmp_path)


@pytest.mark.slow  # make test: ASHA stops a script live and none is left running
@pytest.mark.ray
def test_scripts_end_when_their_trials_process_dies_and_when_the_driver_is_sigtermd(tmp_path, ray_cluster):
    """A trial's process dies (an OOM kill) while its ranks' scripts run on warm workers, whose
    ranks then wait for it without end. Ray SIGKILLs a killed worker's children (the scripts'
    supervisors), so ending such a worker orphaned its scripts: they ran on with parent 1, and
    outlived a SIGTERM'd driver in 2 of 6 full runs. Now the worker ends its scripts first:
    * the first trial's: when the next trial borrows workers, the pool ends the dead trial's;
    * the second trial's, its process killed just before SLURM's SIGTERM (or kill) reaches the
      driver: the driver ends its warm workers before it exits 130 with the resume command.
    """
    spec = _project(
        tmp_path,
        "tk",
        program="ddp_wandb.py",
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        parameters={
            "lr": {"values": [0.1, 0.2]},
            "epochs": {"value": 60},
            "sleep": {"value": 1.0},
            "num_gpus": {"value": 2},
        },
    )
    cmd = [
        sys.executable,
        "-m",
        "raysweep",
        "run",
        str(spec),
        "--address",
        ray_cluster,
        "--storage",
        str(tmp_path / "runs"),
        "--wandb",
        "disabled",
    ]
    driver = subprocess.Popen(
        cmd, cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )

    def scripts(lr: str) -> list[psutil.Process]:  # the ranks' scripts, not their supervisors
        return [
            p
            for p in _scripts_left("ddp_wandb.py", tmp_path)
            # the command line as the process was listed: it may end (a zombie) before a second read
            if p.info["cmdline"][1:3] == ["ddp_wandb.py", "--epochs=60"] and f"--lr={lr}" in p.info["cmdline"]
        ]

    def wait_for(condition: Callable[[], bool], seconds: float) -> None:
        deadline = time.time() + seconds
        while time.time() < deadline and not condition():
            assert driver.poll() is None, driver.communicate()
            time.sleep(0.3)
        assert condition()

    gcs_port = int(ray_cluster.rsplit(":", 1)[1])

    def kill_trial_process() -> None:  # Tune's trial actor on this cluster (other modules' run too)
        (trial,) = [
            p
            for p in psutil.process_iter(["cmdline"])
            if "ImplicitFunc" in " ".join(p.info["cmdline"] or [])
            and any(c.raddr and c.raddr.port == gcs_port for c in p.net_connections())
        ]
        trial.kill()

    wait_for(lambda: len(scripts("0.1")) == 2, 240)
    kill_trial_process()
    wait_for(lambda: len(scripts("0.2")) == 2, 120)
    wait_for(lambda: not scripts("0.1"), GRACE_S + 5)  # ended before the lend (60 epochs: they'd run on)
    kill_trial_process()
    driver.send_signal(signal.SIGTERM)
    out, err = driver.communicate(timeout=120)
    assert driver.returncode == 130, out + err
    assert "raysweep resume" in err and "every trial failed" not in out
    deadline = time.time() + GRACE_S + 5  # a supervisor's grace, at most
    while _scripts_left("ddp_wandb.py", tmp_path) and time.time() < deadline:
        time.sleep(0.5)
    assert not _scripts_left("ddp_wandb.py", tmp_path)
    first, _ = sorted(show(tmp_path / "runs" / "tk")["trials"], key=lambda t: t["config"]["lr"])
    assert first["status"] == "failed" and "died" in first["error"], first


@pytest.mark.ray
@pytest.mark.slow  # make test: a function that never logs the metric (test_agent_move)
def test_a_script_that_never_logs_the_metric_ends_done_naming_what_it_logged(tmp_path, ray_cluster):
    """As under `wandb agent` (its run finishes): done, no value, one warning (issue 42)."""
    spec = _project(
        tmp_path,
        "tm",
        program="ddp_wandb.py",
        method="grid",
        metric={"name": "val/acc", "goal": "maximize"},
        parameters={"lr": {"value": 0.3}, "epochs": {"value": 1}},
    )
    out = _run(spec, ray_cluster, "--wandb", "disabled")
    assert out.returncode == 0, out.stderr
    assert "ended without logging the sweep's metric 'val/acc'" in out.stderr
    assert "it logged: epoch, lr_sum, score, train/step_loss, world_size" in out.stderr
    (trial,) = read_trials(spec.parent / "runs" / "tm" / TRIALS_FILE)
    assert trial["status"] == "done" and trial["metric_logged"] is False and trial["metrics"]["score"] > 0


def test_a_missing_program_is_a_user_error(tmp_path):
    spec = write_spec(tmp_path / "s.yaml", program="nope.py", method="grid", parameters={"lr": {"value": 1}})
    out = raysweep("run", str(spec), "--storage", str(tmp_path / "runs"), cwd=tmp_path)
    assert out.returncode == 2 and "program: 'nope.py' is not a file" in out.stderr and "Traceback" not in out.stderr


def test_numbers_and_booleans_in_a_command_become_strings_as_wandb_agent_makes_them():
    """wandb agent runs ``str(c)`` on every item of ``command:`` (issue 32: raysweep refused them)."""
    doc = {
        "program": "t.py",
        "method": "grid",
        "parameters": {"lr": {"value": 0.1}},
        "command": ["${env}", "python", "${program}", "--epochs", 10, "--do_train", True, "--wd", 0.5, "${args}"],
    }
    spec = parse_spec(doc)
    assert spec.command == (
        "${env}",
        "python",
        "${program}",
        "--epochs",
        "10",
        "--do_train",
        "True",
        "--wd",
        "0.5",
        "${args}",
    )
    assert render_command(spec.command, "t.py", {"lr": 0.1}, "")[3:] == [
        "--epochs",
        "10",
        "--do_train",
        "True",
        "--wd",
        "0.5",
        "--lr=0.1",
    ]


def test_program_runs_carry_no_sweep_id_that_wandb_did_not_create(tmp_path, monkeypatch):
    """With no sweep W&B created (offline, or W&B refused), a script's run gets no WANDB_SWEEP_ID
    (not even one left in the user's environment): it is no sweep's run, as outside `wandb agent`.
    An id W&B returned is passed on as is (every runner and kind: test_wandb_sweep.py)."""
    from dataclasses import replace

    from raysweep.placement import Capacity, Node, RankPlace, Shape
    from raysweep.trial.entries import Script
    from raysweep.trial.job import ProgramLaunch, TrialJob, WandbSetup
    from raysweep.trial.program import script_env

    monkeypatch.setenv("WANDB_SWEEP_ID", "stale")
    setup = WandbSetup(
        param_file="p.yaml",
        workdir=str(tmp_path),
        wandb_mode="offline",
        wandb_dir=str(tmp_path),
        project="p",
        entity=None,
        group="g",
        sweep_id=None,
    )
    launch = ProgramLaunch(program="t.py", command=None, params={}, args_json_file="a.json", wandb=setup)
    job = TrialJob(
        trial_id="t1",
        trial_dir=str(tmp_path),
        world_size=1,
        shape=Shape(1, 1),
        runner="in_process",
        metric="m",
        report_timeout_s=None,
        capacity=Capacity((Node("n", "127.0.0.1", 1, 1.0),), False, 1.0, True),
        max_failures=0,
        entry=Script(launch),
    )
    here = RankPlace("n", "127.0.0.1", 0, 0, 1)
    env = script_env(job, launch, 0, here, ("127.0.0.1", 1))
    assert "WANDB_SWEEP_ID" not in env and env["WANDB_RUN_ID"] == "t1" and env["WANDB_RUN_GROUP"] == "g"
    assert "WANDB_RUN_ID" not in script_env(job, launch, 1, here, ("127.0.0.1", 1))  # rank 1's run is its own
    created = replace(launch, wandb=replace(setup, sweep_id="abc123"))
    assert script_env(job, created, 0, here, ("127.0.0.1", 1))["WANDB_SWEEP_ID"] == "abc123"


def test_validate_sample_of_a_program_sweep_shows_what_the_script_receives(tmp_path):
    """Flat names as written (`--model.n_layers=4`, wandb.config["model.n_layers"]); a nested block as one mapping."""
    spec = write_spec(
        tmp_path / "p.yaml",
        program="train.py",
        method="grid",
        parameters={"model.n_layers": {"values": [4]}, "opt": {"parameters": {"lr": {"value": 0.1}}}},
    )
    out = raysweep("validate", str(spec), "--sample", "1")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"model.n_layers": 4, "opt": {"lr": 0.1}}
