"""The one-line move from ``wandb.agent`` to ``raysweep.run``, on scripts written the way W&B users
write them (tests/support/agent_scripts/: PyTorch, scikit-learn, ``with wandb.init() as run``, W&B's own
files, two agents, a function that always fails). Each script runs twice: as its author wrote it,
under wandb's own agent against the stand-in W&B server (the oracle), and with that one line
changed to ``raysweep.run``, on the module's Ray cluster with W&B offline. Issue 42.

Modules: ``driver/agents.py`` (two agents of one sweep).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, cli_env
from wandb_server import API_KEY, FakeWandb, serve

from raysweep.runs.files import TRIALS_FILE, read_trials

pytestmark = pytest.mark.ray

SCRIPTS = ROOT / "tests" / "support" / "agent_scripts"
# wandb's agent waits 5 s between heartbeats; the oracle need not.
WANDB_AGENT = (
    "import runpy, sys, wandb.agents.pyagent as agent; agent.Agent.HEARTBEAT_SLEEP_SECONDS = 0; "
    "runpy.run_path(sys.argv[1], run_name='__main__')"
)


@pytest.fixture(scope="module")
def server():
    state = FakeWandb()
    http = serve(state)
    yield state
    http.shutdown()


def run_script(name: str, mode: str, where: Path, cluster: str | None = None, server: FakeWandb | None = None):
    """``tests/support/agent_scripts/<name>`` run in ``where`` (a fresh directory) under ``mode``."""
    where.mkdir(parents=True, exist_ok=True)
    env = cli_env() | {"AGENT": mode}
    env.pop("WANDB_DIR", None)
    if mode == "wandb":
        env |= {"WANDB_BASE_URL": server.url, "WANDB_API_KEY": API_KEY, "WANDB_MODE": "online"}
        env.pop("WANDB_SILENT", None)  # the agent's own words are part of what it does
        cmd = [sys.executable, "-c", WANDB_AGENT, str(SCRIPTS / name)]
    else:
        env |= {"RAY_ADDRESS": cluster}
        cmd = [sys.executable, str(SCRIPTS / name)]
    out = subprocess.run(cmd, cwd=where, env=env, capture_output=True, text=True, timeout=600)
    assert "AFTER THE AGENT" in out.stdout, out.stdout[-3000:] + out.stderr[-3000:]  # the script goes on
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


def oracle(server: FakeWandb, name: str, where: Path, configs: list[dict]):
    """The script under wandb.agent, its W&B controller proposing ``configs``; the server's runs."""
    server.reset()
    server.queue_runs("sw000001", configs)
    out = run_script(name, "wandb", where, server=server)
    return out, dict(server.runs)


def trials(where: Path, sweep: str | None = None) -> list[dict]:
    (run_dir,) = [p.parent for p in (where / "raysweep_runs").glob("*/spec.json") if sweep in (None, p.parent.name)]
    return sorted(read_trials(run_dir / TRIALS_FILE), key=lambda r: r.get("start", 0))


def test_a_pytorch_function_runs_each_epoch_as_a_report(tmp_path, ray_cluster, server):
    _, runs = oracle(
        server,
        "torch_regression.py",
        tmp_path / "wandb",
        [{"lr": lr, "hidden": 16, "epochs": 3} for lr in (0.01, 0.05)],
    )
    assert len(runs) == 2 and all(r.get("exitcode") == 0 and len(r["history"]) == 3 for r in runs.values())
    run_script("torch_regression.py", "raysweep", tmp_path / "raysweep", ray_cluster)
    rows = trials(tmp_path / "raysweep")
    assert [(r["status"], r["iterations"]) for r in rows] == [("done", 3), ("done", 3)]
    assert all(r["metrics"]["val_loss"] > 0 for r in rows)


def test_a_function_that_never_logs_the_metric_finishes_its_runs(tmp_path, ray_cluster, server):
    """Under wandb.agent each run finishes (exit code 0) and the sweep goes on; under raysweep each
    trial is done, marked as not having logged the metric, and the sweep warns once."""
    _, runs = oracle(server, "sklearn_other_metric.py", tmp_path / "wandb", [{"C": 1.0}, {"C": 2.0}])
    assert len(runs) == 2 and {r.get("exitcode") for r in runs.values()} == {0}
    out = run_script("sklearn_other_metric.py", "raysweep", tmp_path / "raysweep", ray_cluster)
    rows = trials(tmp_path / "raysweep")
    assert [r["status"] for r in rows] == ["done", "done"] and all(r["metric_logged"] is False for r in rows)
    assert all("Test Accuracy" in r["metrics"] and "accuracy" not in r["metrics"] for r in rows)
    assert out.stderr.count("ended without logging the sweep's metric 'accuracy'") == 1, out.stderr
    assert "it logged: Test Accuracy, Train Accuracy" in out.stderr
    shown = subprocess.run(
        [sys.executable, "-m", "raysweep", "show", str(next((tmp_path / "raysweep" / "raysweep_runs").iterdir()))],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=ROOT,
    )
    assert shown.stdout.count("not logged") == 2, shown.stdout


def test_the_functions_prints_reach_the_console_with_the_trial_id(tmp_path, ray_cluster, server):
    out, _ = oracle(server, "context_run_prints.py", tmp_path / "wandb", [{"batch_size": 32}, {"batch_size": 64}])
    assert "training with batch size 32" in out.stdout and "training with batch size 64" in out.stdout
    out = run_script("context_run_prints.py", "raysweep", tmp_path / "raysweep", ray_cluster)
    for row in trials(tmp_path / "raysweep"):
        line = f"[{row['trial_id']}] training with batch size {row['config']['batch_size']}"
        assert line in out.stdout, out.stdout


def test_quiet_keeps_trial_output_off_the_console_and_in_driver_log(capsys, caplog):
    """``--quiet``: the driver's handler of streamed worker output shows nothing, logs every trial line."""
    from raysweep.driver.trial_output import TrialOutput
    from raysweep.trial.output_marks import END, marked

    batch = {"lines": [marked("t1", "hello"), "a Ray worker's own line", marked("t1", END)], "is_err": False}
    loud, quiet = TrialOutput(quiet=False), TrialOutput(quiet=True)
    with caplog.at_level("INFO", logger="raysweep.trials"):
        loud(batch)
        quiet(batch)
    assert capsys.readouterr().out == "[t1] hello\n"  # once: the loud one's; never Ray's own lines nor the end
    assert [r.getMessage() for r in caplog.records] == ["[t1] hello", "[t1] hello"]
    assert loud.ended == quiet.ended == {"t1"}


def test_wandb_files_are_under_the_working_directory_as_wandb_agent_puts_them(tmp_path, ray_cluster, server):
    """W&B's sweep check reads wandb/latest-run and wandb/debug.log from where it runs; each trial's
    run is linked into its trial dir, where show and publish look."""
    _, runs = oracle(server, "reads_latest_run.py", tmp_path / "wandb", [{"x": 1}, {"x": 2}])
    assert {r.get("exitcode") for r in runs.values()} == {0}
    where = tmp_path / "raysweep"
    run_script("reads_latest_run.py", "raysweep", where, ray_cluster)
    rows = trials(where)
    assert [r["status"] for r in rows] == ["done", "done"], [r.get("error") for r in rows]
    for row in rows:
        (run_dir,) = (where / "wandb").glob(f"offline-run-*-{row['trial_id']}")
        (link,) = Path(row["trial_dir"]).glob("wandb/offline-run-*")
        assert link.is_symlink() and link.resolve() == run_dir.resolve()


def test_a_second_agent_adds_its_runs_to_the_sweep(tmp_path, ray_cluster, server):
    _, runs = oracle(server, "two_agents.py", tmp_path / "wandb", [{"lr": v / 10} for v in range(1, 6)])
    assert len(runs) == 5 and len(server.sweeps["sw000001"]["runs"]) == 5
    where = tmp_path / "raysweep"
    out = run_script("two_agents.py", "raysweep", where, ray_cluster)
    rows = trials(where, "two-agents")
    assert len(rows) == 5 and all(r["status"] == "done" for r in rows)
    assert sorted(r["metrics"]["agent"] for r in rows) == [1, 1, 1, 2, 2]
    assert len({r["config"]["lr"] for r in rows}) == 5  # the second agent drew afresh
    assert "adding 2 trial(s) to its 3" in out.stdout


@pytest.mark.slow  # make test: the same rule for a loop (test_driver)
def test_the_first_failures_stop_the_sweep_and_the_script_goes_on(tmp_path, ray_cluster, server):
    """wandb.agent: "... killing sweep." and it returns. raysweep: W&B's sentence for its rule (the
    first 5 all failed), the result says why it stopped, and the script goes on (no KeyboardInterrupt)."""
    out, runs = oracle(server, "fails_at_start.py", tmp_path / "wandb", [{"x": x} for x in range(8)])
    # W&B's agent has a second rule, which a fast failure meets first: 3 failed in its first 60 s
    assert "Detected 3 failed runs in the first 60 seconds, killing sweep." in out.stderr and len(runs) == 3
    out = run_script("fails_at_start.py", "raysweep", tmp_path / "raysweep", ray_cluster)
    stop = "Detected 5 failed runs in a row at start, killing sweep."
    assert f"STOPPED: {stop}" in out.stdout and f"stopped ({stop})" in out.stdout
    assert "interrupted" not in out.stdout + out.stderr
    rows = trials(tmp_path / "raysweep")
    assert 5 <= sum(r["status"] == "failed" for r in rows) < 8, rows
    assert {r["status"] for r in rows} <= {"failed", "stopped"}  # one running at the stop ends with it
    assert "learning_rate" in rows[0]["error"]


def test_two_drivers_of_one_sweep_are_refused_and_a_count_is_never_ignored(tmp_path, ray_cluster):
    spec = tmp_path / "slow.yaml"
    spec.write_text(
        "name: slow\nmethod: grid\nmetric: {name: score, goal: minimize}\nparameters: {x: {values: [0.1, 0.2]}}\n"
        "raysweep: {train_loop: 'train_loops.smoke:train', base_config: {epochs: 20, sleep: 0.5}, max_concurrent: 1}\n"
    )
    common = ["--address", ray_cluster, "--storage", str(tmp_path / "runs"), "--wandb", "disabled"]
    first = subprocess.Popen(
        [sys.executable, "-m", "raysweep", "run", str(spec), *common],
        cwd=ROOT,
        env=cli_env(),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.time() + 120
        while not (tmp_path / "runs" / "slow" / TRIALS_FILE).exists():
            assert first.poll() is None and time.time() < deadline, first.communicate()
            time.sleep(0.2)
        second = subprocess.run(
            [sys.executable, "-m", "raysweep", "run", str(spec), *common, "--count", "1"],
            cwd=ROOT,
            env=cli_env(),
            capture_output=True,
            text=True,
        )
        assert second.returncode == 2 and "is being run by another driver (pid" in second.stderr, second.stderr
    finally:
        first.kill()
        first.communicate()
    again = subprocess.run(
        [sys.executable, "-m", "raysweep", "run", str(spec), *common, "--resume-existing", "--count", "5"],
        cwd=ROOT,
        env=cli_env(),
        capture_output=True,
        text=True,
    )
    assert again.returncode == 2 and "--count 5: sweep slow has 2 trials" in again.stderr, again.stderr
