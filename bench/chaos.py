"""``python -m bench.chaos``: a sweep through faults on a two-node cluster, and what it left behind.

A random sweep of 1-, 2- and 4-worker trials (the 4-worker ones span both nodes), each reporting
with a checkpoint every epoch, on two Ray nodes of this machine (127.0.0.2 and 127.0.0.3, 2 worker
slots each, as tests/trial/test_multinode.py runs them). While it runs:

1. the worker node is killed (its raylet and everything under it), then started again;
2. later the driver is killed (SIGKILL), and ``raysweep resume`` follows;
3. a Ctrl-C is sent to that driver, and ``resume`` follows again, to the sweep's end.

Then: every trial is done, or failed with a sentence; no trial ran from scratch again once it had
a checkpoint the driver knew of; no process of the sweep is left; no placement group is left;
``show`` agrees with trials.jsonl. Counted: faults injected, trials restarted, reports repeated
(an epoch a trial trained again after a fault). tests/trial/test_chaos.py (marked slow) asserts
the checks; this writes the figures to bench/results/chaos.json.

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.chaos [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import yaml

from bench.admission import env, free_port, stop
from bench.common import REPO, write_result

RAY = str(Path(sys.executable).with_name("ray"))
HEAD, WORKER = "127.0.0.2", "127.0.0.3"
# The head finds a killed node dead after 3 missed health checks 1 s apart (Ray's default: 5, 3 s apart).
NODE_DEATH = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3"}
# A process of the sweep, by the title Ray gives it or its command line.
SWEEP_PROCESSES = (
    "-m raysweep",
    "DDPWorker",
    "ImplicitFunc",
    "RayTrainWorker",
    "TrainController",
    "WorkerPool",
    "TrainGroups",
)
# A restart from epoch 1 after the trial had recorded this epoch lost a checkpoint the driver knew:
# the driver saves its state at least every two checkpoints of a trial (CheckpointConfig(num_to_keep=2)).
KNOWN_CHECKPOINT_EPOCH = 4


class Cluster:
    """The head and one worker node that can be killed and started again."""

    def __init__(self) -> None:
        self.port = free_port()
        self.address = f"{HEAD}:{self.port}"
        self.worker_raylet: int | None = None

    def start(self) -> None:
        subprocess.run([RAY, "get-auth-token", "--generate"], check=True, capture_output=True, env=env())
        head = [RAY, "start", "--head", f"--node-ip-address={HEAD}", f"--port={self.port}", "--include-dashboard=false"]
        self._ray_start(head)
        self.start_worker()

    def start_worker(self) -> None:
        self.worker_raylet = free_port()
        ports = [f"--node-manager-port={self.worker_raylet}", f"--object-manager-port={free_port()}"]
        ports += [f"--{flag}={free_port()}" for flag in ("dashboard-agent-listen-port", "dashboard-agent-grpc-port")]
        ports += [f"--{flag}={free_port()}" for flag in ("runtime-env-agent-port", "metrics-export-port")]
        worker = [RAY, "start", f"--address={self.address}", f"--node-ip-address={WORKER}", *ports]
        self._ray_start(worker + ["--min-worker-port=23000", "--max-worker-port=23999"])

    def _ray_start(self, args: list[str]) -> None:
        common = ["--num-cpus=2", "--disable-usage-stats", "--resources", json.dumps({"raysweep_slot": 2})]
        out = subprocess.run(args + common, capture_output=True, text=True, env=env() | NODE_DEATH, cwd=REPO)
        if out.returncode != 0:
            raise RuntimeError(out.stdout + out.stderr)

    def kill_worker(self) -> None:
        """SIGKILL the worker node's raylet and everything under it."""
        raylet = next(
            p
            for p in psutil.process_iter(["name", "cmdline"])
            if p.info["name"] == "raylet" and f"--node_manager_port={self.worker_raylet}" in (p.info["cmdline"] or [])
        )
        tree = [*raylet.children(recursive=True), raylet]
        for p in tree:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(tree, timeout=30)

    def processes(self) -> list[psutil.Process]:
        """The live processes of the sweep on this cluster (not its Ray daemons)."""
        found = []
        for p in psutil.process_iter(["cmdline", "status"]):
            cmdline = " ".join(p.info["cmdline"] or [])
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            ours = re.search(rf"[:=]{self.port}\b", cmdline) or "raysweep_chaos" in cmdline
            if ours and any(marker in cmdline for marker in SWEEP_PROCESSES):
                found.append(p)
        return found

    def placement_groups(self) -> list[Any]:
        """The bundles of every placement group not removed."""
        code = (
            f"import ray, json\nray.init(address={self.address!r}, logging_level='ERROR')\n"
            "print(json.dumps([g['bundles'] for g in ray.util.placement_group_table().values() "
            "if g['state'] != 'REMOVED']))\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env(), timeout=120)
        return json.loads(out.stdout.strip().splitlines()[-1])


def records(record_dir: Path) -> list[dict[str, Any]]:
    """Every rank's line of every epoch it started (tests/support/span_loop.py), in file order."""
    return [json.loads(line) for path in sorted(record_dir.glob("*.jsonl")) for line in path.read_text().splitlines()]


def restarts(seen: list[dict[str, Any]]) -> dict[str, Any]:
    """From rank 0's records: per trial, each start of its ranks (a record in another process than
    the one before it, or at an epoch no later), and the epochs it trained again."""
    by_trial: dict[float, list[tuple[int, int]]] = {}
    for r in seen:
        if r["rank"] == 0:
            by_trial.setdefault(r["x"], []).append((r["epoch"], r["pid"]))
    restarted = repeated = from_scratch = lost_checkpoint = 0
    for lines in by_trial.values():
        epochs = [epoch for epoch, _ in lines]
        starts = [i for i in range(1, len(lines)) if epochs[i] <= epochs[i - 1] or lines[i][1] != lines[i - 1][1]]
        restarted += bool(starts)
        repeated += len(epochs) - len(set(epochs))
        for i in starts:
            if epochs[i] == 1:
                from_scratch += 1
                lost_checkpoint += max(epochs[:i]) >= KNOWN_CHECKPOINT_EPOCH
    return {
        "trials_restarted": restarted,
        "reports_repeated": repeated,
        "restarts_from_scratch": from_scratch,  # before the trial had a checkpoint the driver knew of
        "restarts_that_lost_a_checkpoint": lost_checkpoint,
    }


def wait_until(done: Callable[[], bool], driver: subprocess.Popen | None, what: str, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while not done():
        if driver is not None and driver.poll() is not None:
            raise RuntimeError(f"the driver ended while waiting for {what}: {driver.communicate()}")
        if time.time() > deadline:
            raise RuntimeError(f"waited {timeout:g} s in vain for {what}")
        time.sleep(0.3)


def sweep_doc(record_dir: Path, trials: int, epochs: int) -> dict[str, Any]:
    return {
        "name": "raysweep_chaos",
        "method": "random",
        "run_cap": trials,
        "metric": {"name": "score", "goal": "minimize"},
        "parameters": {
            "x": {"min": 0.0, "max": 1.0},
            "num_gpus": {"values": [1, 2, 4]},
            "record_dir": {"value": str(record_dir)},
        },
        "raysweep": {
            "train_loop": "tests.support.span_loop:train",
            "base_config": {"epochs": epochs, "sleep": 1.0},
            "max_failures": 3,
            "max_concurrent": 2,
            "seed": 7,
            "resources": {"network_interface": "lo"},
        },
    }


def raysweep(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "raysweep", *args],
        cwd=REPO,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def scenario(work: Path, trials: int = 10, epochs: int = 6) -> dict[str, Any]:
    """Run the sweep through its faults on a cluster of its own; the figures and the checks."""
    record_dir = work / "records"
    record_dir.mkdir(parents=True)
    spec = work / "chaos.yaml"
    spec.write_text(yaml.safe_dump(sweep_doc(record_dir, trials, epochs), sort_keys=False))
    run_dir = work / "runs" / "raysweep_chaos"
    cluster = Cluster()
    started = time.time()
    faults: list[str] = []
    try:
        cluster.start()
        driver = raysweep("run", str(spec), "--address", cluster.address, "--storage", str(work / "runs"))
        wait_until(
            lambda: any(r["address"] == WORKER and r["epoch"] >= 2 for r in records(record_dir)),
            driver,
            "a trial at epoch 2 on the worker node",
        )
        cluster.kill_worker()
        faults.append("worker node killed")
        seen = len(records(record_dir))
        wait_until(lambda: len(records(record_dir)) >= seen + 4, driver, "the sweep going on without the node")
        cluster.start_worker()
        faults.append("worker node started again")
        seen = len(records(record_dir))
        wait_until(lambda: len(records(record_dir)) >= seen + 6, driver, "the sweep going on with the node back")
        ranks = cluster.processes()
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        faults.append("driver killed (SIGKILL)")
        _, alive = psutil.wait_procs(ranks, timeout=60)
        ranks_left_after_kill = len([p for p in alive if p.status() != psutil.STATUS_ZOMBIE])

        driver = raysweep("resume", str(run_dir), "--address", cluster.address)
        seen = len(records(record_dir))
        wait_until(lambda: len(records(record_dir)) >= seen + 4, driver, "the resumed sweep's first epochs")
        driver.send_signal(signal.SIGINT)
        out, err = driver.communicate(timeout=180)
        faults.append(f"Ctrl-C (exit {driver.returncode})")
        interrupted_exit = driver.returncode

        driver = raysweep("resume", str(run_dir), "--address", cluster.address)
        out, err = driver.communicate(timeout=900)
        final_exit = driver.returncode
        wait_until(lambda: not cluster.processes(), None, "the sweep's processes to end", timeout=60)
        processes_left = [" ".join(p.cmdline())[:120] for p in cluster.processes()]
        groups_left = cluster.placement_groups()
    finally:
        stop(cluster.port)
    rows = [json.loads(line) for line in (run_dir / "trials.jsonl").read_text().splitlines()]
    last = {r["trial_id"]: r for r in rows}
    shown = subprocess.run(
        [sys.executable, "-m", "raysweep", "show", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env(),
    )
    shown_trials = json.loads(shown.stdout)["trials"]
    statuses = {}
    for r in last.values():
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    return {
        "trials": trials,
        "epochs": epochs,
        "wall_s": round(time.time() - started, 1),
        "faults": faults,
        "faults_injected": len([f for f in faults if "started again" not in f]),
        **restarts(records(record_dir)),
        "statuses": statuses,
        "failed_without_a_sentence": [k for k, r in last.items() if r["status"] == "failed" and not r.get("error")],
        "unfinished": [k for k, r in last.items() if r["status"] not in ("done", "failed")],
        "sizes": sorted(r["num_workers"] for r in last.values()),
        "interrupted_exit": interrupted_exit,
        "final_exit": final_exit,
        "final_output_tail": (out + err)[-1500:],
        "ranks_left_after_driver_kill": ranks_left_after_kill,
        "processes_left": processes_left,
        "placement_groups_left": groups_left,
        "show_agrees": {t["trial_id"]: (t["status"], t.get("iterations") or 0) for t in shown_trials}
        == {k: (r["status"], r.get("iterations") or 0) for k, r in last.items()},
    }


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="6 trials of 5 epochs")
    args = p.parse_args()
    trials, epochs = (6, 5) if args.quick else (10, 6)
    result = scenario(Path(tempfile.mkdtemp(prefix="raysweep_bench_chaos_")), trials, epochs)
    print(json.dumps(result, indent=2))
    write_result("chaos", result, args.quick)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
