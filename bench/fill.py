"""``python -m bench.fill``: the tail filled for real, and the simulator's replay of it.

Three Ray nodes on this machine at their own loopback addresses (127.0.0.27-29), 2 worker slots
each. A grid sweep of trials that grow (``raysweep.grow: {sizes: [1, 2]}``, the fill on) under
ASHA, each epoch ``epoch_s / world`` seconds of sleep (``bench.loops.paced``: perfect scaling, as
the simulator's efficiency 1.0 has it) and a checkpoint. Its timeline (each trial's sizes, start
and end, in the order made) is then replayed by ``bench.simulate``'s ``Simulation`` with the same
trials, curves, scheduler and sizes, each size's start-up and a restart measured from the run:
slots busy and wall time side by side, and whether each trial took the same sizes in the same
order.

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.fill
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.admission import RAY, env, free_port, run, stop
from bench.common import RAW, write_result
from bench.simulate import METRIC, Setup, Simulation
from raysweep.growth import Growth
from raysweep.spec import SweepSpec
from raysweep.spec.model import Scheduler

NODES = ("127.0.0.27", "127.0.0.28", "127.0.0.29")
SLOTS = 2
ASHA = {"type": "asha", "grace_period": 1, "max_t": 12, "reduction_factor": 2}
GROW = {"sizes": [1, 2], "batch": "batch_size"}


@contextlib.contextmanager
def three_nodes() -> Iterator[str]:
    """A head and two worker nodes, 2 CPUs and 2 slots each; yields the head's address."""
    port = free_port()
    address = f"{NODES[0]}:{port}"
    subprocess.run([RAY, "get-auth-token", "--generate"], check=True, capture_output=True, env=env())
    common = ["--num-cpus=2", "--disable-usage-stats", "--resources", json.dumps({"raysweep_slot": SLOTS})]
    head = [RAY, "start", "--head", f"--node-ip-address={NODES[0]}", f"--port={port}", "--include-dashboard=false"]
    try:
        subprocess.run(head + common, check=True, capture_output=True, env=env())
        for ip in NODES[1:]:
            first = 20000 + 300 * (int(ip.rsplit(".", 1)[1]) - 2)  # tests/support/loopback.py's ranges
            ports = [f"--{flag}={free_port()}" for flag in ("node-manager-port", "object-manager-port")]
            ports += [
                f"--{flag}={free_port()}" for flag in ("dashboard-agent-listen-port", "dashboard-agent-grpc-port")
            ]
            ports += [f"--{flag}={free_port()}" for flag in ("runtime-env-agent-port", "metrics-export-port")]
            workers = [f"--min-worker-port={first}", f"--max-worker-port={first + 299}"]
            node = [RAY, "start", f"--address={address}", f"--node-ip-address={ip}", *ports, *workers, *common]
            subprocess.run(node, check=True, capture_output=True, env=env())
        yield address
    finally:
        stop(port)


def sweep(trials: int, epoch_s: float) -> dict[str, Any]:
    """``trials`` trials of ``max_t`` epochs: six fill the cluster's slots, the rest wait and run in
    the tail, where idle slots are there to fill."""
    return {
        "name": "fill",
        "method": "grid",
        # every trial reports the same epoch at a rung: ASHA stops none whatever order they report
        # in, so the replay's trials run as long as the real ones did
        "metric": {"name": "epoch", "goal": "maximize"},
        "parameters": {"x": {"values": [round(0.5 + 0.05 * i, 2) for i in range(trials)]}},
        "raysweep": {
            "train_loop": "bench.loops:paced",
            "base_config": {"epochs": ASHA["max_t"], "epoch_s": epoch_s, "batch_size": 64},
            "scheduler": ASHA,
            "grow": GROW,
            "resources": {"use_gpu": False},
        },
    }


def timeline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each trial in the order made: its x, its sizes in turn, its epochs, and its times from the
    sweep's first start (start, end, and when it took each size)."""
    first = min(r["start"] for r in rows)
    return [
        {
            "x": r["config"]["x"],
            "sizes": [int(s[0]) for s in r.get("sizes") or [[r["num_workers"]]]],
            "resized_at": [round(s[1] - first, 2) for s in (r.get("sizes") or [])[1:]],
            "resized_after": [int(s[2]) for s in (r.get("sizes") or [])[1:]],  # its epochs then
            "epochs": r["iterations"],
            "start": round(r["start"] - first, 2),
            "end": round(r["end"] - first, 2),
            "worker_s": r.get("worker_s") or r["run_s"] * r["num_workers"],
            "reported_at": reported_at(r, first),
        }
        for r in sorted(rows, key=lambda r: r["created"])
    ]


def reported_at(row: dict[str, Any], first: float) -> dict[int, float]:
    """When the trial made each report, from the sweep's first start (a report made again after a
    restart: its last time)."""
    lines = (Path(row["trial_dir"]) / "result.json").read_text().splitlines()
    return {int(r["training_iteration"]): round(r["at"] - first, 2) for r in map(json.loads, lines)}


def restart_seconds(trials: list[dict[str, Any]], epoch_s: float) -> float | None:
    """What the run's restarts cost, as ``Promotions.reported`` measures them: from the report a
    trial paused at to its next one, less that epoch's seconds at its new size (the median)."""
    costs = []
    for t in trials:
        at = {int(k): v for k, v in t["reported_at"].items()}  # JSON keys are strings
        for size, after in zip(t["sizes"][1:], t["resized_after"]):
            if after in at and after + 1 in at:
                costs.append(at[after + 1] - at[after] - epoch_s / size)
    return round(statistics.median(costs), 2) if costs else None


def real_figures(trials: list[dict[str, Any]]) -> dict[str, float]:
    wall = max(t["end"] for t in trials) - min(t["start"] for t in trials)
    busy = sum(t["worker_s"] for t in trials) / (SLOTS * len(NODES) * wall)
    return {"wall_s": round(wall, 1), "slots_busy": round(busy, 3)}


def replay(trials: list[dict[str, Any]], epoch_s: float) -> Simulation:
    """The run on the simulated clock: 3 nodes of 2 slots, the same trials in the order made with
    their curves, ASHA and growth with the fill; each size's start-up the median of the real
    trials' seconds held at that size beyond its epochs there, up to a first change of size; a
    restart what the run's restarts cost (``restart_seconds``)."""
    beyond: dict[int, list[float]] = {}
    alone = [t for t in trials if len(t["sizes"]) == 1]
    for t in alone or trials:  # every trial changed size: their first sizes, up to the change
        held = (t["resized_at"] or [t["end"]])[0] - t["start"]
        epochs = (t.get("resized_after") or [t["epochs"]])[0]
        beyond.setdefault(t["sizes"][0], []).append(held - epochs * epoch_s / t["sizes"][0])
    starts = tuple((size, round(max(0.0, statistics.median(v)), 2)) for size, v in sorted(beyond.items()))
    curves = [{METRIC: [float(e) for e in range(1, ASHA["max_t"] + 1)]} for _ in trials]
    spec = SweepSpec(
        method="grid",
        parameters=(),
        train_loop="bench.loops:paced",
        scheduler=Scheduler(**{k: v for k, v in ASHA.items()}),
        grow=Growth(tuple(GROW["sizes"]), GROW["batch"]),
    )
    restart_s = restart_seconds(trials, epoch_s)
    setup = Setup(
        len(NODES),
        SLOTS,
        len(trials),
        "growth_fill",
        "raysweep",
        1.0,
        epoch_s,
        starts[0][1],
        starts,
        restart_s=restart_s,
    )
    return Simulation(setup, curves, spec=spec, sizes=[1] * len(trials))


def compare(trials: list[dict[str, Any]], epoch_s: float) -> dict[str, Any]:
    sim = replay(trials, epoch_s)
    figures = sim.run()
    real = real_figures(trials)
    simulated = [[size for size, _ in t.segments] for t in sorted(sim.trials.values(), key=lambda t: t.trial_id)]
    return {
        **{k: {"simulated": figures[k], "real": real[k], "ratio": round(figures[k] / real[k], 3)} for k in real},
        "sizes_real": sorted(t["sizes"] for t in trials),  # which trial grew depends on where it landed
        "sizes_simulated": sorted(simulated),
        "changes_real": changes((t["sizes"], [t["start"], *t["resized_at"]]) for t in trials),
        "changes_simulated": changes(zip(*t.segments) for t in sim.trials.values()),
        "start_s": dict(sim.setup.start_s_by_size),
        "restart_s": sim.setup.restart_s,
    }


def changes(trials: Iterable[tuple[Sequence[int], Sequence[float]]]) -> list[list[int]]:
    """Every change of a trial's size, in the order they came: [from, to] (each trial's sizes with
    the times it took them)."""
    out = [(at, [a, b]) for sizes, times in trials for a, b, at in zip(sizes, sizes[1:], times[1:])]
    return [change for _, change in sorted(out)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="7 trials")
    p.add_argument("--trials", type=int, default=8, help="default 8: six fill the slots, two run in the tail")
    p.add_argument("--epoch-s", type=float, default=4.0, help="seconds per epoch at 1 worker (default 4)")
    args = p.parse_args()
    trials = 7 if args.quick else args.trials
    with three_nodes() as address:
        rows = run(address, sweep(trials, args.epoch_s))
    made = timeline(rows)
    raw = {"epoch_s": args.epoch_s, "trials": made}
    print(write_result("fill", raw, args.quick, directory=RAW))
    out = compare(made, args.epoch_s)
    print(json.dumps(out))
    print(write_result("fill", out, args.quick))


if __name__ == "__main__":
    main()
