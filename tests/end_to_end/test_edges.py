"""The edges a new user hits first (issue 25): bad input exits 2 with one sentence and writes
nothing, a wrong address fails fast, Ctrl-C saves the sweep for ``resume``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import ROOT, cli_env, kill_tree, raysweep, show, write_spec

SPACE = ROOT / "tests" / "support" / "specs" / "conditional" / "space.py"
SMOKE = {
    "method": "grid",
    "metric": {"name": "score"},
    "parameters": {"x": {"values": [0.1, 0.2]}},
    "raysweep": {"train_loop": "train_loops.smoke:train", "base_config": {"epochs": 2}},
}


def refused(out: subprocess.CompletedProcess, pattern: str) -> None:
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    assert __import__("re").search(pattern, out.stderr), out.stderr


@pytest.mark.parametrize(
    "change, pattern",
    [
        (
            {"parameters": {"num_gpus": {"values": ["two", 0, -1, 1.5]}}},
            r"parameters.num_gpus: num_gpus is each trial's number of DDP workers: whole numbers >= 1, got 'two'",
        ),
        ({"parameters": {"num_gpus": {"min": 0.5, "max": 2.0}}}, r"parameters.num_gpus: .*got distribution uniform"),
        ({"raysweep": SMOKE["raysweep"] | {"num_gpus": 0}}, r"raysweep.num_gpus: must be an integer >= 1, got 0"),
        ({"parameters": {"x": {"values": [float("nan"), 1]}}}, r"parameters.x.values.0: nan is not a finite number"),
        ({"raysweep": SMOKE["raysweep"] | {"train_loop": "tests.no_such_module:train"}}, r"train_loop|No module named"),
        ({"raysweep": SMOKE["raysweep"] | {"train_loop": "os:sep"}}, r"train_loop 'os:sep' is a str, not a function"),
        (  # W&B's new format: what W&B's sweep scheduler refuses at start, refused before anything starts
            {"method": "custom", "scheduler": {"engine": "optuna", "source": str(SPACE), "search_space": "no_such_fn"}},
            r"scheduler: W&B's sweep scheduler refuses this sweep at start: .*space.py has no attribute 'no_such_fn'",
        ),
        (
            {
                "method": "custom",
                "scheduler": {"engine": "optuna", "source": str(SPACE), "search_space": "suggests_only"},
            },
            r"'suggests_only' in .*space.py returned NoneType, not a dict",
        ),
    ],
)
def test_bad_spec_values_exit_2_with_a_sentence_and_write_nothing(tmp_path, change, pattern):
    spec = write_spec(tmp_path / "s.yaml", **(SMOKE | change))
    out = raysweep("run", str(spec), "--storage", str(tmp_path / "runs"))
    refused(out, pattern)
    assert not (tmp_path / "runs" / "s").exists()


@pytest.mark.parametrize(
    "text, pattern",
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00binary", r"not a text file"),
        (b"a: &a [*a]\nmethod: grid\n", r"cycle"),
        (
            (
                "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n"
                + "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]\n" for i in range(1, 9))
                + "method: grid\n"
            ).encode(),
            r"more than 1,000,000 values",
        ),
    ],
    ids=["binary", "circular", "billion-laughs"],
)
def test_hostile_files_are_refused_at_once(tmp_path, text, pattern):
    path = tmp_path / "s.yaml"
    path.write_bytes(text)
    out = raysweep("validate", str(path), timeout=60)
    refused(out, pattern)


@pytest.mark.parametrize(
    "source, pattern",
    [
        ("def train(config):\n    return (\n", r"could not be imported: SyntaxError"),
        ("raise RuntimeError('no data here')\n", r"could not be imported: RuntimeError: no data here"),
    ],
    ids=["syntax-error", "raises-at-import"],
)
def test_a_train_loop_that_cannot_be_imported_is_a_user_error(tmp_path, source, pattern):
    (tmp_path / "myloop.py").write_text(source)  # loops are imported from where `run` starts
    spec = write_spec(tmp_path / "s.yaml", **(SMOKE | {"raysweep": SMOKE["raysweep"] | {"train_loop": "myloop:train"}}))
    out = raysweep("run", str(spec), "--storage", str(tmp_path / "runs"), cwd=tmp_path)
    refused(out, pattern)
    assert not (tmp_path / "runs").exists()


def test_a_binary_base_config_is_refused(tmp_path):
    (tmp_path / "base.yaml").write_bytes(b"\x00\x01\x02\xff")
    spec = write_spec(tmp_path / "s.yaml", **(SMOKE | {"raysweep": SMOKE["raysweep"] | {"base_config": "base.yaml"}}))
    refused(raysweep("validate", str(spec)), r"raysweep.base_config: .*not a text file")


def test_nan_values_never_reach_validate_sample_as_invalid_json(tmp_path):
    spec = write_spec(tmp_path / "s.yaml", **(SMOKE | {"parameters": {"x": {"value": float("inf")}}}))
    refused(raysweep("validate", str(spec), "--sample", "2"), r"parameters.x.value: inf is not a finite number")


@pytest.mark.parametrize("name", ["..", "."])
def test_names_that_leave_storage_are_refused(tmp_path, name):
    spec = write_spec(tmp_path / "s.yaml", **SMOKE)
    storage = tmp_path / "runs" / "inner"
    out = raysweep("run", str(spec), "--storage", str(storage), "--name", name)
    assert out.returncode == 2, out.stderr
    assert not (storage.parent / "spec.json").exists() and not (tmp_path / "runs" / "spec.json").exists()
    assert not any(tmp_path.rglob("run.json"))


def test_storage_that_is_a_file_and_a_negative_seed_are_refused(tmp_path):
    spec = write_spec(tmp_path / "s.yaml", **SMOKE)
    (tmp_path / "afile").write_text("x")
    refused(raysweep("run", str(spec), "--storage", str(tmp_path / "afile")), r"--storage .*is a file")
    refused(
        raysweep("run", str(spec), "--seed", "-1", "--storage", str(tmp_path / "r")), r"--seed must be >= 0, got -1"
    )


def test_a_wrong_address_exits_2_and_leaves_nothing_to_block_the_retry(tmp_path):
    spec = write_spec(tmp_path / "s.yaml", **SMOKE)
    out = raysweep(
        "run", str(spec), "--address", "127.0.0.1:1", "--storage", str(tmp_path / "runs"), "--name", "n", timeout=120
    )
    refused(out, r"could not connect to the Ray cluster at 127.0.0.1:1: nothing answered there")
    assert not (tmp_path / "runs" / "n").exists()


def test_a_grid_of_two_billion_points_validates_and_samples(tmp_path):
    spec = write_spec(
        tmp_path / "s.yaml", **(SMOKE | {"parameters": {"a": {"min": 1, "max": 10**9}, "b": {"values": [1, 2]}}})
    )
    out = raysweep("validate", str(spec), "--json", timeout=60)
    assert out.returncode == 0 and '"grid_size": 2000000000' in out.stdout
    out = raysweep("validate", str(spec), "--sample", "3", timeout=60)
    assert out.returncode == 0 and out.stdout.count("\n") == 3


def test_legacy_top_level_keys_still_work_with_one_note(tmp_path):
    doc = {k: v for k, v in SMOKE.items() if k != "raysweep"} | SMOKE["raysweep"]
    out = raysweep("validate", str(write_spec(tmp_path / "s.yaml", **doc)))
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("note: raysweep's own keys belong under `raysweep:`") == 1


def _children(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


# The hint as the driver prints it: this interpreter, relative to the driver's cwd (ROOT) when under it.
PYTHON = Path(sys.executable)
RESUME = f"{PYTHON.relative_to(ROOT) if PYTHON.is_relative_to(ROOT) else PYTHON} -m raysweep resume"


@pytest.mark.ray
@pytest.mark.slow  # make test: Ctrl-C, SIGTERM and two Ctrl-Cs mid-sweep, then resume (test_interrupt)
@pytest.mark.parametrize("moment", ["while Ray starts", "once Ray is up"])
def test_ctrl_c_as_the_sweep_starts_exits_130_and_resume_runs_it(tmp_path, moment):
    """A Ctrl-C inside ray.init once crashed the interpreter's exit (139) and left a run dir that
    ``resume`` could not read (no Tune state: a traceback); one after it, a Tune state of no
    trials that Ray restores as one trial. Either way no trial had run: resume runs them all."""
    spec = write_spec(tmp_path / "s.yaml", **SMOKE)
    storage = tmp_path / "runs"
    driver = subprocess.Popen(
        [sys.executable, "-m", "raysweep", "run", str(spec), "--storage", str(storage), "--wandb", "disabled"],
        cwd=ROOT,
        env=cli_env() | {"PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    ray_processes: list[psutil.Process] = []
    try:
        if moment == "while Ray starts":  # its GCS is up; ray.init has seconds to go
            deadline = time.time() + 120
            while not any("gcs_server" in p.name() for p in _children(driver.pid)):
                assert driver.poll() is None and time.time() < deadline, driver.communicate()
                time.sleep(0.05)
            ray_processes = _children(driver.pid)
        else:  # the driver prints the sweep's first line once ray.init has returned
            first = driver.stdout.readline()
            assert first.startswith("sweep s: "), first + driver.communicate()[1]
        os.kill(driver.pid, signal.SIGINT)
        out, err = driver.communicate(timeout=120)
    finally:
        kill_tree(driver.pid)
    assert driver.returncode == 130, (out, err)
    assert "Traceback" not in err
    if moment == "while Ray starts":
        assert (
            f"interrupted while Ray was starting; no trial had run (start the sweep with: {RESUME} {storage / 's'})"
            in err
        )
        _, alive = psutil.wait_procs(ray_processes, timeout=30)  # Ray's processes end with their driver
        assert alive == [], alive
    else:
        assert f"sweep s interrupted; its state is saved. Continue it with: {RESUME} {storage / 's'}" in err
    assert show(storage / "s")["trials"] == []
    resumed = raysweep("resume", str(storage / "s"), timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "sweep s: no trial had started; starting it" in resumed.stdout
    rows = show(storage / "s")["trials"]
    assert sorted(r["config"]["x"] for r in rows) == [0.1, 0.2] and all(r["status"] == "done" for r in rows), rows


def test_ray_token_file_is_made_private(tmp_path, monkeypatch):
    from raysweep.driver.cluster import private_token_file

    monkeypatch.setenv("HOME", str(tmp_path))
    token = Path(tmp_path, ".ray", "auth_token")
    token.parent.mkdir()
    token.write_text("t")
    token.chmod(0o644)
    private_token_file()
    assert token.stat().st_mode & 0o777 == 0o600
