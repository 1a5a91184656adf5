"""``make gpu-carry``: the wheels a lent GPU machine lacks, in parts that fit one device call each.

The lent machines have Python 3.12, torch and most of the scientific stack, but no Ray, Optuna
or wandb, and no package index. A call carries at most 64 MiB of the tree; Ray's wheel alone is
about 76 MiB, 31 of them its Java worker (``ray/jars/``), which raysweep never starts. So this
takes a wheelhouse built for 3.12 (``make wheelhouse PYTHON_VERSION=3.12``), leaves out the large
wheels of what the machine has (``bench/device_packages.txt``, from the device tool's KINDS.md:
its small ones travel anyway, since the machine's version can be older than raysweep's pin, as its
aiohttp was), torch's own, and what the GPU check does not use (the browser and lint tools), strips
Ray's jars, and splits the rest into ``.gpu-carry/a``, ``.gpu-carry/b``, ... of at most
``--part-mib`` each. On the machine, with every part carried (one call each, within 30 s: a warm
machine keeps ignored folders):

    make gpu-install
    make gpu-check GPU_PY=.gpu-venv/bin/python GPU_CHECK_OUT=$OUT/gpu-check.json
"""

from __future__ import annotations

import argparse
import re
import shutil
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_FOR_THE_GPU_CHECK = {"playwright", "ruff", "hydra-core", "omegaconf", "antlr4-python3-runtime"}
NOT_FOR_THE_GPU_CHECK |= {  # engine ax (raysweep[ax]) and what only it needs
    *("ax-platform", "botorch", "gpytorch", "linear-operator", "pyro-ppl", "pyro-api", "pymoo", "cma", "moocore"),
    *("alive-progress", "about-time", "graphemeu"),
}
NEVER_CARRIED = re.compile(r"^(torch|triton|nvidia-.*)$")  # the machine's CUDA build is the one to test


def project(wheel: Path) -> str:
    return re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()


def without_jars(wheel: Path, out_dir: Path) -> Path:
    """Ray's wheel less ``ray/jars/`` (and their RECORD lines)."""
    target = out_dir / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            if item.filename.startswith("ray/jars/"):
                continue
            data = src.read(item)
            if item.filename.endswith(".dist-info/RECORD"):
                data = b"".join(line for line in data.splitlines(keepends=True) if not line.startswith(b"ray/jars/"))
            dst.writestr(item, data)
    return target


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("wheelhouse", type=Path, help="a wheelhouse built with PYTHON_VERSION=3.12")
    p.add_argument("--out", type=Path, default=ROOT / ".gpu-carry")
    p.add_argument("--part-mib", type=float, default=58.0, help="each part's size (the tree itself travels too)")
    p.add_argument("--small-mib", type=float, default=2.0, help="a wheel the machine has travels when under this")
    args = p.parse_args()
    there = {
        line.strip()
        for line in (ROOT / "bench" / "device_packages.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    shutil.rmtree(args.out, ignore_errors=True)
    staging = args.out / "all"
    staging.mkdir(parents=True)
    for wheel in sorted(args.wheelhouse.glob("*.whl")):
        name = project(wheel)
        large = wheel.stat().st_size >= args.small_mib * 2**20
        if NEVER_CARRIED.match(name) or name in NOT_FOR_THE_GPU_CHECK or (name in there and large):
            continue
        if name == "ray":
            without_jars(wheel, staging)
        else:
            shutil.copy(wheel, staging)
    parts: list[list[Path]] = []
    sizes: list[float] = []
    for wheel in sorted(staging.glob("*.whl"), key=lambda w: -w.stat().st_size):  # first fit, largest first
        mib = wheel.stat().st_size / 2**20
        index = next((i for i, size in enumerate(sizes) if size + mib <= args.part_mib), None)
        if index is None:
            parts.append([])
            sizes.append(0.0)
            index = len(parts) - 1
        parts[index].append(wheel)
        sizes[index] += mib
    for i, wheels in enumerate(parts):
        folder = args.out / chr(ord("a") + i)
        folder.mkdir()
        for wheel in wheels:
            wheel.rename(folder / wheel.name)
    shutil.rmtree(staging)
    for i, size in enumerate(sizes):
        print(f"{args.out / chr(ord('a') + i)}: {len(parts[i])} wheels, {size:.1f} MiB")


if __name__ == "__main__":
    main()
