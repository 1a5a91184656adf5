"""A wheelhouse in parts of a size the user picks, for a node with no internet reached through
copies of limited size (``make wheelhouse PART_MIB=N``; docs/clusters.md, "A GPU node without
internet").

``python tools/wheelhouse_parts.py WHEELHOUSE --part-mib N [--has PACKAGES]`` takes a wheelhouse
built for the node's Python (``make wheelhouse PYTHON_VERSION=3.12``) and writes its wheels into
``WHEELHOUSE-parts/a``, ``b``, ... of at most ``N`` MiB each, one copy each. ``PACKAGES``, if given,
is what the node already has, one name per line or as ``pip freeze`` writes it (``name==version``):
run ``pip freeze`` there and copy its output here.

What it leaves behind:
* the large wheels of what the node has (its small ones travel anyway, under ``--small-mib``:
  the node's version can be older than raysweep's pin);
* torch, triton and NVIDIA's wheels: the node's own CUDA build of torch is the one to use;
* what a sweep does not run (the browser and lint tools of ``raysweep[dev]``, and engine ax's
  packages, ``raysweep[ax]``);
* Ray's Java worker (``ray/jars/``, 31 of its wheel's 76 MiB), which raysweep never starts.

On the node, with every part copied beside the repository: ``make offline-install``, a venv over
the node's own torch.
"""

from __future__ import annotations

import argparse
import re
import shutil
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_FOR_A_SWEEP = {"playwright", "ruff", "hydra-core", "omegaconf", "antlr4-python3-runtime"}
NOT_FOR_A_SWEEP |= {  # engine ax (raysweep[ax]) and what only it needs
    *("ax-platform", "botorch", "gpytorch", "linear-operator", "pyro-ppl", "pyro-api", "pymoo", "cma", "moocore"),
    *("alive-progress", "about-time", "graphemeu"),
}
NEVER_CARRIED = re.compile(r"^(torch|triton|nvidia-.*)$")  # the machine's CUDA build is the one to test


def normal(name: str) -> str:
    """A project's name as PyPI compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def project(wheel: Path) -> str:
    return normal(wheel.name.split("-")[0])


def machine_has(path: Path) -> set[str]:
    """The projects a package list names: one per line, bare or as ``pip freeze`` writes them
    (``name==version``, ``name @ url``); ``#`` starts a comment."""
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(normal(re.split(r"[\s=<>!~@\[;]", line, maxsplit=1)[0]))
    return names


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
    p.add_argument("wheelhouse", type=Path, help="a wheelhouse built for the machine's Python (make wheelhouse)")
    p.add_argument("--has", type=Path, help="what the machine has: `pip freeze` there, or one name per line")
    p.add_argument("--part-mib", type=float, required=True, help="the most one copy holds (leave room for the rest)")
    p.add_argument("--out", type=Path, help="where the parts go (default: WHEELHOUSE-parts)")
    p.add_argument("--small-mib", type=float, default=2.0, help="a wheel the machine has travels when under this")
    args = p.parse_args()
    there = machine_has(args.has) if args.has else set()
    args.out = args.out or args.wheelhouse.with_name(args.wheelhouse.name + "-parts")
    shutil.rmtree(args.out, ignore_errors=True)
    staging = args.out / "all"
    staging.mkdir(parents=True)
    for wheel in sorted(args.wheelhouse.glob("*.whl")):
        name = project(wheel)
        large = wheel.stat().st_size >= args.small_mib * 2**20
        if NEVER_CARRIED.match(name) or name in NOT_FOR_A_SWEEP or (name in there and large):
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
