"""`make wheelhouse` installs raysweep where there is no package index (issue 31).

The wheelhouse is built for this machine's Python, then raysweep is installed from it alone
(``--no-index``) into a fresh venv that already has its torch, as on an air-gapped GPU node.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT


def run(*cmd: object, cwd: object = ROOT) -> subprocess.CompletedProcess:
    out = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True)
    assert out.returncode == 0, f"{' '.join(map(str, cmd))}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.mark.slow  # an install from scratch
def test_raysweep_installs_from_the_wheelhouse_alone_beside_its_torch(tmp_path):
    house = tmp_path / "wheelhouse"
    run("make", "wheelhouse", f"WHEELHOUSE={house}")
    assert not list(house.glob("torch-*")) and list(house.glob("raysweep-*.whl")) and list(house.glob("ray-*.whl"))
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    # --no-compile: pip would compile every module of torch and Ray to bytecode, the test's largest CPU cost
    pip = [venv / "bin" / "pip", "install", "-q", "--no-compile"]
    run(*pip, "torch==2.13.0")  # the node's own torch (here, the local CPU build)
    run(*pip, "--no-index", "--find-links", house, "raysweep")
    out = run(venv / "bin" / "raysweep", "validate", ROOT / "search_spaces" / "smoke.yaml", cwd=tmp_path)
    assert "smoke" in out.stdout
    imported = run(
        venv / "bin" / "python", "-c", "import raysweep, ray, optuna, wandb; print(raysweep.__file__)", cwd=tmp_path
    )
    assert str(venv) in imported.stdout  # the installed wheel, not this checkout
