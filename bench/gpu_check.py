"""``make gpu-check``: everything a GPU node can show, in one run and one results file.

It runs the GPU tests (tests/gpu/test_gpu.py, which fail rather than skip where a GPU is listed but
torch cannot use it), then ``bench.gpu``, and writes one JSON file: the device's name, each
test's outcome, and every figure of the bench. Run it whenever a GPU is at hand (docs/benchmarks.md).

    python -m bench.gpu_check [--out gpu-check.json] [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from bench.common import RESULTS

ROOT = Path(__file__).resolve().parents[1]


def device_names() -> list[str]:
    out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []


def gpu_tests(log: Path) -> dict[str, Any]:
    """tests/gpu/test_gpu.py's outcome, test by test (pytest's JUnit XML); pytest's whole output in ``log``."""
    with tempfile.TemporaryDirectory() as scratch:
        xml = Path(scratch) / "gpu.xml"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "tests/gpu/test_gpu.py",
                f"--junitxml={xml}",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        log.write_text(proc.stdout + proc.stderr)
        print(proc.stdout[-4000:], proc.stderr[-2000:], f"(the whole output: {log})", sep="\n", flush=True)
        cases = ET.parse(xml).getroot().iter("testcase") if xml.exists() else []
        outcomes = {}
        for case in cases:
            problem = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
            outcomes[case.get("name")] = {
                "outcome": "passed" if problem is None else {"failure": "failed"}.get(problem.tag, problem.tag),
                **({"message": (problem.get("message") or "")[:2000]} if problem is not None else {}),
            }
    counts = {k: sum(o["outcome"] == k for o in outcomes.values()) for k in ("passed", "failed", "error", "skipped")}
    return {"exit_code": proc.returncode, **counts, "tests": outcomes}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="gpu-check.json")
    p.add_argument("--quick", action="store_true", help="bench.gpu's tiny sizes")
    args = p.parse_args()
    devices = device_names()
    result: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "devices": devices}
    if len(devices) < 2:  # what the tests skip here, said in the results rather than left out silently
        result["not_shown"] = ["NCCL across GPUs: a 2-GPU trial's all-reduce (test_a_two_gpu_trial_...) needs 2+ GPUs"]
    result["tests"] = gpu_tests(Path(args.out).with_suffix(".tests.log"))
    bench = subprocess.run([sys.executable, "-m", "bench.gpu", *(["--quick"] if args.quick else [])], cwd=ROOT)
    figures = RESULTS / f"gpu{'_quick' if args.quick else ''}.json"
    result["bench_exit_code"] = bench.returncode
    result["bench"] = json.loads(figures.read_text()) if bench.returncode == 0 and figures.exists() else None
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    t = result["tests"]
    print(
        f"{args.out}: {t['passed']} passed, {t['failed'] + t['error']} failed, {t['skipped']} skipped; "
        f"bench {'done' if result['bench'] else 'failed'}"
    )
    return 0 if t["exit_code"] == 0 and result["bench"] else 1


if __name__ == "__main__":
    sys.exit(main())
