"""The sweep on W&B's sweep page, against a stand-in W&B server (``wandb_server.py``).

No W&B server runs on these machines. The stand-in answers the GraphQL calls and HTTP routes
wandb 0.31 makes (``wandb_server.WANDB_VERSION``) and records them, so these tests see what W&B
would be told: which sweep each run's ``upsertBucket`` names, the sweep's config and state, and
which runs ``publish`` attaches. What W&B's real server then does with them is not tested here.

Modules: ``runs/publish.py``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, cli_env, one_node_cluster, show, wait_for_iterations, write_spec
from wandb_server import API_KEY, FakeWandb, serve

from raysweep import wandb_sweep
from raysweep.runs.files import TRIALS_FILE

LOOP = "train_loops.smoke:train"


@pytest.fixture(scope="module")
def module_wandb_server():
    state = FakeWandb()
    server = serve(state)
    yield state
    server.shutdown()


@pytest.fixture
def wandb_server(module_wandb_server):
    module_wandb_server.reset()
    return module_wandb_server


@pytest.fixture(scope="module")
def ray_cluster(module_wandb_server):
    """conftest's cluster, its nodes holding the W&B key and server, as a user's nodes would (a
    ``program:`` script's ``wandb.init`` runs there, and raysweep never ships the key)."""
    yield from one_node_cluster(_env(module_wandb_server))


# --- what each run is given: decisions, no cluster -------------------------------------------


KINDS = {  # how a sweep's trials run -> (its spec's keys, the function's style)
    "train_loop": ({"raysweep": {"train_loop": LOOP}}, None),
    "program": ({"program": "train.py"}, None),
    "wandb_function": ({}, "wandb"),
}


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(
    "workers, pooled, runner", [(1, False, "in_process"), (2, True, "warm"), (2, False, "torchtrainer")]
)
@pytest.mark.parametrize("sweep_id", [None, "sw123"])
def test_every_run_of_every_rank_names_the_wandb_sweep_and_no_other(
    tmp_path, monkeypatch, kind, workers, pooled, runner, sweep_id
):
    """Under every runner, for a train_loop (the driver logs each trial's run), a ``program:``
    script and a W&B-style function (each rank's ``wandb.init``, from its environment): the run
    names the sweep W&B created, and none when W&B created none (offline, or W&B refused), not
    even a WANDB_SWEEP_ID left in the user's environment."""
    from raysweep.driver.experiment import _callbacks
    from raysweep.driver.trainable import runners
    from raysweep.placement import Capacity, Node
    from raysweep.runs.run_settings import RunSettings
    from raysweep.spec import parse_spec
    from raysweep.trial.job import Sweep
    from raysweep.trial.job_builder import build_job
    from raysweep.trial.program_wandb import wandb_variables

    monkeypatch.setenv("WANDB_SWEEP_ID", "stale")
    keys, function = KINDS[kind]
    doc = {"method": "grid", "metric": {"name": "score", "goal": "minimize"}, "parameters": {"x": {"value": 1}}, **keys}
    spec = parse_spec({**doc, "parameters": {"x": {"value": 1}, "num_gpus": {"value": workers}}}, function=function)
    capacity = Capacity((Node("n", "127.0.0.1", 2, 2.0),), False, 1.0, True)
    sweep = Sweep(
        spec=spec,
        capacity=capacity,
        run_dir=str(tmp_path),
        name="s",
        workdir=str(tmp_path),
        wandb_mode="online",
        wandb_sweep_id=sweep_id,
        runners=runners(replace(spec, ddp_workers="warm" if pooled else "torchtrainer")),
    )
    job = build_job(sweep, {"x": 1, "num_gpus": workers}, "t1", str(tmp_path / "t1"))
    assert job.runner == runner
    callbacks = _callbacks(
        spec,
        RunSettings(name="s", budget=1, wandb="online"),
        False,
        None if sweep_id is None else wandb_sweep.WandbSweep(sweep_id, "e", "p", "url"),
        tmp_path,
    )
    if kind == "train_loop":
        (runs,) = callbacks
        assert runs.sweep_id == sweep_id
    else:  # each rank's script or function logs its own run
        assert callbacks == []
        for rank in range(workers):
            assert wandb_variables(job.entry.wandb, job.trial_id, rank)["WANDB_SWEEP_ID"] == sweep_id


def _env(server: FakeWandb | None) -> dict[str, str]:
    """The CLI's environment with a W&B key for ``server`` (None: no key, as on a machine never logged in)."""
    return cli_env() | ({"WANDB_BASE_URL": server.url, "WANDB_API_KEY": API_KEY} if server else {})


def _raysweep(server: FakeWandb | None, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "raysweep", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(server),
        timeout=600,
    )


def _spec(tmp_path: Path, name: str, base_config: dict | None = None) -> Path:
    return write_spec(
        tmp_path / f"{name}.yaml",
        name=name,
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        parameters={"x": {"values": [0.1, 0.5]}},
        raysweep={"train_loop": LOOP, "base_config": base_config or {"epochs": 2}},
    )


def _created(server: FakeWandb) -> list[dict]:
    """The upsertSweep calls that created a sweep (no id given), not those that changed one."""
    return [c.variables for c in server.calls if c.operation == "UpsertSweep" and not c.variables.get("id")]


def _states(server: FakeWandb) -> list[str]:
    return [c.variables["state"] for c in server.calls if c.operation == "UpsertSweep" and c.variables.get("state")]


def _run_upserts(server: FakeWandb) -> dict[str, set]:
    """Run name -> the sweep ids its upsertBucket calls named. A run's first upsert creates it with
    its sweep; later ones (config, summary) leave the sweep out, which changes nothing."""
    named: dict[str, set] = {}
    for call in server.calls:
        if call.operation == "UpsertBucket":
            named.setdefault(call.variables["name"], set()).update({call.variables.get("sweep")} - {None})
    return named


@pytest.mark.ray
def test_an_online_sweep_is_a_locally_controlled_wandb_sweep_that_every_run_joins_paused_by_ctrl_c_and_resumed(
    tmp_path, ray_cluster, wandb_server
):
    """Guarantee: "Online, every trial's W&B run joins the one W&B sweep that `run` created and
    `resume` reuses; no run is ever given a sweep id that W&B did not return." (Each rank of a
    ``program:`` trial, and a sweep W&B refused, are the next tests.)"""
    spec = _spec(tmp_path, "on", base_config={"epochs": 3, "sleep": 1.0})
    run_dir = tmp_path / "runs" / "on"
    driver = subprocess.Popen(
        [
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
            "online",
        ],
        cwd=ROOT,
        env=_env(wandb_server),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_iterations(driver, run_dir / TRIALS_FILE, 1)
    driver.send_signal(signal.SIGINT)
    out, err = driver.communicate(timeout=120)
    assert driver.returncode == 130, out + err
    (sweep,) = wandb_server.sweeps.values()
    assert f"W&B sweep: {wandb_server.url}/{wandb_server.entity}/raysweep/sweeps/{sweep['name']}\n" in out
    assert sweep["state"] == "PAUSED" and wandb_sweep.load(run_dir).id == sweep["name"]
    config = yaml.safe_load(sweep["config"])
    assert config["controller"] == {"type": "local"}  # W&B's controller proposes nothing
    assert config["parameters"] == {"x": {"values": [0.1, 0.5]}} and "raysweep" not in config

    out = _raysweep(wandb_server, "resume", run_dir, "--address", ray_cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    assert len(_created(wandb_server)) == 1 and f"/sweeps/{sweep['name']}\n" in out.stdout  # the run dir's sweep
    assert _states(wandb_server) == ["PAUSED", "RUNNING", "FINISHED"]
    trial_ids = {t["trial_id"] for t in show(run_dir)["trials"]}
    assert _run_upserts(wandb_server) == {trial_id: {sweep["name"]} for trial_id in trial_ids}
    for trial_id in trial_ids:  # each trial one run, every epoch in its history
        assert {h["epoch"] for h in wandb_server.runs[trial_id]["history"] if "score" in h} == {1, 2, 3}


@pytest.mark.ray
def test_a_sweep_wandb_refuses_is_said_once_and_the_runs_go_on_then_resume_attaches_them(
    tmp_path, ray_cluster, wandb_server
):
    wandb_server.refuse_sweeps = True
    spec = _spec(tmp_path, "refused")
    run_dir = tmp_path / "runs" / "refused"
    out = _raysweep(
        wandb_server, "run", spec, "--address", ray_cluster, "--storage", tmp_path / "runs", "--wandb", "online"
    )
    assert out.returncode == 0, out.stderr + out.stdout
    said = [line for line in out.stderr.splitlines() if line.startswith("W&B:")]
    assert said == [
        "W&B: could not create a sweep: input: permission denied: this user cannot create sweeps in the project; "
        "each trial's run still logs, in group refused, but on no sweep page"
    ]
    assert not wandb_server.sweeps and not (run_dir / "wandb_sweep.txt").exists()
    trial_ids = {t["trial_id"] for t in show(run_dir)["trials"]}
    assert _run_upserts(wandb_server) == {trial_id: set() for trial_id in trial_ids}  # never an id W&B did not give

    wandb_server.refuse_sweeps = False  # resume creates the sweep, with the runs that already ran
    out = _raysweep(wandb_server, "resume", run_dir, "--address", ray_cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    (sweep,) = wandb_server.sweeps.values()
    assert set(sweep["runs"]) == trial_ids and wandb_sweep.load(run_dir).id == sweep["name"]


@pytest.mark.ray
def test_every_rank_of_a_program_trial_that_calls_wandb_init_joins_the_sweep(tmp_path, ray_cluster, wandb_server):
    """A torchrun + wandb script, unchanged: both ranks call ``wandb.init`` (WANDB_SWEEP_ID, as
    ``wandb agent`` sets it); rank 0's run is the trial's, rank 1's a run of its own. raysweep
    never ships the W&B key: the cluster's nodes have it, as ``wandb agent``'s machine would."""
    import shutil

    shutil.copy(ROOT / "tests" / "support" / "programs" / "ddp_wandb.py", tmp_path / "ddp_wandb.py")
    spec = write_spec(
        tmp_path / "p.yaml",
        name="prog",
        program="ddp_wandb.py",
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        parameters={"lr": {"values": [0.3]}, "epochs": {"value": 2}, "num_gpus": {"value": 2}},
    )
    out = _raysweep(
        wandb_server, "run", spec.name, "--address", ray_cluster, "--storage", "runs", "--wandb", "online", cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr + out.stdout
    (sweep,) = wandb_server.sweeps.values()
    (trial,) = show(tmp_path / "runs" / "prog")["trials"]
    named = _run_upserts(wandb_server)
    assert len(named) == 2 and trial["trial_id"] in named  # rank 0's run is the trial's
    assert all(sweeps == {sweep["name"]} for sweeps in named.values())
    assert {wandb_server.runs[name]["project"] for name in named} == {"raysweep"}


@pytest.mark.ray
def test_publish_syncs_an_offline_sweep_onto_a_new_wandb_sweep_and_again_adds_only_new_runs(
    tmp_path, ray_cluster, wandb_server
):
    """The sweep is offline because W&B refused the key when it started online: its runs were
    written offline instead of each waiting on W&B (a compute node with a key and no network)."""
    spec = _spec(tmp_path, "off")
    run_dir = tmp_path / "runs" / "off"
    wandb_server.refuse_key = True
    out = _raysweep(wandb_server, "run", spec, "--address", ray_cluster, "--storage", tmp_path / "runs")
    assert out.returncode == 0, out.stderr + out.stdout
    (said,) = [line for line in out.stderr.splitlines() if line.startswith("W&B:")]
    assert said.startswith(
        f"W&B: could not log in to W&B: Failed to verify credentials with {wandb_server.url}: user is not logged in; "
        "the runs are written offline instead (to put them on W&B later: "
    ) and said.endswith(f" -m raysweep publish {run_dir})"), said
    assert json.loads((run_dir / "run.json").read_text())["wandb"] == "offline"  # and so resume too
    assert f"raysweep publish {run_dir}" in out.stdout
    trial_ids = {t["trial_id"] for t in show(run_dir)["trials"]}
    assert {p.name.rsplit("-", 1)[1] for p in run_dir.glob("*/wandb/offline-run-*")} == trial_ids

    out = _raysweep(None, "publish", run_dir)  # no key: a sentence, exit 2, nothing written
    assert out.returncode == 2 and out.stderr.startswith("raysweep: publish uploads to W&B, and no W&B key"), out.stderr
    assert "Traceback" not in out.stderr and not (run_dir / "wandb_sweep.txt").exists()
    assert not list(run_dir.glob("*/wandb/offline-run-*/*.synced"))

    wandb_server.refuse_key = True  # a key W&B does not know (a server that is down says so after ~20 s)
    out = _raysweep(wandb_server, "publish", run_dir)
    assert out.returncode == 2 and out.stderr == (
        f"raysweep: could not log in to W&B: Failed to verify credentials with {wandb_server.url}: "
        "user is not logged in; nothing was uploaded\n"
    )
    assert not (run_dir / "wandb_sweep.txt").exists() and not list(run_dir.glob("*/wandb/offline-run-*/*.synced"))

    wandb_server.refuse_key = False
    out = _raysweep(wandb_server, "publish", run_dir)
    assert out.returncode == 0, out.stderr + out.stdout
    (sweep,) = wandb_server.sweeps.values()
    assert (
        out.stdout
        == f"published 2 runs to W&B sweep {wandb_server.url}/{wandb_server.entity}/raysweep/sweeps/{sweep['name']}\n"
    )
    assert set(sweep["runs"]) == trial_ids and sweep["state"] == "FINISHED"
    assert set(_run_upserts(wandb_server)) == trial_ids
    assert all(len([h for h in wandb_server.runs[t]["history"] if "score" in h]) == 2 for t in trial_ids)

    calls = len(wandb_server.calls)
    out = _raysweep(wandb_server, "publish", run_dir)
    assert out.returncode == 0, out.stderr + out.stdout
    assert out.stdout.startswith("nothing new to publish") and not out.stderr
    new_calls = {c.operation for c in wandb_server.calls[calls:]}
    assert "UpsertBucket" not in new_calls and "UpsertSweep" not in new_calls  # nothing synced or attached again

    # a run that is new since (as a resumed sweep's new trial would have): synced and attached alone
    extra = run_dir / "extra"
    code = f"import wandb; wandb.init(mode='offline', project='raysweep', id='newrun1', dir={str(extra)!r}).finish()"
    extra.mkdir()
    subprocess.run([sys.executable, "-c", code], check=True, env=cli_env(), capture_output=True)
    calls = len(wandb_server.calls)
    out = _raysweep(wandb_server, "publish", run_dir)
    assert out.returncode == 0, out.stderr + out.stdout
    assert out.stdout.startswith("published 1 new runs (3 in all) to W&B sweep")
    assert set(_run_upserts(FakeWandb(calls=wandb_server.calls[calls:]))) == {"newrun1"}
    assert len(wandb_server.sweeps) == 1 and set(sweep["runs"]) == trial_ids | {"newrun1"}
