"""cluster.yaml is a config `ray up` accepts (checked against the schema Ray's autoscaler ships); `run --gpus`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

ROOT = Path(__file__).resolve().parents[2]


def test_cluster_yaml_validates_against_rays_schema():
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    validate_config(prepare_config(config))  # what `ray up` does: fill defaults, check the schema
    slots = {name: t["resources"].get("raysweep_slot") for name, t in config["available_node_types"].items()}
    assert slots == {"head": None, "gpu_worker_8x": 8}
    assert any("torch==2.13.0" in c for c in config["setup_commands"])
    starts = config["head_start_ray_commands"][-1:] + config["worker_start_ray_commands"][-1:]
    assert all("RAY_AUTH_MODE=token ray start" in c for c in starts)  # token auth on every node
    assert config["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"


def test_the_schema_check_catches_a_bad_key():
    import jsonschema

    config = yaml.safe_load((ROOT / "cluster.yaml").read_text()) | {"max_wokers": 3}
    with pytest.raises(jsonschema.ValidationError, match="max_wokers"):
        validate_config(config)


# --gpus: which GPUs the embedded Ray may use. The check is a pure function of the flag and the
# number of GPUs present, so it is tested here for any machine; the CLI refusals run on this one.
@pytest.mark.parametrize(
    ("text", "count", "expected"),
    [("0", 1, (0,)), ("0,1,2,3", 8, (0, 1, 2, 3)), ("5, 7", 8, (5, 7)), ("3,1", 4, (3, 1))],
)
def test_gpu_set_accepts_existing_indices(text, count, expected):
    from raysweep.driver.cluster import parse_gpu_set

    assert parse_gpu_set(text, count) == expected


@pytest.mark.parametrize(
    ("text", "count", "message"),
    [
        ("0,4", 4, "--gpus 0,4: GPU 4 does not exist; this machine has 4 (GPUs 0-3)"),
        ("1", 1, "--gpus 1: GPU 1 does not exist; this machine has 1 (GPU 0)"),
        ("0", 0, "--gpus 0 needs GPUs, but this machine has none that CUDA can see"),
        ("0,0", 2, "--gpus 0,0 names GPU 0 twice"),
        ("a,1", 2, "--gpus must be comma-separated GPU indices such as 0,1,2,3, got 'a,1'"),
        ("-1", 2, "got '-1'"),
        ("", 2, "got ''"),
    ],
)
def test_gpu_set_refuses_with_a_sentence(text, count, message):
    from raysweep.driver.cluster import parse_gpu_set
    from raysweep.errors import UserError

    with pytest.raises(UserError, match=re.escape(message)):
        parse_gpu_set(text, count)


@pytest.mark.parametrize(
    ("gpus", "inherited", "expected"),
    [((0, 1), None, "0,1"), ((2,), "", "2"), ((0, 2), "4,5,6", "4,6"), ((1,), "GPU-aa, GPU-bb", "GPU-bb")],
)
def test_gpu_indices_count_the_devices_already_visible(gpus, inherited, expected):
    from raysweep.driver.cluster import cuda_visible_devices

    assert cuda_visible_devices(gpus, inherited) == expected


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "raysweep", "run", *args], capture_output=True, text=True, cwd=ROOT, env=env
    )


def test_gpus_on_a_machine_without_gpus_is_refused_before_any_run_dir(tmp_path):
    import torch

    if torch.cuda.device_count():
        pytest.skip("this machine has GPUs")
    out = _run_cli("search_spaces/smoke.yaml", "--gpus", "0,1", "--storage", str(tmp_path))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip() == (
        "raysweep: --gpus 0,1 needs GPUs, but this machine has none that CUDA can see; "
        "leave --gpus out to run each trial's workers on CPUs"
    )
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        (
            ["--gpus", "0"],
            "--gpus 0 confines the Ray that raysweep starts here; with --address 127.0.0.1:1 each node's GPUs",
        ),
        (["--dashboard-host", "0.0.0.0"], "--dashboard-host 0.0.0.0 applies to the Ray that raysweep starts here"),
    ],
)
def test_embedded_only_flags_with_address_are_refused(tmp_path, flag, message):
    out = _run_cli("search_spaces/smoke.yaml", "--address", "127.0.0.1:1", *flag, "--storage", str(tmp_path))
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr
    assert not any(tmp_path.iterdir())
