"""``python -m bench [--quick] [--parts ...]``: every benchmark part, then the table.

Each part runs in its own process under ``flock /tmp/raysweep-ray.lock`` (other sessions run
Ray on this machine, and a part must not share the cores with them or hold the lock long),
and writes its summary, ``bench/results/<part>.json`` (raw tables, if any, to ``bench/results/raw/``,
which git ignores); the table is computed from the summaries.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time

from bench.common import REPO
from bench.report import render

LOCK = "/tmp/raysweep-ray.lock"
PARTS = {
    "overhead_1w": ["bench.overhead", "--workers", "1"],
    "overhead_2w": ["bench.overhead", "--workers", "2"],
    "throughput_a": ["bench.throughput", "--system", "a"],
    "throughput_b": ["bench.throughput", "--system", "b"],
    "throughput_c": ["bench.throughput", "--system", "c"],
    "ddp_scaling": ["bench.ddp_scaling"],
    "ray_background": ["bench.ray_background"],  # part 4's control: Ray's other processes stopped for a window
    "search_bayes": ["bench.search", "--method", "bayes"],
    "search_random": ["bench.search", "--method", "random"],
    "search_grid": ["bench.search", "--method", "grid"],
    # System (c) of part 3: W&B's engine and one torchrun agent, hyperband evaluated every P s
    "search_wandb_bayes_every10s": ["bench.search", "--method", "bayes", "--wandb-agent", "10"],
    "search_wandb_bayes_every120s": ["bench.search", "--method", "bayes", "--wandb-agent", "120"],
    "scale": ["bench.scale"],
    "readers": ["bench.readers"],
    "first_report": ["bench.first_report"],
    "plan": ["bench.plan"],  # validate --plan against what grid and ASHA sweeps spend
    "chaos": ["bench.chaos"],  # a sweep through a lost node, a killed driver and a Ctrl-C on two nodes
    "storage": ["bench.storage"],  # what a sweep leaves on storage (policy vs Tune's default), S3 vs disk
    "preemption": ["bench.preemption"],  # a node drained then killed every 12 s, a new one in its place
    "fill": ["bench.fill"],  # the tail filled on three nodes, and the simulator's replay of it
}
GPU_PARTS = {"gpu": ["bench.gpu"]}  # --gpu: issue 21's figures, on a machine with CUDA


def run_part(name: str, quick: bool) -> int:
    cmd = [sys.executable, "-m", *(PARTS | GPU_PARTS)[name]] + (["--quick"] if quick else [])
    if shutil.which("flock"):
        cmd = ["flock", LOCK, *cmd]
    t0 = time.time()
    print(f"== {name}: {' '.join(cmd)}", flush=True)
    code = subprocess.run(cmd, cwd=REPO).returncode
    print(f"== {name}: exit {code} after {time.time() - t0:.0f} s", flush=True)
    return code


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes: a check that everything runs, not figures")
    p.add_argument(
        "--parts",
        nargs="+",
        choices=tuple(PARTS),
        default=list(PARTS),
        metavar="PART",
        help=f"which parts (default all): {', '.join(PARTS)}",
    )
    p.add_argument("--gpu", action="store_true", help="only the GPU part (bench.gpu; needs CUDA)")
    args = p.parse_args()
    failed = [name for name in (list(GPU_PARTS) if args.gpu else args.parts) if run_part(name, args.quick) != 0]
    print()
    print(render(args.quick))
    if failed:
        print(f"\nparts that failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
