"""``python -m bench.admission``: trials larger than one node, on a fake two-node cluster.

Two Ray nodes on this machine at their own loopback addresses (127.0.0.2, 127.0.0.3), 2 worker
slots each, as tests/trial/test_multinode.py runs them.

1. start-up: a 4-worker trial on two nodes against a 2-worker trial on one (time from the
   trial's start to its first report, and its wall time; warm workers and ``torchtrainer``).
2. starvation: a random sweep of 1-worker trials with a 2-node trial among every four (both
   about 2 s). A 2-node trial needs both nodes empty at once; while small trials keep taking the
   slots it waits. Per 2-node trial: how long trials made after it ran before it did
   (``passed_over_s``) against one small trial's length, with Tune's default (many trials
   pending at once) and with raysweep's rule for sweeps whose trials span nodes (one trial
   pending at a time, as grid and bayes sweeps run anyway).

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.admission [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import yaml

from bench.common import REPO, write_result

RAY = str(Path(sys.executable).with_name("ray"))
NODES = ("127.0.0.2", "127.0.0.3")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env() -> dict[str, str]:
    return os.environ | {"PYTHONPATH": str(REPO), "RAY_AUTH_MODE": "token", "WANDB_SILENT": "true"}


@contextlib.contextmanager
def two_nodes() -> Iterator[str]:
    """A head and a worker node, 2 CPUs and 2 slots each; yields the head's address."""
    port = free_port()
    address = f"{NODES[0]}:{port}"
    subprocess.run([RAY, "get-auth-token", "--generate"], check=True, capture_output=True, env=env())
    common = ["--num-cpus=2", "--disable-usage-stats", "--resources", json.dumps({"raysweep_slot": 2})]
    try:
        subprocess.run(
            [RAY, "start", "--head", f"--node-ip-address={NODES[0]}", f"--port={port}", "--include-dashboard=false"]
            + common,
            check=True,
            capture_output=True,
            env=env(),
        )
        ports = [f"--{flag}={free_port()}" for flag in ("node-manager-port", "object-manager-port")]
        ports += [f"--{flag}={free_port()}" for flag in ("dashboard-agent-listen-port", "dashboard-agent-grpc-port")]
        ports += [f"--{flag}={free_port()}" for flag in ("runtime-env-agent-port", "metrics-export-port")]
        subprocess.run(
            [RAY, "start", f"--address={address}", f"--node-ip-address={NODES[1]}", *ports]
            + ["--min-worker-port=23000", "--max-worker-port=23999", *common],
            check=True,
            capture_output=True,
            env=env(),
        )
        yield address
    finally:
        stop(port)


def stop(port: int) -> None:
    """End this cluster's processes only (``ray stop`` would end every Ray on the machine)."""
    victims = []
    for p in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(p.info["cmdline"] or [])
        if p.pid != os.getpid() and re.search(rf"[:=]{port}\b", cmdline) and "ray" in cmdline:
            with contextlib.suppress(psutil.NoSuchProcess):
                victims += [p, *p.children(recursive=True)]
    for p in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(victims, timeout=10)


def run(address: str, doc: dict[str, Any], extra_env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Run the sweep ``doc`` on the cluster; its trials.jsonl rows, in the order Tune made them."""
    work = Path(tempfile.mkdtemp(prefix="raysweep_bench_admission_"))
    spec = work / "spec.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    cmd = [sys.executable, "-m", "raysweep", "run", str(spec), "--address", address, "--storage", str(work)]
    out = subprocess.run(
        cmd + ["--wandb", "disabled", "--quiet"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env() | (extra_env or {}),
    )
    if out.returncode != 0:
        raise RuntimeError(out.stdout[-2000:] + out.stderr[-2000:])
    rows = [json.loads(line) for line in (work / doc["name"] / "trials.jsonl").read_text().splitlines()]
    last = {r["trial_id"]: r for r in rows}
    return sorted(last.values(), key=lambda r: r["trial_id"])


def startup(address: str, runner: str, size: int) -> dict[str, float]:
    """One trial of ``size`` workers: its wall time and its first report's time from its start."""
    doc = {
        "name": f"startup-{runner}-{size}",
        "method": "grid",
        "metric": {"name": "score", "goal": "minimize"},
        "parameters": {"x": {"values": [0.1]}, "num_gpus": {"value": size}},
        "raysweep": {
            "train_loop": "train_loops.smoke:train",
            "ddp_workers": runner,
            "resources": {"network_interface": "lo"},
            "base_config": {"epochs": 2, "sleep": 0.5},
        },
    }
    (row,) = run(address, doc)
    first = json.loads((Path(row["trial_dir"]) / "result.json").read_text().splitlines()[0])
    return {"wall_s": row["wall_s"], "first_report_s": round(first["time_total_s"], 2)}


def starvation(address: str, trials: int, tune_default: bool) -> dict[str, Any]:
    doc = {
        "name": f"starve-{'tune' if tune_default else 'raysweep'}",
        "method": "random",
        "run_cap": trials,
        "metric": {"name": "score", "goal": "minimize"},
        "parameters": {"x": {"min": 0.0, "max": 1.0}, "num_gpus": {"values": [1, 4], "probabilities": [0.75, 0.25]}},
        "raysweep": {
            "train_loop": "train_loops.smoke:train",
            "resources": {"network_interface": "lo"},
            "base_config": {"epochs": 2, "sleep": 1.0},
            "seed": 3,
        },
    }
    rows = run(address, doc, {"TUNE_MAX_PENDING_TRIALS_PG": "auto"} if tune_default else None)
    small = statistics.median(r["wall_s"] for r in rows if r["num_workers"] == 1)
    big = []
    for i, r in enumerate(rows):
        if r["num_workers"] == 1:
            continue
        before = [t["start"] for t in rows[i + 1 :] if t["start"] < r["start"]]  # made after it, ran first
        big.append(
            {
                "index": i,
                "overtaken_by": len(before),
                "passed_over_s": round(r["start"] - min(before), 1) if before else 0.0,
            }
        )
    starts, ends = [r["start"] for r in rows], [r["end"] for r in rows]
    busy = sum(r["wall_s"] * r["num_workers"] for r in rows)
    wall = max(ends) - min(starts)
    return {
        "trials": len(rows),
        "big_trials": big,
        "small_trial_s": round(small, 2),
        "longest_passed_over_s": max((b["passed_over_s"] for b in big), default=0.0),
        "wall_s": round(wall, 1),
        "slot_busy_fraction": round(busy / (4 * wall), 3),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    out: dict[str, Any] = {}
    with two_nodes() as address:
        out["startup"] = {
            f"{runner}_{size}w": startup(address, runner, size)
            for runner in ("warm", "torchtrainer")
            for size in (2, 4)
        }
        print(json.dumps(out["startup"]), flush=True)
        trials = 8 if args.quick else 24
        out["starvation"] = {
            "tune_default": starvation(address, trials, tune_default=True),
            "raysweep": starvation(address, trials, tune_default=False),
        }
        print(json.dumps(out["starvation"]), flush=True)
    print(write_result("admission", out, args.quick))


if __name__ == "__main__":
    main()
