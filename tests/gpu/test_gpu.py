"""raysweep on a real GPU (issues 21, 31): `make gpu-check` runs these on a GPU node.

Every test runs the CLI as a user would, on the embedded Ray, which finds the machine's GPUs
itself. The loop (tests/support/gpu_loop.py) uses its GPU for real: NCCL, bf16 autocast, memory.

They skip only on a machine with no NVIDIA GPU. Where ``nvidia-smi -L`` lists one but torch
cannot use CUDA (a CPU build, a driver too old for it), every test fails with that sentence:
a GPU suite that skips there would pass without testing anything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import ROOT, raysweep, write_spec

from raysweep.runs.files import TRIALS_FILE, read_trials


def gpus_listed() -> list[str]:
    """The GPUs ``nvidia-smi -L`` lists ([] without the tool or a driver)."""
    if not shutil.which("nvidia-smi"):
        return []
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if line.startswith("GPU ")] if out.returncode == 0 else []


LISTED = gpus_listed()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.ray,
    pytest.mark.skipif(not LISTED, reason="no NVIDIA GPU here (nvidia-smi -L lists none)"),
]


@pytest.fixture(autouse=True)
def torch_uses_cuda():
    if not torch.cuda.is_available():
        pytest.fail(
            f"nvidia-smi lists {len(LISTED)} GPU(s) ({LISTED[0]}), but torch {torch.__version__} cannot use CUDA "
            f"(built with CUDA: {torch.backends.cuda.is_built()}; CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}): install a CUDA build of torch"
        )


def run(tmp_path: Path, name: str, *args: str, **doc) -> list[dict]:
    """Run the sweep ``name`` to its end (a key given as None is left out); its trials in start order."""
    base = {
        "name": name,
        "method": "grid",
        "metric": {"name": "score", "goal": "maximize"},
        "train_loop": "tests.support.gpu_loop:train",
        "max_concurrent": 1,
    }
    spec = write_spec(tmp_path / f"{name}.yaml", **{k: v for k, v in (base | doc).items() if v is not None})
    out = raysweep("run", str(spec), "--storage", str(tmp_path / "runs"), "--wandb", "disabled", *args)
    assert out.returncode == 0, out.stderr + out.stdout
    return sorted(read_trials(tmp_path / "runs" / name / TRIALS_FILE), key=lambda r: r["start"])


def test_local_gpu_count_is_what_cuda_sees():
    from raysweep.private_api import local_gpu_count

    assert local_gpu_count() == torch.cuda.device_count()


@pytest.mark.parametrize("runner", ["warm", "in_process", "torchtrainer"])
def test_a_one_gpu_trial_runs_nccl_and_bf16_autocast_on_the_gpu_ray_gave_it(tmp_path, monkeypatch, runner):
    """warm: raysweep's own NCCL group of one; in_process: the Tune trial's process (the loop makes
    its group); torchtrainer: a 1-worker TorchTrainer run, forced, with Ray Train's group."""
    if runner == "torchtrainer":
        monkeypatch.setenv("RAYSWEEP_ONE_WORKER_TORCHTRAINER", "1")  # the embedded Ray's processes inherit it
    workers = "warm" if runner == "warm" else "torchtrainer"
    (row,) = run(tmp_path, "one", parameters={"x": {"values": [1.0]}}, ddp_workers=workers)
    m = row["metrics"]
    assert row["status"] == "done", row
    assert m["score"] == 1.0  # the all-reduce over a world of one
    assert m["own_group"] == float(runner == "in_process")  # else raysweep (or Ray Train) made the group
    assert m["bf16"] == 1.0  # raysweep.ddp.autocast on a GPU that supports bf16 (H100/H200 do)
    visible = m["visible"].split(",")
    assert 0 <= m["device_index"] < len(visible)


def test_four_packed_trials_share_one_gpu_each_with_its_own_nccl_group(tmp_path):
    """gpus_per_worker 0.25: four 1-worker trials on GPU 0 at once (the loop's barrier waits for all
    four), each all-reducing over the NCCL group raysweep made for it."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    rows = run(
        tmp_path,
        "packed",
        "--gpus",
        "0",
        parameters={"x": {"values": [1, 2, 3, 4]}},
        max_concurrent=4,
        resources={"gpus_per_worker": 0.25},
        base_config={"barrier_dir": str(barrier), "barrier": 4, "hold_mib": 64},
    )
    assert [r["status"] for r in rows] == ["done"] * 4, rows
    assert {r["metrics"]["own_group"] for r in rows} == {0.0} and {r["metrics"]["score"] for r in rows} == {1.0}
    assert len({r["metrics"]["pid"] for r in rows}) == 4  # four workers, four groups


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="NCCL across GPUs needs 2+ GPUs (gpu-check says so)")
@pytest.mark.parametrize("workers", ["warm", "torchtrainer"])
def test_a_two_gpu_trial_all_reduces_over_nccl_across_its_gpus(tmp_path, workers):
    """Each rank on a GPU of its own, one NCCL group over both: the sum of rank + 1 over the ranks."""
    (row,) = run(tmp_path, "pair", parameters={"x": {"values": [1.0]}, "num_gpus": {"value": 2}}, ddp_workers=workers)
    m = row["metrics"]
    assert row["status"] == "done", row.get("error")
    assert m["score"] == 3.0 and m["group_size"] == 2.0 and m["bf16"] == 1.0, m


def test_gpus_0_runs_trials_on_gpu_0(tmp_path):
    (row,) = run(tmp_path, "zero", "--gpus", "0", parameters={"x": {"values": [1.0]}})
    m = row["metrics"]
    assert row["status"] == "done", row
    assert m["visible"].split(",")[int(m["device_index"])] == "0"


def test_a_program_script_runs_on_cuda(tmp_path):
    (row,) = run(
        tmp_path,
        "script",
        program=str(ROOT / "tests" / "support" / "programs" / "cuda_program.py"),
        train_loop=None,  # the script is the trial, not the module's loop
        parameters={"x": {"values": [2.0]}, "num_gpus": {"value": 1}},
    )
    assert row["status"] == "done", row.get("error")
    assert row["metrics"]["score"] == 2.0 and row["metrics"]["on_cuda"] == 1.0, row


def test_twenty_trials_on_one_warm_worker_leave_gpu_memory_flat(tmp_path):
    """Each trial makes and destroys raysweep's NCCL group on the same worker: no memory and no
    communicator is left behind (a leaked communicator holds GPU memory, so reserved would grow)."""
    rows = run(tmp_path, "flat", parameters={"x": {"values": list(range(20))}}, base_config={"hold_mib": 256})
    assert [r["status"] for r in rows] == ["done"] * 20
    assert len({r["metrics"]["pid"] for r in rows}) == 1  # one warm worker ran them all
    assert {r["metrics"]["own_group"] for r in rows} == {0.0}  # every trial's group was raysweep's
    # The process's whole footprint, NCCL's buffers included. It may fall (the driver frees what it
    # cached) but never climbs: a communicator leaked per trial would add its buffers every trial.
    used = [r["metrics"]["device_used_mib"] for r in rows[1:]]
    half = len(used) // 2
    assert max(used[half:]) <= max(used[:half]) + 64, used
    allocated = [r["metrics"]["allocated_at_start_mib"] for r in rows[1:]]
    reserved = [r["metrics"]["reserved_at_start_mib"] for r in rows[1:]]
    assert max(allocated) == min(allocated) and max(reserved) == min(reserved), (allocated, reserved)
    assert allocated[0] < 256 and reserved[0] < 256  # the 256 MiB a trial held is not left behind


def test_a_trial_out_of_gpu_memory_fails_with_a_sentence_and_the_next_trial_runs(tmp_path):
    rows = run(tmp_path, "oom", parameters={"x": {"values": [1, 2, 3]}}, base_config={"oom_at": 2})
    assert [r["status"] for r in rows] == ["done", "failed", "done"], rows
    assert "CUDA out of memory" in rows[1]["error"]
    assert rows[2]["metrics"]["allocated_at_start_mib"] < 256
