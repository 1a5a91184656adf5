"""raysweep on a real GPU (issue 21): skipped without CUDA, so CI never runs these.

Every test runs the CLI as a user would, on the embedded Ray, which finds the machine's GPUs
itself. The loop (tests/gpu_loop.py) uses its GPU for real: NCCL, bf16 autocast, memory.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import ROOT, raysweep, write_spec

from raysweep.runs.files import TRIALS_FILE, read_trials

pytestmark = [pytest.mark.gpu, pytest.mark.ray,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: run on a GPU machine")]  # fmt: skip


def run(tmp_path: Path, name: str, *args: str, **doc) -> list[dict]:
    """Run the sweep ``name`` to its end; its trials in start order."""
    base = {"name": name, "method": "grid", "metric": {"name": "score", "goal": "maximize"},
            "train_loop": "tests.gpu_loop:train", "max_concurrent": 1}  # fmt: skip
    spec = write_spec(tmp_path / f"{name}.yaml", **(base | doc))
    out = raysweep("run", str(spec), "--storage", str(tmp_path / "runs"), "--wandb", "disabled", *args)
    assert out.returncode == 0, out.stderr + out.stdout
    return sorted(read_trials(tmp_path / "runs" / name / TRIALS_FILE), key=lambda r: r["trial_id"])


def test_local_gpu_count_is_what_cuda_sees():
    from raysweep.internals import local_gpu_count

    assert local_gpu_count() == torch.cuda.device_count()


@pytest.mark.parametrize("ddp_workers", ["warm", "torchtrainer"])
def test_a_one_gpu_trial_runs_nccl_and_bf16_autocast_on_the_gpu_ray_gave_it(tmp_path, ddp_workers):
    (row,) = run(tmp_path, "one", parameters={"x": {"values": [1.0]}}, ddp_workers=ddp_workers)
    m = row["metrics"]
    assert row["status"] == "done", row
    assert m["score"] == 1.0  # the all-reduce over a world of one
    assert m["bf16"] == 1.0  # raysweep.ddp.autocast on a GPU that supports bf16 (H100/H200 do)
    visible = m["visible"].split(",")
    assert 0 <= m["device_index"] < len(visible)


def test_gpus_0_runs_trials_on_gpu_0(tmp_path):
    (row,) = run(tmp_path, "zero", "--gpus", "0", parameters={"x": {"values": [1.0]}})
    m = row["metrics"]
    assert row["status"] == "done", row
    assert m["visible"].split(",")[int(m["device_index"])] == "0"


def test_a_program_script_runs_on_cuda(tmp_path):
    (row,) = run(tmp_path, "script", program=str(ROOT / "tests" / "programs" / "cuda_program.py"),
                 parameters={"x": {"values": [2.0]}, "num_gpus": {"value": 1}})  # fmt: skip
    assert row["status"] == "done", row
    assert row["metrics"]["score"] == 2.0 and row["metrics"]["on_cuda"] == 1.0


def test_twenty_trials_on_one_warm_worker_leave_gpu_memory_flat(tmp_path):
    rows = run(tmp_path, "flat", parameters={"x": {"values": list(range(20))}}, base_config={"hold_mib": 256})
    assert [r["status"] for r in rows] == ["done"] * 20
    assert len({r["metrics"]["pid"] for r in rows}) == 1  # one warm worker ran them all
    allocated = [r["metrics"]["allocated_at_start_mib"] for r in rows[1:]]
    reserved = [r["metrics"]["reserved_at_start_mib"] for r in rows[1:]]
    assert max(allocated) == min(allocated) and max(reserved) == min(reserved), (allocated, reserved)
    assert allocated[0] < 256 and reserved[0] < 256  # the 256 MiB a trial held is not left behind


def test_a_trial_out_of_gpu_memory_fails_with_a_sentence_and_the_next_trial_runs(tmp_path):
    rows = run(tmp_path, "oom", parameters={"x": {"values": [1, 2, 3]}}, base_config={"oom_at": 2})
    assert [r["status"] for r in rows] == ["done", "failed", "done"], rows
    assert "CUDA out of memory" in rows[1]["error"]
    assert rows[2]["metrics"]["allocated_at_start_mib"] < 256
