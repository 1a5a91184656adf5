"""Shared fixtures: a real local Ray cluster started with ``ray start``, and the CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
# CI runs `.ci/run` with CI=true: there a missing tool (W&B's engine, Chromium) fails the test it
# would skip on a developer's machine. One rule for every such test.
IN_CI = os.environ.get("CI") == "true"
RAY = str(Path(sys.executable).with_name("ray"))
# The tests' loops build no optimizer, so their warm workers import no torch._dynamo ahead of
# their first trial (2 s of a CPU each, 12% of a small sweep's CPU on 2 cores);
# test_warm_workers.py runs the default.
os.environ.setdefault("RAYSWEEP_WARM_IMPORTS", "")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_cluster():
    """A one-node Ray cluster (2 CPUs, 2 raysweep worker slots), shared by a test module.

    With its dashboard, as clusters have by default: Ray Train cleans up the worker group of a
    trial the scheduler stopped through the dashboard's State API.
    """
    yield from one_node_cluster(cli_env())


@pytest.fixture(scope="session")
def s3():
    """A local S3 API (moto's server, ``tests/support/s3.py``); ``s3.bucket()`` makes a bucket per test."""
    from s3 import serve

    yield from serve()


def one_node_cluster(env: dict[str, str]):
    """``ray_cluster``'s cluster, its processes started with ``env`` (a module's own fixture)."""
    port = free_port()
    ensure_ray_token()
    subprocess.run(
        [
            RAY,
            "start",
            "--head",
            f"--port={port}",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=2",
            "--resources",
            json.dumps({"raysweep_slot": 2}),
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={free_port()}",
            "--disable-usage-stats",
        ],
        check=True,
        capture_output=True,
        cwd=ROOT,
        env=env,
    )
    try:
        yield f"127.0.0.1:{port}"
    finally:
        stop_cluster(f"127.0.0.1:{port}")


def cluster_processes(address: str) -> list[psutil.Process]:
    """This cluster's processes only: those whose command line names its GCS port (the GCS,
    every node's raylet and agents), and everything they started (workers, actors)."""
    port = address.rpartition(":")[2]
    roots = []
    for p in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(p.info["cmdline"] or [])
        if p.pid != os.getpid() and re.search(rf"[:=]{port}\b", cmdline) and "ray" in cmdline:
            roots.append(p)
    found = {p.pid: p for p in roots}
    for p in roots:
        try:
            found |= {c.pid: c for c in p.children(recursive=True)}
        except psutil.NoSuchProcess:
            pass
    return list(found.values())


def stop_cluster(*addresses: str) -> None:
    """End this test's clusters, and no other Ray on the machine (``ray stop`` would end them all).
    Several clusters end together. The GCS and the autoscaler's monitor outlive SIGTERM by 20 s
    and more, so whatever is left after a short grace is killed: the cluster is the test's own."""
    victims = [p for address in addresses for p in cluster_processes(address)]
    for p in victims:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(victims, timeout=3)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


def kill_tree(pid: int) -> None:
    """A process and all it started (an embedded Ray's GCS and raylet are its driver's children)."""
    try:
        parent = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    for p in [*parent.children(recursive=True), parent]:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


def ensure_ray_token() -> None:
    """Write ~/.ray/auth_token if there is none: `ray start` with token authentication needs one
    (an embedded ``ray.init`` writes it itself), and on a fresh machine there is none yet."""
    subprocess.run([RAY, "get-auth-token", "--generate"], check=True, capture_output=True)


def screenshot_path(tmp_path: Path, name: str) -> Path:
    """Where a browser test saves its screenshot: ``docs/`` with RAYSWEEP_DOCS_SCREENSHOTS=1
    (to refresh the guides' pictures), else the test's tmp dir, so a test run leaves the tree clean."""
    return ROOT / "docs" / name if os.environ.get("RAYSWEEP_DOCS_SCREENSHOTS") == "1" else tmp_path / name


def write_spec(path: Path, **doc) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def cli_env() -> dict[str, str]:
    # The test cluster keeps Ray's token authentication on; an explicit --address needs this.
    env = os.environ | {"PYTHONPATH": str(ROOT), "WANDB_SILENT": "true", "RAY_AUTH_MODE": "token"}
    env.pop("WANDB_API_KEY", None)
    return env


def raysweep(
    *args: str, timeout: float = 600, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run the CLI as a user would (``env``: variables set besides); output captured, never a shell."""
    return subprocess.run(
        [sys.executable, "-m", "raysweep", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env=cli_env() | (env or {}),
    )


def show(run_dir: Path) -> dict:
    out = raysweep("show", str(run_dir), "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def start_sweep(spec: Path, cluster: str) -> subprocess.Popen:
    """``raysweep run`` in the background on ``cluster`` (runs under the spec's dir), output captured."""
    cmd = [
        sys.executable,
        "-m",
        "raysweep",
        "run",
        str(spec),
        "--address",
        cluster,
        "--storage",
        str(spec.parent / "runs"),
        "--wandb",
        "disabled",
    ]
    driver = subprocess.Popen(cmd, cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _STARTED.append(driver)
    return driver


_STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_sweep_outlives_its_test():
    """A test that failed before its driver ended must not leave it holding the module's shared
    cluster: the next test would wait behind it (a cascade that once hid the first failure)."""
    yield
    while _STARTED:
        driver = _STARTED.pop()
        if driver.poll() is None:
            kill_tree(driver.pid)
            driver.communicate()


def driver_script(cluster: str, body: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``body`` run as its own Ray driver on ``cluster`` (``ray`` and ``time`` imported; Ray reads
    token authentication at import)."""
    code = f"import ray, time\nray.init(address={cluster!r}, logging_level='ERROR')\n" + body
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=cli_env(), cwd=ROOT
    )


def wait_for_iterations(driver: subprocess.Popen, trials_file: Path, iterations: int, timeout: float = 240) -> None:
    """Until the sweep's first trial has reported ``iterations`` times (the driver must stay up)."""
    from raysweep.runs.files import read_trials

    deadline = time.time() + timeout
    while time.time() < deadline:
        assert driver.poll() is None, driver.communicate()
        rows = read_trials(trials_file) if trials_file.exists() else []
        if rows and (rows[0].get("iterations") or 0) >= iterations:
            return
        time.sleep(0.3)
    driver.send_signal(signal.SIGINT)  # what it printed says why
    try:
        out, err = driver.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        driver.kill()
        out, err = driver.communicate()
    raise AssertionError(f"no trial reported {iterations} times in {timeout:g} s: {rows}\n{out[-3000:]}\n{err[-3000:]}")


def processes(marker: str, cluster: str) -> list[psutil.Process]:
    """Live processes of ``cluster`` whose command line names ``marker`` (Ray titles an actor's
    process by its class: ``DDPWorker`` for warm DDP workers, ``ImplicitFunc`` for Tune trial
    actors). Another Ray on the machine is not counted."""
    found = []
    for p in cluster_processes(cluster):
        try:
            if marker in " ".join(p.cmdline()):
                found.append(p)
        except psutil.NoSuchProcess:
            pass
    return found


class WandbOracle:
    """W&B's sweep engine in its own venv (tests/support/wandb_oracle.py), asked one JSON line at a time."""

    def __init__(self, python: Path):
        self.proc = subprocess.Popen(
            [str(python), str(ROOT / "tests" / "support" / "wandb_oracle.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, op: str, **request) -> dict:
        self.proc.stdin.write(json.dumps({"op": op, **request}) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        assert "error" not in answer, answer["error"]
        return answer


@pytest.fixture(scope="session")
def wandb_oracle():
    python = ROOT / ".venv-wandb" / "bin" / "python"
    if not python.exists():
        if IN_CI:
            pytest.fail("W&B's engine is missing: `make test` creates .venv-wandb (sweeps==0.3.0)")
        pytest.skip("W&B's engine is not installed: run `make .venv-wandb/bin/python`")
    oracle = WandbOracle(python)
    yield oracle
    oracle.proc.stdin.close()
    oracle.proc.wait(timeout=30)


def chromium() -> str:
    """Debian's chromium (``.ci/run`` installs it): CI fails without it, a developer's run skips."""
    path = os.environ.get("BROWSER_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
    if Path(path).exists():
        return path
    if IN_CI:
        pytest.fail(f"no Chromium at {path}: .ci/run installs Debian's chromium before the tests")
    pytest.skip("needs Chromium: apt-get install chromium")
