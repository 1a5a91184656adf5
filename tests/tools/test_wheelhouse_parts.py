"""``tools/wheelhouse_parts.py`` (``make wheelhouse PART_MIB=N``): Ray's wheel without its Java jars, a package list as ``pip freeze``
writes it, and parts that fit a copy."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
from wheelhouse_parts import machine_has, without_jars  # noqa: E402


def fake_wheel(path: Path, files: dict[str, bytes]) -> Path:
    record = "".join(f"{name},sha256=x,{len(data)}\n" for name, data in files.items())
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(f"{path.name.split('-')[0]}-{path.name.split('-')[1]}.dist-info/RECORD", record)
    return path


def test_rays_jars_and_their_record_lines_are_left_out(tmp_path):
    wheel = fake_wheel(
        tmp_path / "ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl",
        {"ray/__init__.py": b"x", "ray/jars/ray_dist.jar": b"j" * 1000},
    )
    (tmp_path / "out").mkdir()
    slim = without_jars(wheel, tmp_path / "out")
    names = zipfile.ZipFile(slim).namelist()
    assert "ray/__init__.py" in names and not [n for n in names if n.startswith("ray/jars/")]
    record = zipfile.ZipFile(slim).read("ray-2.60.0.dist-info/RECORD").decode()
    assert "ray/__init__.py" in record and "ray/jars" not in record


def test_parts_leave_out_what_the_machine_has_and_fit_their_size(tmp_path):
    house = tmp_path / "house"
    house.mkdir()
    fake_wheel(
        house / "ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl",
        {"ray/a.py": b"r" * 300_000, "ray/jars/j.jar": b"j" * 900_000},
    )
    fake_wheel(house / "optuna-5.0.0-py3-none-any.whl", {"optuna/a.py": bytes(range(256)) * 1200})
    fake_wheel(house / "torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl", {"torch/a.py": b"t"})  # never carried
    fake_wheel(house / "aiohttp-3.14.5-cp312-cp312-manylinux2014_x86_64.whl", {"aiohttp/a.py": b"h"})  # small: travels
    fake_wheel(house / "scipy-1.17.1-cp312-cp312-manylinux_2_28_x86_64.whl", {"scipy/a.py": bytes(range(256)) * 1200})
    fake_wheel(house / "playwright-1.65.2-py3-none-manylinux1_x86_64.whl", {"playwright/a.py": b"p"})  # not for a sweep
    has = tmp_path / "has.txt"
    has.write_text("scipy==1.16.0\naiohttp==3.9.1\n")  # as `pip freeze` writes it on the machine
    out = subprocess.run(
        [
            *(sys.executable, "tools/wheelhouse_parts.py", str(house)),
            *("--has", str(has), "--part-mib", "0.35", "--small-mib", "0.2"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    carried = {w.name.split("-")[0]: w.parent.name for w in (tmp_path / "house-parts").glob("*/*.whl")}
    assert (
        set(carried) == {"ray", "optuna", "aiohttp"} and carried["ray"] != carried["optuna"]
    )  # one part each at 0.35 MiB


def test_a_package_list_reads_as_pip_freeze_writes_it_or_one_name_a_line(tmp_path):
    has = tmp_path / "has.txt"
    has.write_text(
        "# the machine's packages\nPyYAML==6.0.2\nnvidia_nccl_cu12==2.27.3\n"
        "torch @ file:///opt/torch-2.11.0-cp312.whl\nscikit-learn\n\nrequests[socks]>=2 ; python_version>'3'\n"
    )
    assert machine_has(has) == {"pyyaml", "nvidia-nccl-cu12", "torch", "scikit-learn", "requests"}
