"""``python -m bench.admission``: trials larger than one node, on a fake two-node cluster.

Two Ray nodes on this machine at their own loopback addresses (127.0.0.2, 127.0.0.3), 2 worker
slots each, as tests/trial/test_multinode.py runs them.

1. start-up: a 4-worker trial on two nodes against a 2-worker trial on one (time from the
   trial's start to its first report, and its wall time; warm workers and ``torchtrainer``).
2. starvation: a random sweep of 1-worker trials with a 2-node trial among every four (both
   about 2 s). A 2-node trial needs both nodes empty at once; while small trials keep taking the
   slots it waits. Per 2-node trial: how long trials made after it ran before it did
   (``passed_over_s``) against one small trial's length, and the slots' busy share, under three
   admissions side by side: Tune's default (many trials pending at once), one trial pending at a
   time (raysweep's rule before reservations), and reservations with backfill (today's).
3. the same on one node of 4 GPUs that do not exist, with trials of 1, 2 and 4 workers.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import yaml

from bench.common import RAW, REPO, write_result
from raysweep.ray_settings import STARTED_RAY

RAY = str(Path(sys.executable).with_name("ray"))
NODES = ("127.0.0.2", "127.0.0.3")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env() -> dict[str, str]:
    """The bench's clusters start as `raysweep slurm`'s nodes do: with ``ray_settings.STARTED_RAY``."""
    return STARTED_RAY | os.environ | {"PYTHONPATH": str(REPO), "RAY_AUTH_MODE": "token", "WANDB_SILENT": "true"}


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


MODES = {
    # Tune's default: many trials pending, each with its placement group staged
    "tune_default": {"TUNE_MAX_PENDING_TRIALS_PG": "auto", "RAYSWEEP_BACKFILL": "0"},
    # raysweep's rule before reservations: one trial pending at a time
    "one_pending": {"TUNE_MAX_PENDING_TRIALS_PG": "1", "RAYSWEEP_BACKFILL": "0"},
    # a reservation for the oldest waiting trial, backfill behind it (driver/admission.py), each
    # trial in Tune's placement group of its shape
    "backfill": {"RAYSWEEP_START_AHEAD": "0"},
    # the same, warm trials placing their own slots, the head started ahead of them (trial/slots.py):
    # the default
    "backfill_start_ahead": {"RAYSWEEP_START_AHEAD": "1"},
}


@dataclass(frozen=True)
class Lengths:
    """How long the starvation sweep's trials run: ``epochs`` of ``epoch_s`` seconds each, or
    with ``most`` set, epochs drawn for each trial from ``epochs``..``most`` (the search's
    parameter, so the admission's estimates know each trial's own)."""

    epochs: int = 2
    most: int | None = None
    epoch_s: float = 1.0

    @classmethod
    def parse(cls, text: str, epoch_s: float) -> Lengths:
        low, _, high = text.partition("-")
        return cls(int(low), int(high) if high else None, epoch_s)

    @property
    def label(self) -> str:
        epochs = f"{self.epochs}-{self.most}" if self.most else str(self.epochs)
        return f"{epochs} epochs of {self.epoch_s:g} s"


def starvation(
    address: str, trials: int, mode: str, sizes: tuple[int, ...], slots: int, lengths: Lengths = Lengths()
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A random sweep of 1-worker trials with a larger one among every four (``sizes[1:]``, as
    likely as each other); the larger ones wait for their slots while small ones come and go.
    Returns its figures and its timeline."""
    share = 0.25 / (len(sizes) - 1)
    parameters: dict[str, Any] = {
        "x": {"min": 0.0, "max": 1.0},
        "num_gpus": {"values": list(sizes), "probabilities": [0.75] + [share] * (len(sizes) - 1)},
    }
    base: dict[str, Any] = {"epochs": lengths.epochs, "sleep": lengths.epoch_s}
    if lengths.most:
        parameters["epochs"] = {"values": list(range(lengths.epochs, lengths.most + 1))}
        del base["epochs"]
    doc = {
        "name": f"starve-{mode}-{'-'.join(map(str, sizes))}",
        "method": "random",
        "run_cap": trials,
        "metric": {"name": "score", "goal": "minimize"},
        "parameters": parameters,
        "raysweep": {
            "train_loop": "train_loops.smoke:train",
            "resources": {"network_interface": "lo"},
            "base_config": base,
            "seed": 3,
        },
    }
    rows = run(address, doc, MODES[mode])
    return figures(rows, slots), timeline(rows)


def timeline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each trial's size, epochs and times from the sweep's first start (the raw table behind the
    figures, for reading where the idle time went)."""
    first = min(r["start"] for r in rows)
    times = ("created", "reserved_at", "start", "end")
    return [
        {"size": r["num_workers"], "epochs": r["config"].get("epochs"), "backfilled": bool(r.get("backfilled"))}
        | {k: round(r[k] - first, 2) for k in times if r.get(k) is not None}
        for r in rows
    ]


def figures(rows: list[dict[str, Any]], slots: int) -> dict[str, Any]:
    """Per larger trial: how many trials made after it started before it, and for how long it was
    passed over (its start less the first such start), against one small trial's length; the
    slots' busy share and the wall time; reservations, late ones, backfilled trials; Tune's actors,
    and how many of them ran trials of several sizes."""
    small = statistics.median(r["wall_s"] for r in rows if r["num_workers"] == 1)
    big = []
    for i, r in enumerate(rows):
        if r["num_workers"] == 1:
            continue
        before = [t["start"] for t in rows[i + 1 :] if t["start"] < r["start"]]  # made after it, ran first
        big.append(
            {
                "index": i,
                "size": r["num_workers"],
                "overtaken_by": len(before),
                "passed_over_s": round(r["start"] - min(before), 1) if before else 0.0,
                "waited_s": round(r["start"] - r["created"], 1) if r.get("created") else None,
            }
        )
    starts, ends = [r["start"] for r in rows], [r["end"] for r in rows]
    busy = sum(r["wall_s"] * r["num_workers"] for r in rows)
    made = [reports(r) for r in rows]  # each trial's result.json, read once
    training = sum(training_s(m) * r["num_workers"] for r, m in zip(rows, made, strict=True))
    wall = max(ends) - min(starts)
    longest = max((b["passed_over_s"] for b in big), default=0.0)
    late = [r for r in rows if r.get("reserved_at") and r["start"] > r["reserved_at"] + 5.0]
    sizes_per_actor: dict[int, set[int]] = {}  # Tune's actor (its pid) -> the sizes of the trials it ran
    for r, m in zip(rows, made, strict=True):
        for pid in {report["pid"] for report in m}:
            sizes_per_actor.setdefault(pid, set()).add(r["num_workers"])
    return {
        "trials": len(rows),
        "big_trials": big,
        "small_trial_s": round(small, 2),
        "longest_passed_over_s": longest,
        "longest_passed_over_small_trials": round(longest / small, 2),
        "wall_s": round(wall, 1),
        "slot_busy_fraction": round(busy / (slots * wall), 3),
        "slot_training_fraction": round(training / (slots * wall), 3),
        "reserved": sum(1 for r in rows if r.get("reserved_at")),
        "late_reservations": len(late),
        "backfilled": sum(1 for r in rows if r.get("backfilled")),
        "tune_actors": len(sizes_per_actor),
        "actors_with_several_sizes": sum(len(sizes) > 1 for sizes in sizes_per_actor.values()),
    }


def reports(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The trial's reports as Tune recorded them (result.json)."""
    return [json.loads(line) for line in (Path(row["trial_dir"]) / "result.json").read_text().splitlines()]


def training_s(made: list[dict[str, Any]]) -> float:
    """The seconds a trial's ranks trained: from its first epoch's start to its last report
    (``made``, its result.json), without the start-up its row's wall time holds (slots held, not yet training)."""
    if not made:
        return 0.0
    epoch = made[-1]["time_this_iter_s"]  # a later report's: the first one's holds the start-up too
    return made[-1]["timestamp"] - made[0]["timestamp"] + epoch


@contextlib.contextmanager
def one_node_of_fake_gpus() -> Iterator[str]:
    """One node with 4 GPUs that do not exist (and 4 CPUs, so the CPUs bound nothing)."""
    port = free_port()
    subprocess.run([RAY, "get-auth-token", "--generate"], check=True, capture_output=True, env=env())
    args = [RAY, "start", "--head", f"--node-ip-address={NODES[0]}", f"--port={port}", "--include-dashboard=false"]
    args += ["--num-cpus=4", "--num-gpus=4", "--disable-usage-stats", "--resources", json.dumps({"raysweep_slot": 4})]
    try:
        subprocess.run(args, check=True, capture_output=True, env=env())
        yield f"{NODES[0]}:{port}"
    finally:
        stop(port)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--skip-startup", action="store_true", help="only the starvation sweeps")
    p.add_argument("--two-nodes-only", action="store_true", help="not the one-node sweep of fake GPUs")
    p.add_argument("--epochs", default="2", help="each trial's epochs, N or LOW-HIGH (drawn per trial); default 2")
    p.add_argument("--epoch-s", type=float, default=1.0, help="seconds per epoch (default 1)")
    p.add_argument("--modes", nargs="+", choices=tuple(MODES), default=list(MODES), help="admissions (default all)")
    args = p.parse_args()
    lengths = Lengths.parse(args.epochs, args.epoch_s)
    out: dict[str, Any] = {"lengths": lengths.label}
    runs: dict[str, dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]] = {}
    trials = 8 if args.quick else 24
    with two_nodes() as address:
        if not args.skip_startup:
            out["startup"] = {
                f"{runner}_{size}w": startup(address, runner, size)
                for runner in ("warm", "torchtrainer")
                for size in (2, 4)
            }
            print(json.dumps(out["startup"]), flush=True)
        runs["starvation"] = {mode: starvation(address, trials, mode, (1, 4), 4, lengths) for mode in args.modes}
    if not args.two_nodes_only:
        with one_node_of_fake_gpus() as address:
            runs["one_node"] = {mode: starvation(address, trials, mode, (1, 2, 4), 4, lengths) for mode in args.modes}
    raw: dict[str, Any] = {"lengths": lengths.label}
    for cluster, by_mode in runs.items():
        out[cluster] = {mode: made for mode, (made, _) in by_mode.items()}
        raw[cluster] = {mode: trials for mode, (_, trials) in by_mode.items()}
        print(json.dumps(out[cluster]), flush=True)
    suffix = "" if lengths == Lengths() else f"_{args.epochs}x{args.epoch_s:g}s"
    print(write_result(f"admission{suffix}", raw, args.quick, directory=RAW))
    print(write_result(f"admission{suffix}", out, args.quick))


if __name__ == "__main__":
    main()
