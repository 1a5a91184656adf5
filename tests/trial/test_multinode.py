"""A real Ray cluster of several nodes on this machine: trials spread over nodes, a trial larger
than one node spans whole nodes under every runner, and a node killed mid-sweep loses no trial.

The nodes are ``ray start`` processes at their own loopback addresses (127.0.0.2, 127.0.0.3,
...), as Ray's own tests add nodes, so that node addresses differ as on a real cluster (Ray
Train groups ranks into nodes by address); gloo is told to use ``lo``. Every node after the head
gets its own ports. Each advertises 2 CPUs, 2 GPUs that do not exist (Ray still hands them out
and sets CUDA_VISIBLE_DEVICES), ``raysweep_slot`` 2 and a resource naming it (``node_head``,
``node_worker``, ...); the loops record the node every rank of every trial ran on.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from conftest import (
    ROOT,
    cli_env,
    driver_script,
    ensure_ray_token,
    processes,
    raysweep,
    show,
    stop_cluster,
    write_spec,
)
from loopback import head_port_for, kill_node, start_node

from raysweep.runs.files import TRIALS_FILE, read_trials

pytestmark = pytest.mark.ray

LOOP = "tests.support.node_loop:train"
SPAN_LOOP = "tests.support.span_loop:train"
HEAD_IP = "127.0.0.2"


@pytest.fixture(scope="module")
def two_nodes():
    """Head and worker, 2 CPUs, 2 fake GPUs and 2 worker slots each; yields (address, the worker's raylet port)."""
    ensure_ray_token()
    address = f"{HEAD_IP}:{head_port_for(HEAD_IP)}"
    try:
        start_node(HEAD_IP, "node_head")
        raylet_port = start_node("127.0.0.3", "node_worker", head=address)
        yield address, raylet_port
    finally:
        stop_cluster(address)


LEFT_GROUPS = """
left = [g["bundles"] for g in ray.util.placement_group_table().values() if g["state"] != "REMOVED"]
print("LEFT", left)
"""


def records(record_dir: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(record_dir.glob("*.jsonl")) for line in path.read_text().splitlines()]


def node_sweep(tmp_path: Path, name: str, **doc) -> tuple[Path, Path]:
    record_dir = tmp_path / f"{name}-records"
    record_dir.mkdir()
    doc["base_config"] = {"record_dir": str(record_dir)} | doc.get("base_config", {})
    spec = write_spec(
        tmp_path / f"{name}.yaml",
        name=name,
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        train_loop=LOOP,
        **doc,
    )
    return spec, record_dir


@pytest.mark.slow  # make test: a four-worker trial spans both nodes, a script's ranks on both nodes
def test_trials_run_on_both_nodes_and_ddp_workers_share_one(tmp_path, two_nodes):
    address, _ = two_nodes
    spec, record_dir = node_sweep(
        tmp_path,
        "spread",
        base_config={"epochs": 2, "sleep": 1.0},
        parameters={"x": {"values": [0.1, 0.2]}, "num_gpus": {"values": [1, 2]}},
    )
    out = raysweep("run", str(spec), "--address", address, "--storage", str(tmp_path / "runs"), "--wandb", "disabled")
    assert out.returncode == 0, out.stderr + out.stdout
    assert "cluster: 4 GPU slot(s) on 2 node(s), at most 2 on one node" in out.stdout
    trials = show(tmp_path / "runs" / "spread")["trials"]
    assert len(trials) == 4 and all(t["status"] == "done" for t in trials)

    seen = records(record_dir)
    assert {r["node"] for r in seen} == {"node_head", "node_worker"}
    assert len({r["node_id"] for r in seen}) == 2
    for x in (0.1, 0.2):
        ddp = [r for r in seen if r["x"] == x and r["world_size"] == 2]
        assert {r["rank"] for r in ddp} == {0, 1}
        assert len({r["node_id"] for r in ddp}) == 1, ddp  # both workers of the trial on one node


def test_a_two_node_trial_gets_a_reservation_and_short_trials_are_backfilled_before_it(tmp_path, two_nodes):
    """Two nodes of 2 slots: the 4-worker trial needs both whole; tests/support/backfill_case.py
    says what the grid's order forces. Trials place their own slots (test_budget.py runs the same
    grid with RAYSWEEP_START_AHEAD=0 too, on one node)."""
    from backfill_case import backfill_sweep, check_backfill, check_started_ahead

    from raysweep.runs.rows import read_rows

    address, _ = two_nodes
    spec = backfill_sweep(tmp_path, "bf-two", resources={"network_interface": "lo"})
    args = ["run", str(spec), "--address", address, "--storage", str(tmp_path / "runs"), "--wandb", "disabled"]
    out = subprocess.run(
        [sys.executable, "-m", "raysweep", *args], capture_output=True, text=True, cwd=ROOT, env=cli_env()
    )
    assert out.returncode == 0, out.stderr + out.stdout
    rows = read_rows(tmp_path / "runs" / "bf-two")
    check_backfill(rows)
    check_started_ahead(rows, tmp_path / "runs" / "bf-two")


def span_sweep(tmp_path: Path, name: str, **doc) -> tuple[Path, Path]:
    """A sweep of one 4-worker trial: 2 ranks on each node. Its records hold one line per rank."""
    record_dir = tmp_path / f"{name}-records"
    record_dir.mkdir()
    raysweep_block = {"resources": {"network_interface": "lo"}} | doc.pop("raysweep", {})
    spec = write_spec(
        tmp_path / f"{name}.yaml",
        name=name,
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        parameters={"x": {"values": [1]}, "record_dir": {"value": str(record_dir)}, "num_gpus": {"value": 4}},
        raysweep=raysweep_block,
        **doc,
    )
    return spec, record_dir


def start_run(spec: Path, address: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "raysweep", "run", str(spec), "--address", address, "--wandb", "disabled"]
    cmd += ["--storage", str(spec.parent / "runs")]
    return subprocess.Popen(cmd, cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_records(record_dir: Path, driver: subprocess.Popen, done, timeout: float = 180) -> list[dict]:
    """The records once ``done(records)`` holds; fails if the driver ends or time runs out first."""
    deadline = time.time() + timeout
    while not done(seen := records(record_dir)):
        if driver.poll() is not None or time.time() > deadline:
            driver.kill()
            out, err = driver.communicate()
            pytest.fail(f"waited in vain for the records ({len(seen)} so far)\n{out[-2000:]}\n{err[-2000:]}")
        time.sleep(0.3)
    return seen


def trial_error(run_dir: Path) -> str:
    (row,) = read_trials(run_dir / TRIALS_FILE)
    return row.get("error", "")


def assert_two_ranks_per_node(seen: list[dict], world: int = 4) -> None:
    """Every rank once per report; ranks node by node, local ranks 0 and 1 on each, by node (two
    addresses); the all-reduce over every rank right; each node's ranks see that node's two GPUs."""
    ranks = sorted({int(r["rank"]) for r in seen})
    assert ranks == list(range(world)), seen
    local = {}
    for r in seen:
        local.setdefault(r["address"], set()).add((int(r["rank"]), int(r["local_rank"])))
    assert sorted(local) == [HEAD_IP, "127.0.0.3"], local
    for node, pairs in local.items():
        assert {lr for _, lr in pairs} == {0, 1}, (node, pairs)  # equal ranks per node, local ranks from 0
        first = min(rank for rank, _ in pairs)
        assert {rank for rank, _ in pairs} == {first, first + 1}  # a node's ranks are consecutive
    assert {float(r["sum"]) for r in seen} == {float(sum(range(1, world + 1)))}
    assert {r["gloo_ifname"] for r in seen} == {"lo"}  # raysweep.resources.network_interface


@pytest.mark.parametrize("ddp_workers", ["warm", "torchtrainer"])
def test_a_four_worker_trial_spans_two_nodes_of_two(tmp_path, two_nodes, ddp_workers):
    """Guarantee: "A trial larger than one node runs on whole nodes, the same ranks on each,
    under every runner; a node that dies under it ends its ranks on every node." Warm ranks see their
    own GPU, a TorchTrainer's their node's (scripts, functions and a node's death: below)."""
    address, _ = two_nodes
    spec, record_dir = span_sweep(
        tmp_path, f"span-{ddp_workers}", raysweep={"train_loop": SPAN_LOOP, "ddp_workers": ddp_workers}
    )
    out = raysweep("run", str(spec), "--address", address, "--storage", str(tmp_path / "runs"), "--wandb", "disabled")
    assert out.returncode == 0, out.stderr + out.stdout
    (trial,) = show(tmp_path / "runs" / f"span-{ddp_workers}")["trials"]
    assert trial["status"] == "done" and trial["metric"] == 10.0, trial
    seen = records(record_dir)
    assert_two_ranks_per_node(seen)
    visible = {(r["address"], int(r["local_rank"])): r["visible"] for r in seen}
    if ddp_workers == "warm":  # each warm worker is pinned to its one GPU of its node
        assert sorted(visible.values()) == ["0", "0", "1", "1"], visible
    else:
        assert set(visible.values()) == {"0,1"}, visible


@pytest.mark.slow  # make test: a killed driver, then resume, on one node (test_interrupt)
@pytest.mark.parametrize(
    ("ddp_workers", "marker"),
    [
        ("warm", "DDPWorker"),
        # under torchtrainer a killed driver's ranks end and resume continues in test_interrupt.py
        # (one node; Ray's owner rule is the same on every node)
        pytest.param("torchtrainer", "RayTrainWorker", marks=pytest.mark.slow),
    ],
)
def test_a_driver_killed_under_a_two_node_trial_ends_its_ranks_and_resume_goes_on_from_the_checkpoint(
    tmp_path, two_nodes, ddp_workers, marker
):
    """Guarantee: "A driver killed (SIGKILL) while a trial runs on several nodes leaves none
    of its ranks running and no placement group held, under every runner; `resume` goes on from the
    trial's checkpoint."

    Ray ends a dead driver's actors on every node; the resumed trial runs on new ranks."""
    address, _ = two_nodes
    spec, record_dir = span_sweep(
        tmp_path,
        f"span-driver-{ddp_workers}",
        raysweep={"train_loop": SPAN_LOOP, "ddp_workers": ddp_workers, "base_config": {"epochs": 6, "sleep": 1.0}},
    )
    driver = start_run(spec, address)
    first = wait_for_records(record_dir, driver, lambda seen: len({r["epoch"] for r in seen}) >= 4)
    ranks = [p for p in processes(marker, address) if p.is_running()]
    assert len(ranks) == 4 and {r["address"] for r in first} == {HEAD_IP, "127.0.0.3"}
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    _, alive = psutil.wait_procs(ranks, timeout=60)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE], "the killed driver's ranks still run"
    held = driver_script(address, LEFT_GROUPS, timeout=120)
    assert "LEFT []" in held.stdout, held.stdout + held.stderr

    out = raysweep("resume", str(tmp_path / "runs" / spec.stem), "--address", address)
    assert out.returncode == 0, out.stderr + out.stdout
    (trial,) = show(tmp_path / "runs" / spec.stem)["trials"]
    assert trial["status"] == "done" and trial["iterations"] == 6, trial
    before = max(r["epoch"] for r in first)
    after = [r for r in records(record_dir) if r not in first]
    resumed_from = min(r["epoch"] for r in after)
    assert 1 < resumed_from <= before + 1, (resumed_from, before)  # from its checkpoint, not from scratch
    assert {r["epoch"] for r in after} == set(range(resumed_from, 7))
    assert not {p.pid for p in ranks} & {p.pid for p in processes(marker, address)}


def test_a_program_trial_spans_two_nodes_with_torchruns_environment(tmp_path, two_nodes):
    """Each rank's script gets RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK and MASTER_ADDR on
    rank 0's node, and its node's GPUs; rank 0's metric reaches the sweep."""
    address, _ = two_nodes
    spec, record_dir = span_sweep(
        tmp_path, "span-program", program=str(ROOT / "tests" / "support" / "programs" / "span_program.py")
    )
    out = raysweep("run", str(spec), "--address", address, "--storage", str(tmp_path / "runs"), "--wandb", "disabled")
    assert out.returncode == 0, out.stderr + out.stdout
    (trial,) = show(tmp_path / "runs" / "span-program")["trials"]
    assert trial["status"] == "done" and trial["metric"] == 10.0, trial
    seen = records(record_dir)
    (master,) = {r["master_addr"] for r in seen}
    assert master in (HEAD_IP, "127.0.0.3")  # rank 0's node
    assert sorted((int(r["rank"]), r["node_rank"], r["local_rank"], r["local_world_size"]) for r in seen) == [
        (0, "0", "0", "2"),
        (1, "0", "1", "2"),
        (2, "1", "0", "2"),
        (3, "1", "1", "2"),
    ]
    assert {r["sum"] for r in seen} == {10.0} and {r["visible"] for r in seen} == {"0,1"}
    assert {r["gloo_ifname"] for r in seen} == {"lo"}


@pytest.mark.slow  # make test: a loop and a script span two nodes
def test_a_wandb_style_function_spans_two_nodes(tmp_path, two_nodes):
    address, _ = two_nodes
    record_dir = tmp_path / "records"
    record_dir.mkdir()
    script = tmp_path / "sweep.py"
    script.write_text(
        "import sys, raysweep\n"
        "from tests.support.span_loop import main\n"
        "sweep = {'name': 'span-fn', 'method': 'grid', 'metric': {'name': 'score', 'goal': 'minimize'},\n"
        f"    'parameters': {{'x': {{'values': [1]}}, 'record_dir': {{'value': {str(record_dir)!r}}}, 'num_gpus': {{'value': 4}}}},\n"
        "    'raysweep': {'resources': {'network_interface': 'lo'}}}\n"
        f"result = raysweep.run(sweep, function=main, address={address!r}, storage={str(tmp_path / 'runs')!r}, wandb='offline', quiet=True)\n"
        "print('STATUS', result.best.status, result.best.metric)\n"
    )
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, env=cli_env(), timeout=600
    )
    assert "STATUS done 10.0" in out.stdout, out.stdout[-3000:] + out.stderr[-3000:]
    assert_two_ranks_per_node(records(record_dir))


@pytest.mark.slow  # make test: a stuck rank on one node (test_reliability)
def test_a_rank_stuck_on_one_node_is_ended_and_frees_the_workers_on_every_node(tmp_path, two_nodes):
    """Rank 3 (on the second node) stops answering; its peers wait in an all-reduce. The watchdog
    ends the trial with its sentence, every rank's worker is ended, and the next 4-worker trial
    gets new workers on both nodes and finishes."""
    address, _ = two_nodes
    spec, record_dir = span_sweep(
        tmp_path,
        "span-hang",
        raysweep={"train_loop": SPAN_LOOP, "report_timeout_s": 5, "base_config": {"epochs": 2}, "max_concurrent": 1},
    )
    doc = yaml.safe_load(spec.read_text())
    doc["parameters"]["hang_rank"] = {"values": [3, -1]}
    spec.write_text(yaml.safe_dump(doc))
    out = raysweep("run", str(spec), "--address", address, "--storage", str(tmp_path / "runs"), "--wandb", "disabled")
    assert out.returncode == 0, out.stderr + out.stdout
    rows = {r["config"]["hang_rank"]: r for r in read_trials(tmp_path / "runs" / "span-hang" / TRIALS_FILE)}
    assert rows[3]["status"] == "failed" and "watchdog:" in rows[3]["error"], rows[3]
    assert rows[-1]["status"] == "done" and rows[-1]["iterations"] == 2, rows[-1]


ALIVE = "print('ALIVE', sorted(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']))"


def _end_node_once(address: str, raylet_port: int, ip: str) -> None:
    """End the node at ``ip`` unless it has ended already, and wait until Ray counts it gone."""
    if any(
        p.info["name"] == "raylet" and f"--node_manager_port={raylet_port}" in (p.info["cmdline"] or [])
        for p in psutil.process_iter(["name", "cmdline"])
    ):
        kill_node(raylet_port)
    deadline = time.time() + 120
    while (out := driver_script(address, ALIVE, timeout=60)).returncode or f"'{ip}'" in out.stdout:
        assert time.time() < deadline, out.stdout + out.stderr


def test_killing_a_node_mid_sweep_loses_no_trial(tmp_path, two_nodes):
    address, raylet_port = two_nodes
    xs = [0.1, 0.2, 0.3, 0.4, 0.5]
    spec, record_dir = node_sweep(
        tmp_path,
        "kill",
        base_config={"epochs": 4, "sleep": 1.0},
        max_failures=2,
        parameters={"x": {"values": xs}},
    )
    cmd = [
        sys.executable,
        "-m",
        "raysweep",
        "run",
        str(spec),
        "--address",
        address,
        "--storage",
        str(tmp_path / "runs"),
        "--wandb",
        "disabled",
    ]
    driver = subprocess.Popen(cmd, cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not any(r["node"] == "node_worker" and r["epoch"] >= 2 for r in records(record_dir)):
            assert driver.poll() is None and time.time() < deadline, "no trial reached epoch 2 on the worker node"
            time.sleep(0.2)
        before = records(record_dir)
        on_worker = {r["x"] for r in before if r["node"] == "node_worker"}
        checkpointed = {r["x"] for r in before if r["node"] == "node_worker" and r["epoch"] >= 2}  # epoch 1 saved
        assert kill_node(raylet_port) > 1
        stdout, stderr = driver.communicate(timeout=300)
    finally:
        driver.kill()
    assert driver.returncode == 0, stderr + stdout

    trials = {t["config"]["x"]: t for t in show(tmp_path / "runs" / "kill")["trials"]}
    summary = {x: (t["status"], t["iterations"], (t.get("error") or "")[-300:]) for x, t in trials.items()}
    all_done = sorted(trials) == xs and all(t["status"] == "done" and t["iterations"] == 4 for t in trials.values())
    assert all_done, f"{summary}\n{stdout[-3000:]}\n{stderr[-3000:]}"
    seen = records(record_dir)
    moved = {r["x"] for r in seen if r["node"] == "node_head"} & on_worker
    assert moved, "a trial that ran on the killed node was not retried on the head"
    for x in moved:  # each went on to the last epoch on the head
        assert max(r["epoch"] for r in seen if r["x"] == x and r["node"] == "node_head") == 4
    assert checkpointed & moved, (checkpointed, moved)  # the trial seen at epoch 2 was cut off there, and retried
    for x in checkpointed & moved:  # and one that had saved a checkpoint went on from it
        assert min(r["epoch"] for r in seen if r["x"] == x and r["node"] == "node_head") >= 2


@pytest.mark.slow  # make test: a node killed mid-sweep, below
def test_a_node_killed_under_a_two_node_trial_restarts_it_or_fails_it_with_a_sentence(tmp_path, two_nodes):
    """Issue 44: a node that dies mid-trial ends the trial's ranks on every node; the trial goes on
    from its last checkpoint on nodes that can hold it. When the nodes left cannot, it fails with a
    sentence at once, never waiting for a node that is gone. The cluster is the head plus two
    nodes of its own: the module's worker node is ended first, unless a test before it did."""
    address, raylet_port = two_nodes
    _end_node_once(address, raylet_port, "127.0.0.3")
    ports = {ip: start_node(ip, f"node_{ip.rsplit('.', 1)[1]}", head=address) for ip in ("127.0.0.4", "127.0.0.5")}
    spec, record_dir = span_sweep(
        tmp_path,
        "span-kill",
        raysweep={"train_loop": SPAN_LOOP, "max_failures": 2, "base_config": {"epochs": 30, "sleep": 1.0}},
    )
    driver = start_run(spec, address)
    try:
        first = wait_for_records(record_dir, driver, lambda seen: len(seen) >= 8)  # two epochs on every rank
        victim = next(ip for ip in {r["address"] for r in first} if ip in ports)  # never the head: the driver is there
        kill_node(ports.pop(victim))
        # the trial goes on, on the head and the node left, from its checkpoint
        wait_for_records(
            record_dir, driver, lambda seen: any(r["address"] not in {r0["address"] for r0 in first} for r in seen)
        )
        moved = records(record_dir)
        restarted = [r for r in moved if r["address"] not in {r0["address"] for r0 in first}]
        assert min(r["epoch"] for r in restarted) > 1, "the retry did not go on from its checkpoint"
        kill_node(ports.pop(next(iter(ports))))  # now only the head is left: 2 workers, never 4
        stdout, stderr = driver.communicate(timeout=180)
    finally:
        driver.kill()
    (trial,) = show(tmp_path / "runs" / "span-kill")["trials"]
    assert trial["status"] == "failed", trial
    error = trial_error(tmp_path / "runs" / "span-kill")
    assert "lost node(s)" in error and "can no longer place this trial" in error and "num_gpus=4" in error, error
