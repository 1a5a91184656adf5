"""Real frameworks' own checkpoints through raysweep's trial checkpoint directory
(``RAYSWEEP_CHECKPOINT_DIR``): a Lightning script (``ckpt_path="last"``) and an HF Trainer script
(``output_dir``, ``resume_from_checkpoint``), written as docs/train-loops.md shows, run as
``program:`` trials; the driver is killed mid-trial and ``resume`` goes on from the framework's
checkpoint: the first epoch is trained once, every epoch is trained.

Slow (``make test-slow``, which installs ``raysweep[frameworks]``): make test holds the same
contract with a plain script (tests/driver/test_s3_storage.py).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, cli_env, raysweep, write_spec

pytestmark = [pytest.mark.ray, pytest.mark.slow]

EPOCHS = 5
SCRIPTS = {
    "lightning": ("lightning", "lightning_resumable.py"),
    "hf_trainer": ("transformers", "hf_trainer_resumable.py"),
}


def epochs_ran(records: Path) -> list[int]:
    return [json.loads(line)["epoch"] for p in records.glob("*.jsonl") for line in p.read_text().splitlines()]


def result_lines(run_dir: Path) -> int:
    return max((len(p.read_text().splitlines()) for p in run_dir.glob("*/result.json")), default=0)


@pytest.mark.parametrize("framework", sorted(SCRIPTS))
def test_a_frameworks_own_checkpoints_resume_the_trial_after_a_killed_driver(tmp_path, ray_cluster, framework):
    package, script = SCRIPTS[framework]
    pytest.importorskip(package, reason=f"{package}: make test-slow installs raysweep[frameworks]")
    records = tmp_path / "records"
    records.mkdir()
    spec = write_spec(
        tmp_path / "fw.yaml",
        name="fw",
        method="grid",
        program=str(ROOT / "tests" / "support" / "programs" / script),
        metric={"name": "score", "goal": "minimize"},
        parameters={"x": {"value": 0.1}, "epochs": {"value": EPOCHS}, "record_dir": {"value": str(records)}},
    )
    storage = tmp_path / "runs"
    cmd = [sys.executable, "-m", "raysweep", "run", str(spec), "--address", ray_cluster, "--storage", str(storage)]
    driver = subprocess.Popen(cmd + ["--wandb", "offline"], cwd=ROOT, env=cli_env(), stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while result_lines(storage / "fw") < 2:  # two epochs reported, and Tune's record of them stored
        assert driver.poll() is None and time.time() < deadline, driver.stderr.read() if driver.poll() else "slow"
        time.sleep(0.3)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    assert len(epochs_ran(records)) < EPOCHS, epochs_ran(records)

    out = raysweep("resume", "fw", "--storage", str(storage), "--address", ray_cluster)
    assert out.returncode == 0, out.stderr + out.stdout
    ran = epochs_ran(records)
    assert sorted(set(ran)) == list(range(1, EPOCHS + 1)) and ran.count(1) == 1, ran  # went on, not over
