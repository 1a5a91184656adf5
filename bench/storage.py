"""What a sweep leaves on its storage, and what one checkpoint costs to persist there.

1. Bytes left: an ASHA sweep (``--trials``, default 64) of a loop that saves a ``--checkpoint-mib``
   checkpoint at every report, run twice side by side on an embedded Ray: under raysweep's
   checkpoint policy (``raysweep.checkpoints`` defaults: the best 3 finished trials', 2 each) and
   under Tune's default (every trial's newest 2, kept: ``keep_best_trials: all``).
2. Seconds to persist one checkpoint (a directory holding one file of 1 and 16 MiB), as Ray
   persists it (``pyarrow.fs.copy_files`` from the trial's disk): to a local S3 API (moto's server)
   against the local disk, ``--repeats`` times each, the median kept.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.common import REPO, median, write_result

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}


def train(config: dict) -> None:
    """The sweep's loop: a score that ranks by ``x``, a checkpoint of ``checkpoint_mib`` per report."""
    import raysweep

    payload = os.urandom(int(config["checkpoint_mib"] * (1 << 20)))
    for epoch in range(1, config["epochs"] + 1):
        with tempfile.TemporaryDirectory() as d:
            Path(d, "model.bin").write_bytes(payload)
            raysweep.report({"score": (config["x"] - 0.3) ** 2 + 1.0 / epoch}, checkpoint=d)


def sweep_bytes(root: Path, trials: int, checkpoint_mib: float, policy: dict[str, Any]) -> dict[str, Any]:
    """Run the ASHA sweep under ``policy`` into ``root``; what its run dir holds then."""
    from raysweep.runs.storage import open_path, usage

    root.mkdir(parents=True)
    spec = root / "sweep.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "bytes",
                "method": "random",
                "metric": {"name": "score", "goal": "minimize"},
                "parameters": {"x": {"min": 0.0, "max": 1.0}},
                "raysweep": {
                    "train_loop": "bench.storage:train",
                    "base_config": {"epochs": 9, "checkpoint_mib": checkpoint_mib},
                    "scheduler": {"type": "asha", "grace_period": 1, "max_t": 9, "reduction_factor": 3},
                    "checkpoints": policy,
                    "seed": 0,
                },
            }
        )
    )
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "raysweep", "run", str(spec), "--count", str(trials), "--storage", str(root / "runs")]
    subprocess.run(cmd + ["--wandb", "disabled", "--quiet"], check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    held = usage(*open_path(root / "runs" / "bytes"))
    return held.to_json() | {"wall_s": time.perf_counter() - t0}


def _moto() -> tuple[subprocess.Popen, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("moto_server did not start")


def persist_seconds(repeats: int) -> dict[str, dict[str, float]]:
    """Median seconds to copy a one-file checkpoint dir to S3 (moto) and to the local disk, per size."""
    import boto3
    import pyarrow.fs

    os.environ.update(CREDENTIALS)
    proc, port = _moto()
    try:
        boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}").create_bucket(Bucket="bench")
        s3, s3_root = pyarrow.fs.FileSystem.from_uri(f"s3://bench/ck?endpoint_override=127.0.0.1:{port}&scheme=http")
        local, local_root = pyarrow.fs.LocalFileSystem(), tempfile.mkdtemp(prefix="bench_persist_")
        out = {}
        for mib in (1, 16):
            src = tempfile.mkdtemp(prefix="bench_ckpt_")
            Path(src, "model.bin").write_bytes(os.urandom(mib << 20))
            times: dict[str, list[float]] = {"s3": [], "local": []}
            for i in range(repeats):
                for name, fs, root in (("s3", s3, s3_root), ("local", local, local_root)):
                    dest = f"{root}/checkpoint_{mib}_{i:06d}"
                    t0 = time.perf_counter()
                    fs.create_dir(dest)
                    pyarrow.fs.copy_files(src, dest, source_filesystem=local, destination_filesystem=fs)
                    times[name].append(time.perf_counter() - t0)
            shutil.rmtree(src)
            out[f"{mib}MiB"] = {name: median(v) for name, v in times.items()}
        shutil.rmtree(local_root)
        return out
    finally:
        proc.kill()


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.storage", description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--checkpoint-mib", type=float, default=1.0)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--quick", action="store_true", help="8 trials, 2 repeats: a check that it runs")
    args = p.parse_args()
    trials, repeats = (8, 2) if args.quick else (args.trials, args.repeats)
    with tempfile.TemporaryDirectory(prefix="bench_storage_") as d:
        policy = sweep_bytes(Path(d, "policy"), trials, args.checkpoint_mib, {})
        tune = sweep_bytes(Path(d, "tune"), trials, args.checkpoint_mib, {"keep_best_trials": "all"})
    persist = persist_seconds(repeats)
    data = {
        "trials": trials,
        "checkpoint_mib": args.checkpoint_mib,
        "policy": policy,
        "tune_default": tune,
        "bytes_ratio": tune["bytes"] / max(1, policy["bytes"]),
        "persist_s": persist,
    }
    path = write_result("storage", data, args.quick)
    print(f"{trials} trials: {policy['bytes']:,} bytes under the policy, {tune['bytes']:,} under Tune's default")
    for size, s in persist.items():
        print(f"persist {size}: local {s['local'] * 1000:.1f} ms, S3 {s['s3'] * 1000:.1f} ms")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
