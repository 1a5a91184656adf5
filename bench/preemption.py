"""What a preemption costs a sweep: a node that announces its end (drained through Ray's GCS with a
deadline, as a spot reclaim is) and dies at it, every ``--every`` seconds, on a cluster of
loopback nodes where a new node takes its place (a spot fleet keeps its size).

The same sweep (``--trials`` 1-worker trials of ``--epochs`` reports of 1 s, a checkpoint at every
report) runs twice on the same cluster: without preemptions, then with them. Measured: epochs
trained again per preemption (the goal: 0, the notice being longer than a report), the seconds
from a notice to the trial's next epoch on another node, and the sweep's wall time and
worker-hours against the run without.

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.preemption [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import yaml

from bench.admission import env, free_port, stop
from bench.chaos import NODE_DEATH, RAY
from bench.common import REPO, median, write_result

HEAD = "127.0.0.2"
NOTICE_S = 5


def train(config: dict) -> None:
    """Each epoch appended to ``<record_dir>/<x>.jsonl`` with its node and time; a checkpoint each."""
    import ray

    import raysweep

    start = 0
    ckpt = raysweep.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            start = json.loads(Path(d, "state.json").read_text())["epoch"]
    node = ray.get_runtime_context().get_node_id()
    for epoch in range(start + 1, config["epochs"] + 1):
        begun = time.time()
        time.sleep(1.0)
        line = {"x": config["x"], "epoch": epoch, "node": node, "begun": begun, "t": time.time()}
        with open(Path(config["record_dir"]) / f"{config['x']}.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")
        with tempfile.TemporaryDirectory() as d:
            Path(d, "state.json").write_text(json.dumps({"epoch": epoch}))
            raysweep.report({"score": (config["x"] - 0.3) ** 2 + 1 / epoch}, checkpoint=d)


class Fleet:
    """A head that hosts no trial, and worker nodes of 2 slots at 127.0.0.3 on; one can be drained
    and killed, and another started in its place."""

    def __init__(self) -> None:
        self.port = free_port()
        self.address = f"{HEAD}:{self.port}"
        self.workers: dict[str, int] = {}  # ip -> raylet port
        self.next_ip = 3

    def _start(self, args: list[str]) -> None:
        common = ["--num-cpus=2", "--disable-usage-stats"]
        out = subprocess.run(args + common, capture_output=True, text=True, env=env() | NODE_DEATH, cwd=REPO)
        if out.returncode != 0:
            raise RuntimeError(out.stdout + out.stderr)

    def start(self, workers: int) -> None:
        subprocess.run([RAY, "get-auth-token", "--generate"], check=True, capture_output=True, env=env())
        head = [RAY, "start", "--head", f"--node-ip-address={HEAD}", f"--port={self.port}", "--include-dashboard=false"]
        self._start(head)
        for _ in range(workers):
            self.add()

    def add(self) -> None:
        ip = f"127.0.0.{self.next_ip}"
        self.next_ip += 1
        raylet = free_port()
        ports = [f"--node-manager-port={raylet}", f"--object-manager-port={free_port()}"]
        agents = ("dashboard-agent-listen-port", "dashboard-agent-grpc-port", "runtime-env-agent-port")
        ports += [f"--{f}={free_port()}" for f in agents]
        ports += [f"--metrics-export-port={free_port()}", f"--min-worker-port={20000 + 600 * (self.next_ip - 3)}"]
        ports += [f"--max-worker-port={20599 + 600 * (self.next_ip - 3)}"]
        resources = ["--resources", json.dumps({"raysweep_slot": 2})]
        self._start([RAY, "start", f"--address={self.address}", f"--node-ip-address={ip}", *ports, *resources])
        self.workers[ip] = raylet

    def node_ids(self) -> dict[str, str]:
        code = (
            f"import ray, json\nray.init(address={self.address!r}, logging_level='ERROR')\n"
            "print(json.dumps({n['NodeManagerAddress']: n['NodeID'] for n in ray.nodes() if n['Alive']}))\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env(), timeout=120)
        return json.loads(out.stdout.strip().splitlines()[-1])

    def preempt(self, ip: str) -> tuple[float, str]:
        """Drain ``ip`` with a ``NOTICE_S`` deadline, kill it there, start a node in its place; when
        the notice came, and the node's id."""
        node = self.node_ids()[ip]
        cmd = [
            RAY,
            "drain-node",
            f"--address={self.address}",
            f"--node-id={node}",
            f"--deadline-remaining-seconds={NOTICE_S}",
        ]
        cmd += ["--reason=DRAIN_NODE_REASON_PREEMPTION", "--reason-message=spot reclaim"]
        subprocess.run(cmd, check=True, capture_output=True, env=env(), cwd=REPO)
        noticed = time.time()
        time.sleep(NOTICE_S)
        kill_node(self.workers.pop(ip))
        self.add()
        return noticed, node

    def stop(self) -> None:
        stop(self.port)


def kill_node(raylet_port: int) -> None:
    """SIGKILL a node's raylet and everything under it (a node that drained idle has ended already)."""
    for p in psutil.process_iter(["name", "cmdline"]):
        if p.info["name"] == "raylet" and f"--node_manager_port={raylet_port}" in (p.info["cmdline"] or []):
            tree = [*p.children(recursive=True), p]
            for q in tree:
                with contextlib.suppress(psutil.NoSuchProcess):
                    q.kill()
            psutil.wait_procs(tree, timeout=30)


def records(record_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted(record_dir.glob("*.jsonl")) for line in p.read_text().splitlines()]


def sweep(fleet: Fleet, root: Path, name: str, trials: int, epochs: int, every: float | None) -> dict[str, Any]:
    """Run the sweep, preempting the node of a running trial every ``every`` seconds (None: never)."""
    record_dir = root / f"{name}-records"
    record_dir.mkdir(parents=True)
    spec = root / f"{name}.yaml"
    parameters = {"x": {"values": [round(0.1 * i, 1) for i in range(trials)]}}
    base = {"epochs": epochs, "record_dir": str(record_dir)}
    own = {"train_loop": "bench.preemption:train", "base_config": base, "max_failures": 0}
    doc = {"name": name, "method": "grid", "metric": {"name": "score", "goal": "minimize"}, "raysweep": own}
    spec.write_text(yaml.safe_dump(doc | {"parameters": parameters}))
    cmd = [sys.executable, "-m", "raysweep", "run", str(spec), "--address", fleet.address, "--storage", str(root)]
    t0 = time.time()
    driver = subprocess.Popen(cmd + ["--wandb", "disabled", "--quiet"], cwd=REPO, env=env(), stdout=subprocess.DEVNULL)
    notices: list[tuple[float, str]] = []

    def preempting() -> None:
        while driver.poll() is None:
            time.sleep(every)
            running = [r for r in records(record_dir) if r["t"] > time.time() - 1.5]
            ids = {v: k for k, v in fleet.node_ids().items()}
            ips = [ids[r["node"]] for r in running if ids.get(r["node"]) in fleet.workers]
            if ips and driver.poll() is None:
                notices.append(fleet.preempt(ips[0]))

    thread = threading.Thread(target=preempting, daemon=True)
    if every:
        thread.start()
    driver.wait()
    wall = time.time() - t0
    if every:
        thread.join()  # its last preemption's node replaced
    show = [sys.executable, "-m", "raysweep", "show", str(root / name), "--json"]
    shown = json.loads(subprocess.run(show, capture_output=True, text=True, cwd=REPO, env=env()).stdout)
    seen = records(record_dir)
    repeated = sum(len([r for r in seen if r["x"] == x]) - epochs for x in {r["x"] for r in seen})
    back = []
    for noticed, node in notices:  # a trial on the node: its first epoch begun elsewhere after the notice
        cut = {r["x"] for r in seen if r["node"] == node and r["begun"] < noticed < r["t"] + 1.5}
        for x in cut:
            later = [r["begun"] for r in seen if r["x"] == x and r["begun"] > noticed and r["node"] != node]
            if later:
                back.append(min(later) - noticed)
    return {
        "wall_s": wall,
        "worker_hours": shown["cost"]["spent_hours"],
        "done": sum(t["status"] == "done" for t in shown["trials"]),
        "failed": sum(t["status"] == "failed" for t in shown["trials"]),
        "preemptions": len(notices),
        "epochs_trained_again": repeated,
        "notice_to_running_s": median(back),
    }


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.preemption", description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--every", type=float, default=12.0)
    p.add_argument("--quick", action="store_true", help="4 trials of 8 epochs: a check that it runs")
    args = p.parse_args()
    trials, epochs, every = (4, 8, 6.0) if args.quick else (args.trials, args.epochs, args.every)
    fleet = Fleet()
    try:
        fleet.start(workers=3)
        with tempfile.TemporaryDirectory(prefix="bench_preemption_") as d:
            calm = sweep(fleet, Path(d), "calm", trials, epochs, None)
            spot = sweep(fleet, Path(d), "spot", trials, epochs, every)
    finally:
        fleet.stop()
    data = {
        "trials": trials,
        "epochs": epochs,
        "every_s": every,
        "notice_s": NOTICE_S,
        "without": calm,
        "with": spot,
        "wall_ratio": spot["wall_s"] / calm["wall_s"],
        "worker_hours_ratio": spot["worker_hours"] / calm["worker_hours"],
    }
    path = write_result("preemption", data, args.quick)
    print(json.dumps(data, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("RAYSWEEP_WARM_IMPORTS", "")
    sys.exit(main())
