"""Warm DDP workers (``trial/gang.py``) on a real ``ray start`` cluster.

The 2-worker trials of a sweep run one after another on the same two worker processes, with
a new process group each, through scheduler stops; a failing rank fails its trial and ends
the group, and the next trial gets a new one; ``ddp_workers: torchtrainer`` still runs each
trial as a Ray Train ``TorchTrainer``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import ROOT, cli_env, driver_script, processes, raysweep, start_sweep, wait_for_iterations, write_spec

from raysweep.runs.files import TRIALS_FILE, read_trials

pytestmark = pytest.mark.ray

LOOP = "tests.support.warm_loop:train"


def sweep(tmp_path: Path, name: str, **doc) -> Path:
    base = {
        "name": name,
        "metric": {"name": "score", "goal": "minimize"},
        "train_loop": LOOP,
        "method": "grid",
        "max_concurrent": 1,
    }
    return write_spec(tmp_path / f"{name}.yaml", **(base | doc))


def run(spec: Path, cluster: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    out = raysweep(
        "run", str(spec), "--address", cluster, "--storage", str(spec.parent / "runs"), "--wandb", "disabled"
    )
    rows = read_trials(spec.parent / "runs" / spec.stem / TRIALS_FILE)
    return out, sorted(rows, key=lambda r: r["trial_id"])


def pids(row: dict, what: str = "pid") -> tuple[int, ...]:
    """The process (or ``what="thread"``: the thread) that ran each rank of the trial, as the loop recorded them."""
    return tuple(int((Path(row["trial_dir"]) / f"{what}.rank{r}").read_text()) for r in range(row["num_workers"]))


def written_pids(row: dict) -> set[int]:
    """The processes of the ranks that wrote their pid: a trial whose rank fails at once may end
    its group before another rank's loop has begun."""
    files = Path(row["trial_dir"]).glob("pid.rank*")
    return {int(f.read_text()) for f in files}


@pytest.mark.parametrize("ddp_workers", ["warm", pytest.param("torchtrainer", marks=pytest.mark.slow)])
def test_a_scheduler_stops_two_worker_trials_and_the_next_trial_gets_their_slots(tmp_path, ray_cluster, ddp_workers):
    """ASHA stops a poor trial at the first rung under both runners; the trial after the stop
    gets its node's two slots. Warm trials all run on the same two processes; a TorchTrainer starts
    a worker group per trial. (On Ray 2.56 a Ray Train run whose trial Tune stopped kept its
    placement group, and the next trial's workers waited for its CPUs forever: the driver frees it,
    driver/trial_ends.py.)"""
    # good trials first: ASHA stops the poor one at the first rung (a TorchTrainer's start-up is the
    # slow part of its trials: one good trial before it is enough)
    xs = [0.3, 0.32, 2.0, 0.31] if ddp_workers == "warm" else [0.3, 2.0, 0.31]
    spec = sweep(
        tmp_path,
        "w1",
        base_config={"epochs": 3},
        parameters={"x": {"values": xs}, "num_gpus": {"value": 2}},
        scheduler={"type": "asha", "grace_period": 1, "max_t": 3, "reduction_factor": 3},
        ddp_workers=ddp_workers,
    )
    out, rows = run(spec, ray_cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    by_x = {r["config"]["x"]: r for r in rows}
    assert by_x[2.0]["status"] == "stopped" and by_x[2.0]["iterations"] == 1
    assert by_x[0.3]["status"] == "done" and by_x[0.3]["iterations"] == 3
    assert by_x[0.31]["status"] in ("done", "stopped")  # the trial after the stops ran, and ended well
    for r in rows:
        assert r["metrics"]["world_size"] == 2 and r["metrics"]["rank"] == pytest.approx(0.5)
    groups = [pids(r) for r in rows]
    assert all(len(set(group)) == 2 for group in groups)
    if ddp_workers == "warm":
        assert len(set(groups)) == 1, groups  # every trial ran on the same two processes
        # and on the same thread of each: thread-local CUDA state (a cuBLAS handle and its workspace,
        # 32 MiB on an H200) then exists once per worker, not once per thread of the actor
        threads = [pids(r, "thread") for r in rows]
        assert len(set(threads)) == 1, threads
    else:
        assert len(set(groups)) == len(xs), groups  # a new worker group per trial


@pytest.mark.parametrize("reuse_actors", [True, False])
def test_tune_reuses_a_trials_process_for_the_next_trial_unless_told_not_to(tmp_path, ray_cluster, reuse_actors):
    """What ``driver.tuner.reuse_actors`` decides (test_driver.py) is what Tune does: 1-worker
    trials under torchtrainer run in the Tune trial's own process, which runs the next trial too."""
    spec = sweep(
        tmp_path,
        "w0",
        ddp_workers="torchtrainer",
        reuse_actors=reuse_actors,
        base_config={"epochs": 1},
        parameters={"x": {"values": [0.1, 0.2, 0.3]}},
    )
    out, rows = run(spec, ray_cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    assert [r["status"] for r in rows] == ["done"] * 3
    processes_used = {pids(r) for r in rows}
    assert len(processes_used) == (1 if reuse_actors else 3), processes_used


@pytest.mark.parametrize("ddp_workers", ["warm", pytest.param("torchtrainer", marks=pytest.mark.slow)])
def test_a_failing_rank_fails_its_trial_at_once_and_the_next_trial_gets_new_workers(tmp_path, ray_cluster, ddp_workers):
    # rank 0 waits for rank 1 in an all-reduce that never comes: the trial must not wait for rank 0
    spec = sweep(
        tmp_path,
        "w2",
        base_config={"epochs": 2},
        ddp_workers=ddp_workers,
        parameters={"fail_rank": {"values": [1, -1]}, "num_gpus": {"value": 2}},
    )
    out, rows = run(spec, ray_cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    failed, ok = sorted(rows, key=lambda r: r["config"]["fail_rank"], reverse=True)
    assert failed["status"] == "failed"
    assert "warm loop: planned failure on rank 1" in failed["error"]
    assert ("on rank 1 of 2" if ddp_workers == "warm" else "Rank 1") in failed["error"]
    assert ok["status"] == "done" and ok["iterations"] == 2
    # the failed group was ended, not reused (rank 1 wrote its pid before it raised)
    assert (Path(failed["trial_dir"]) / "pid.rank1").exists()
    assert not written_pids(failed) & set(pids(ok))


@pytest.mark.parametrize(
    ("warm_imports", "imported"), [(None, "True"), pytest.param("", "False", marks=pytest.mark.slow)]
)
def test_warm_workers_import_torch_dynamo_before_their_first_trial_unless_told_not_to(
    tmp_path, ray_cluster, warm_imports, imported
):
    """By default (the variable unset) each warm worker imports torch._dynamo, which a loop's first
    optimizer imports, while it waits for its first trial; RAYSWEEP_WARM_IMPORTS= imports none."""
    spec = sweep(tmp_path, "wi", base_config={"epochs": 1}, parameters={"num_gpus": {"value": 2}})
    env = cli_env()
    env.pop("RAYSWEEP_WARM_IMPORTS")
    if warm_imports is not None:
        env["RAYSWEEP_WARM_IMPORTS"] = warm_imports
    cmd = [sys.executable, "-m", "raysweep", "run", str(spec), "--address", ray_cluster, "--wandb", "disabled"]
    out = subprocess.run(cmd + ["--storage", str(tmp_path / "runs")], capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr + out.stdout
    (row,) = read_trials(tmp_path / "runs" / "wi" / TRIALS_FILE)
    assert [(Path(row["trial_dir"]) / f"dynamo.rank{r}").read_text() for r in range(2)] == [imported] * 2


def test_trials_of_every_size_borrow_the_same_warm_workers(tmp_path, ray_cluster):
    spec = sweep(
        tmp_path,
        "w4",
        max_concurrent=2,
        base_config={"epochs": 2},
        parameters={"x": {"values": [0.1, 0.2]}, "num_gpus": {"values": [1, 2]}},
    )
    out, rows = run(spec, ray_cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    assert sorted(r["num_workers"] for r in rows) == [1, 1, 2, 2]
    assert all(r["status"] == "done" for r in rows)
    every = {pid for r in rows for pid in pids(r)}
    assert len(every) == 2, every  # the node's two slots: two processes ran all six ranks


@pytest.mark.parametrize(
    ("ddp_workers", "marker"),
    [
        ("warm", "DDPWorker"),
        # Ray Train's workers ending with their trial's process is Ray's owner rule, which
        # test_interrupt.py's killed driver checks the same rule under torchtrainer
        pytest.param("torchtrainer", "RayTrainWorker", marks=pytest.mark.slow),
    ],
)
def test_workers_of_a_trial_process_that_died_are_ended_not_lent_again(tmp_path, ray_cluster, ddp_workers, marker):
    spec = sweep(
        tmp_path,
        "w5",
        max_failures=1,
        base_config={"epochs": 4, "sleep": 1.5},
        ddp_workers=ddp_workers,
        parameters={"x": {"value": 0.3}, "num_gpus": {"value": 2}},
    )
    driver = start_sweep(spec, ray_cluster)
    trials_file = tmp_path / "runs" / "w5" / TRIALS_FILE
    wait_for_iterations(driver, trials_file, 2)  # epochs 1-2 reported, and checkpointed
    borrowed = processes(marker, ray_cluster)
    assert len(borrowed) == 2
    (trial_process,) = processes("ImplicitFunc", ray_cluster)
    trial_process.kill()  # the trial's Tune actor dies with the workers lent to it mid-trial
    ended_while_the_retry_ran = False
    while driver.poll() is None:
        (row,) = read_trials(trials_file)
        alive = [p for p in borrowed if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not alive and row["status"] == "running":
            ended_while_the_retry_ran = True
        time.sleep(0.3)
    out, err = driver.communicate()
    assert driver.returncode == 0, err + out
    (row,) = read_trials(trials_file)
    assert row["status"] == "done" and row["metrics"]["epoch"] == 4
    assert not set(pids(row)) & {p.pid for p in borrowed}  # the retry ran on new workers
    assert ended_while_the_retry_ran  # the stale workers were ended when the retry borrowed, not left waiting


def test_a_rank_whose_device_cannot_be_set_fails_its_trial_instead_of_hanging(ray_cluster):
    """Guarantee: "A rank whose device cannot be set fails its trial with a sentence instead of
    leaving it waiting: on a machine with GPUs, one that cannot use the GPU Ray gave it says so,
    naming the GPU and `CUDA_VISIBLE_DEVICES`, before its loop starts; a warm worker serves one GPU
    for its life. A warm worker that died while idle is never lent."

    A rank whose device set-up raises (here: a worker that served GPU 0 lent for GPU 1, which
    the pool never does: one CUDA context per worker) fails its trial with the sentence and breaks
    the lease; the trial never waits for a report.
    """
    out = driver_script(
        ray_cluster,
        """
import threading
from raysweep.trial import gang, warm_rank
from raysweep.placement import RankPlace
from raysweep.trial.warm_rank import RankCall
from raysweep.trial.cpu_threads import ThreadCount
from raysweep.trial.lease import Lease
from raysweep.trial.start_bound import StartBound
lease = Lease(0, [warm_rank.DDPWorker.options(num_cpus=0).remote()], None)
def place(gpu):
    return RankPlace("n", "127.0.0.1", 0, 0, 1, gpu, (gpu,))
outcome = []
def trial(gpu):
    try:
        call = RankCall(  # slice(args, link, master): a no-op loop
            fn=slice, args=None, group_backend=None, checkpoint=None, places=[place(gpu)], use_gpu=True, threads=None
        )
        gang.run(lease, call, lambda metrics, ckpt: None, StartBound(600))
    except BaseException as e:
        outcome.append(e)
for gpu in ("0", "1"):  # the first pins the worker to GPU 0 (the loop ends at once)
    thread = threading.Thread(target=trial, args=(gpu,), daemon=True)
    thread.start()
    thread.join(120)
    print("AFTER", gpu, len(outcome), lease.broken)
print("OUTCOME", repr(outcome[0])[:600] if outcome else "")
""",
    )
    assert "AFTER 0 0 False" in out.stdout and "AFTER 1 1 True" in out.stdout, out.stdout + out.stderr
    assert "serves GPU '0' and cannot take GPU '1'" in out.stdout, out.stdout


def test_an_idle_worker_that_died_is_not_lent(ray_cluster):
    out = driver_script(
        ray_cluster,
        """
from raysweep.trial.pool import WorkerPool
node = ray.get_runtime_context().get_node_id()
pool = WorkerPool.remote()
ray.get(pool.start.remote(node, 2))
lease, workers, _ = ray.get(pool.lend.remote([(node, None)] * 2, None))
ray.get([w.ping.remote() for w in workers], timeout=120)
ray.get(pool.give_back.remote(lease, False, workers))
ray.kill(workers[0])  # dies while idle in the pool
time.sleep(1)
_, again, _ = ray.get(pool.lend.remote([(node, None)] * 2, None))
print("PINGS", ray.get([w.ping.remote() for w in again], timeout=120))
""",
    )
    assert "PINGS [True, True]" in out.stdout, out.stdout + out.stderr


def test_rank_0s_worker_holds_the_groups_port_from_naming_it(ray_cluster):
    """A port looked up free and bound later can be taken in between: a trial failed so (EADDRINUSE)
    under the suite's load. Rank 0's worker binds the group's store as it names the port (no one
    else can take it), and its trial's ranks meet on that store."""
    out = driver_script(
        ray_cluster,
        """
import socket
from raysweep.trial import gang, warm_rank
from raysweep.placement import RankPlace
from raysweep.trial.warm_rank import RankCall
from raysweep.trial.cpu_threads import ThreadCount
from raysweep.trial.lease import Lease
from raysweep.trial.start_bound import StartBound
workers = [warm_rank.DDPWorker.options(num_cpus=0).remote() for _ in range(2)]
_, port = ray.get(workers[0].node.remote(60))
with socket.socket() as s:
    try:
        s.bind(("", port))
        print("HELD False")
    except OSError:
        print("HELD True")
def loop(args, link, master):
    import torch.distributed as dist
    link.report({"world": dist.get_world_size()}, None)
places = [RankPlace("n", "127.0.0.1", 0, r, 2) for r in range(2)]
call = RankCall(fn=loop, args=None, group_backend="gloo", checkpoint=None, places=places, use_gpu=False, threads=ThreadCount(1, 0))
reports = []
gang.run(Lease(0, workers, None), call, lambda metrics, ckpt: reports.append(metrics), StartBound(600))
print("REPORTS", reports)
""",
    )
    assert "HELD True" in out.stdout, out.stdout + out.stderr
    assert "REPORTS [{'world': 2.0}]" in out.stdout or "REPORTS [{'world': 2}]" in out.stdout, out.stdout + out.stderr


def test_a_lone_trial_gives_back_the_nodes_cores_at_its_next_step_when_a_trial_starts_beside_it(tmp_path, ray_cluster):
    """A CPU trial alone on its node computes with the node's cores (``cpu_threads.py``). The moment
    the pool lends workers to a second trial there, the first drops to its own share at its next
    optimizer step, not at its next report, an epoch away: with 2 threads beside a busy rank on 2
    cores, the first trial of the 16-trial sweep ran at 1/8 of its speed for its whole first epoch
    (docs/benchmarks.md, 2026-12-05). When the second trial gives its workers back, the first grows
    again, at its next report."""
    out = driver_script(
        ray_cluster,
        f"""
import threading
from pathlib import Path
from raysweep.placement import RankPlace
from raysweep.trial import gang
from raysweep.trial.cpu_threads import ThreadShare
from raysweep.trial.lease import borrow, give_back
from raysweep.trial.pool import end_pool, start_pool
from raysweep.trial.start_bound import StartBound
from raysweep.trial.warm_rank import RankCall
here = Path({str(tmp_path)!r})

def lone(args, link, master):  # steps until its threads drop (30 s at most), then reports
    import torch
    model = torch.nn.Linear(8, 8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    seen = []
    (here / "stepping").touch()
    deadline = time.time() + 30
    while time.time() < deadline and (not seen or seen[-1] > 1):
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()
        seen.append(torch.get_num_threads())
        time.sleep(0.01)
    link.report({{"first_step": seen[0], "last_step": seen[-1]}}, None)
    while not (here / "given_back").exists():
        time.sleep(0.05)
    link.report({{"before_report": torch.get_num_threads()}}, None)
    link.report({{"after_report": torch.get_num_threads()}}, None)

node = ray.get_runtime_context().get_node_id()
pool = start_pool({{node: (2, 2)}}, ())
place = [RankPlace(node, "127.0.0.1", 0, 0, 1)]
first = borrow(pool, place, None, ThreadShare(1, 2))
print("FIRST STARTS WITH", first.threads.count)
call = RankCall(fn=lone, args=None, group_backend=None, checkpoint=None, places=place, use_gpu=False, threads=first.threads)
reports = []
running = threading.Thread(target=gang.run, args=(first, call, lambda metrics, ckpt: reports.append(metrics), StartBound(600)))
running.start()
for _ in range(600):
    if (here / "stepping").exists():
        break
    time.sleep(0.1)
second = borrow(pool, place, None, ThreadShare(1, 2))
print("SECOND STARTS WITH", second.threads.count)
for _ in range(600):
    if reports:
        break
    time.sleep(0.1)
give_back(pool, second)
(here / "given_back").touch()
running.join(120)
print("REPORTS", [{{k: int(v) for k, v in r.items()}} for r in reports])
end_pool(pool)
""",
    )
    assert "FIRST STARTS WITH 2" in out.stdout, out.stdout + out.stderr  # alone on 2 CPUs
    assert "SECOND STARTS WITH 1" in out.stdout, out.stdout + out.stderr
    # the first trial's steps dropped to 1 thread before its report; it grew back at the report after
    assert "REPORTS [{'first_step': 2, 'last_step': 1}, {'before_report': 1}, {'after_report': 2}]" in out.stdout, (
        out.stdout + out.stderr
    )


def test_a_trials_removed_slots_are_nudged_from_the_sweeps_actor_after_its_process_ends(ray_cluster):
    """Ray grants a waiting placement group at its next 1-second tick unless something runs its
    scheduler sooner: a trial that removes its slots' group nudges it (``slots.release``, 20 tiny
    groups in 0.5 s). The nudges come from the sweep's holdings actor: Tune ends a trial's actor at
    once when no trial is left to reuse it, and the sweep's last trial then waited 0.4-0.8 s for
    its slots (docs/benchmarks.md, 2026-12-05). Here the trial's process ends the moment it has
    removed its group, and every nudge is still made: the trial waits until the holdings actor has
    taken them on (a call only sent died with the process: 0 nudges of 20 every time, and 1 trial
    in 15 lost them on 2 loaded cores when the test killed the actor from outside)."""
    out = driver_script(
        ray_cluster,
        """
import os
from ray.util.placement_group import placement_group
from raysweep.trial import slots
from raysweep.trial.holdings import start_holdings

def nudges():
    return sum(1 for g in ray.util.placement_group_table().values() if g["name"] == "raysweep-nudge")

@ray.remote(num_cpus=0)
class Trial:
    def end(self, holdings):
        group = placement_group([{"CPU": 1}])
        ray.get(group.ready())
        slots.release(group, True, holdings)
        os._exit(0)  # at once, as Tune ends an actor it has no trial for

holdings = start_holdings()
ray.get(holdings.nodes.remote())
before = nudges()
trial = Trial.remote()
try:
    ray.get(trial.end.remote(holdings))
except ray.exceptions.RayActorError:
    pass  # it ended itself
for _ in range(100):  # the nudges take 0.5 s
    if nudges() - before >= slots.NUDGES:
        break
    time.sleep(0.1)
time.sleep(1)
print("NUDGES", nudges() - before)
""",
    )
    assert "NUDGES 20" in out.stdout, out.stdout + out.stderr


HOG = """
@ray.remote(num_cpus=2)
class Hog:  # another job's actor, holding both CPUs of the node outside the sweep's slots
    def ready(self):
        return True
hog = Hog.options(name="hog", namespace="tests", lifetime="detached").remote()
ray.get(hog.ready.remote(), timeout=120)
"""
NO_HOG = "ray.kill(ray.get_actor('hog', namespace='tests'))\n"
# Until the node's CPUs and slots are all free again (60 s at most); says what holds them if not.
FREE = """
from ray.util import placement_group_table
from ray.util.state import list_actors
for _ in range(120):
    free, total = ray.available_resources(), ray.cluster_resources()
    if all(free.get(k) == total[k] for k in ("CPU", "raysweep_slot")):
        break
    time.sleep(0.5)
else:
    groups = [(v["state"], v["bundles"]) for v in placement_group_table().values() if v["state"] != "REMOVED"]
    try:
        alive = [(a.class_name, a.ray_namespace) for a in list_actors() if a.state == "ALIVE"]
    except Exception as e:  # a cluster whose dashboard is not at Ray's default address
        alive = f"not listed ({type(e).__name__})"
    raise SystemExit(f"the cluster is held: {ray.available_resources()}; placement groups {groups}; actors {alive}")
"""


@pytest.mark.slow  # make test: a trial queued past the bound fails in it, below
def test_a_warm_worker_that_does_not_answer_fails_its_trial_within_the_bound(tmp_path, ray_cluster):
    """A lent warm worker that never answers (here: stopped, as a process hung in its start would
    be) fails the trial with the sentence instead of leaving it waiting. The 1-worker trial that
    runs first, alone on the node, gets the node's cores (``cpu_threads.threads_on_node``)."""
    spec = sweep(
        tmp_path,
        "w7",
        base_config={"epochs": 3, "sleep": 1.0},
        worker_start_timeout_s=15,  # a worker starting on a loaded machine takes 6 s and more
        parameters={"x": {"value": 0.3}, "num_gpus": {"values": [1, 2]}},
    )
    free = driver_script(ray_cluster, FREE)  # what an earlier test left would keep the first trial waiting
    assert free.returncode == 0, free.stderr[-2000:]
    driver = start_sweep(spec, ray_cluster)
    trials_file = tmp_path / "runs" / "w7" / TRIALS_FILE
    wait_for_iterations(driver, trials_file, 1)  # the 1-worker trial runs on one of the node's two workers
    (first,) = [r for r in read_trials(trials_file) if r.get("iterations")]
    # alone on the node, the 1-worker trial's rank uses both its cores, as a lone torchrun would
    assert (Path(first["trial_dir"]) / "threads.rank0").read_text() == "2"
    idle = [p for p in processes("DDPWorker", ray_cluster) if p.pid not in pids(first)]
    assert len(idle) == 1
    idle[0].suspend()
    try:
        out, err = driver.communicate(timeout=150)
    finally:
        if idle[0].is_running():
            idle[0].resume()
    rows = sorted(read_trials(trials_file), key=lambda r: r["num_workers"])
    assert [r["status"] for r in rows] == ["done", "failed"], err + out
    assert "the trial's workers did not all start within 15 s of it holding its resources" in rows[1]["error"]
    assert re.search(
        r"rank\(s\) 1 of 2: the warm worker\(s\) lent to them on ([\d.]+) did not answer \(.*\); the trial holds its "
        r"placement group \w{8} \(1 bundle\(s\) of CPU=2, raysweep_slot=2\) is CREATED on node\(s\) \1$",
        rows[1]["error"],
    ), rows[1]["error"]


@pytest.mark.parametrize("ddp_workers", ["warm", "torchtrainer"])
def test_a_trial_whose_cpus_another_job_holds_is_queued_on_warm_workers_and_fails_in_the_bound_on_torchtrainer(
    tmp_path, ray_cluster, ddp_workers
):
    """Guarantee: "A trial whose workers have not all started within
    `raysweep.worker_start_timeout_s` (default 300 s) of it holding its resources fails with a
    sentence naming what it waited for: the workers, their node(s), the placement group's state,
    the resources the cluster has free. `max_failures` applies as to any failure. A trial waiting
    its turn for a busy cluster is queued, not failed: the clock starts when its placement group is
    granted."

    And Guarantee: "No placement group outlives its trial, whichever runner made it and whether or not its
    workers started: the sweep removes the groups its own job's actors made once those actors have died
    (Ray keeps such a group until the job ends too, and one still pending for good: Ray 2.60, #62753),
    and never another job's."
    Ray Train leaves the failed trial's worker group placement group behind (Ray
    #62753): it would be granted once the hog ends, and hold the CPUs until the cluster restarts.
    The trial claims it, and the driver removes it: once the hog ends, the node's CPUs are all free.

    A warm trial's placement group holds its workers' CPUs: it waits, queued, past the bound, and
    runs when they free. A TorchTrainer trial holds its slots, then Ray Train asks for the CPUs: it
    fails within the bound with the sentence (Ray Train alone retries its worker group without end)."""
    spec = sweep(
        tmp_path,
        "w6",
        base_config={"epochs": 1},
        ddp_workers=ddp_workers,
        worker_start_timeout_s=15,  # a worker starting on a loaded machine takes 6 s and more
        parameters={"x": {"value": 0.3}, "num_gpus": {"value": 2}},
    )
    assert driver_script(ray_cluster, HOG).returncode == 0
    try:
        driver = start_sweep(spec, ray_cluster)
        if ddp_workers == "warm":
            time.sleep(18)  # past the bound, queued
            assert driver.poll() is None
            trials = tmp_path / "runs" / "w6" / TRIALS_FILE
            assert {r["status"] for r in read_trials(trials)} <= {"pending"} if trials.exists() else True  # not started
            driver_script(ray_cluster, NO_HOG)
        out, err = driver.communicate(timeout=150)
    finally:
        driver_script(ray_cluster, "try:\n    " + NO_HOG + "except ValueError:\n    pass\n")
    (row,) = read_trials(tmp_path / "runs" / "w6" / TRIALS_FILE)
    if ddp_workers == "warm":
        assert driver.returncode == 0 and row["status"] == "done", err + out
        return
    assert driver.returncode == 1 and row["status"] == "failed", err + out
    assert "the trial's workers did not all start within 15 s of it holding its resources" in row["error"]
    assert re.search(
        r"0 of 2 Ray Train worker\(s\) started. Ray Train asked for 2 x CPU=1 on node\(s\) ([\d.]+) \(0 of 2 CPU free\); "
        r"the trial holds its placement group \w{8} \(1 bundle\(s\) of raysweep_slot=2\) is CREATED on node\(s\) \1$",
        row["error"],
    ), row["error"]
    freed = driver_script(ray_cluster, FREE, timeout=120)  # the hog ended (finally, above)
    assert freed.returncode == 0, freed.stdout + freed.stderr


def test_a_torchtrainer_run_whose_group_ray_trains_cleaner_removed_goes_on_from_its_checkpoint(tmp_path, ray_cluster):
    """Ray Train's placement-group cleaner can take its live controller for dead and remove the
    run's worker group (seen in the matrix, after a resume on a loaded node). Removed here from
    another driver once epoch 4 is reported (epochs of 4 s), the loop checkpointing every 3: the
    trial starts its run again once, from epoch 3's checkpoint, and ends done without failing
    (without the retry it fails naming the group); the epochs after 3 that the new run makes again
    reach Tune once (planted: with every report handed on, result.json reads 1, 2, 3, 4, 4, 5, 6)."""
    spec = sweep(
        tmp_path,
        "gone",
        base_config={"epochs": 6, "sleep": 4.0, "checkpoint_every": 3},
        ddp_workers="torchtrainer",
        parameters={"x": {"value": 0.3}, "num_gpus": {"value": 2}},
    )
    driver = start_sweep(spec, ray_cluster)
    trials_file = tmp_path / "runs" / "gone" / TRIALS_FILE
    wait_for_iterations(driver, trials_file, 4)
    removed = driver_script(
        ray_cluster,
        """
from ray.util.placement_group import PlacementGroup, remove_placement_group

table = ray.util.placement_group_table()
ours = [k for k, g in table.items() if g["state"] == "CREATED" and all(set(b) == {"CPU"} for b in g["bundles"].values())]
for key in ours:  # Ray Train's worker group: CPU bundles only (the trial's own group holds raysweep_slot)
    remove_placement_group(PlacementGroup(ray.PlacementGroupID.from_hex(key)))
print(len(ours))
""",
    )
    assert removed.stdout.strip() == "1", removed.stdout + removed.stderr
    out, err = driver.communicate(timeout=300)
    assert driver.returncode == 0, err + out
    (row,) = read_trials(trials_file)
    assert row["status"] == "done" and row["metrics"]["epoch"] == 6, row
    assert "removed its live worker group; starting the run again from its last checkpoint (its " in err + out
    lines = (Path(row["trial_dir"]) / "result.json").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [1, 2, 3, 4, 5, 6]
