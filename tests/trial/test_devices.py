"""Which GPU a rank uses (``trial/devices.py``), with no GPU: Ray's names for GPUs, a warm
worker's one GPU for life, and the sentence a rank raises when CUDA cannot see its GPU (a fake
NVIDIA device file stands for a GPU node whose torch sees none, as this CPU build's does)."""

from __future__ import annotations

import pytest

from raysweep.env import CUDA_VISIBLE_DEVICES, GPU_DEVICE_FILES
from raysweep.trial import devices


def test_ray_names_a_gpu_by_its_entry_in_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv(CUDA_VISIBLE_DEVICES, "GPU-aa, GPU-bb ,")
    assert devices.visible() == ["GPU-aa", "GPU-bb"]
    assert devices.assigned(["GPU-bb"]) == "cuda:1"  # a UUID, where Ray put it
    assert devices.assigned([]) == "cpu"
    monkeypatch.setenv(CUDA_VISIBLE_DEVICES, "")
    assert devices.visible() == [] and devices.assigned([3]) == "cuda:0"  # Ray hid the rest: its one GPU


def test_a_warm_worker_keeps_its_one_gpu_for_life(monkeypatch):
    monkeypatch.setenv(CUDA_VISIBLE_DEVICES, "")  # Ray up to 2.55: an actor asking for no GPU sees none
    assert devices.pin("2", None) == "cuda:0" and devices.visible() == ["2"]
    assert devices.pin("2", "2") == "cuda:0"
    with pytest.raises(RuntimeError, match=r"serves GPU '2' and cannot take GPU '3' \(one CUDA context each\)"):
        devices.pin("3", "2")
    assert devices.visible() == ["2"]  # refused before it changed anything


def test_a_rank_cuda_cannot_see_says_which_gpu_and_what_cuda_sees(monkeypatch, tmp_path):
    monkeypatch.setenv(CUDA_VISIBLE_DEVICES, "5,7")
    monkeypatch.setenv(GPU_DEVICE_FILES, str(tmp_path / "nvidia*"))
    devices.check_usable("cuda:1")  # no device file: GPUs Ray advertises here are fake, nothing to check
    (tmp_path / "nvidia0").touch()
    devices.check_usable("cpu")
    with pytest.raises(RuntimeError) as raised:
        devices.check_usable("cuda:1")
    text = str(raised.value)
    assert text.startswith("this rank was given GPU '7' as cuda:1, but CUDA here sees 0 device(s)"), text
    assert "CUDA_VISIBLE_DEVICES='5,7'" in text and text.endswith("the rank cannot use its GPU")
