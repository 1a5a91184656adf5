"""The embedded Ray's exposure: its dashboard (opened in a real Chromium during a sweep, behind
Ray's token login), loopback by default, and a W&B key that never reaches the run dir.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import psutil
import pytest
from conftest import ROOT, chromium, kill_tree, screenshot_path, show, write_spec

from raysweep.driver.cluster import exposure_warning

SECRET = "wandb-fake-secret-5f0c1d2e3a4b"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1"])
def test_no_warning_for_loopback(host):
    assert exposure_warning(host) is None


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "myhost.example"])
def test_a_dashboard_beyond_loopback_is_warned_about(host):
    assert exposure_warning(host).startswith(
        f"warning: the Ray dashboard listens on {host}, so other machines can reach it;"
    )
    assert "token authentication stays on" in exposure_warning(host)


def _listen_hosts(port: int) -> set[str]:
    return {
        c.laddr.ip for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    }


@pytest.mark.ray
def test_dashboard_shows_the_sweep_and_the_run_dir_holds_no_wandb_key(tmp_path):
    from playwright.sync_api import sync_playwright

    browser_path = chromium()
    spec = write_spec(
        tmp_path / "dash.yaml",
        name="dash",
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        train_loop="train_loops.smoke:train",
        base_config={"epochs": 12, "sleep": 1.0},
        parameters={"x": {"values": [0.1, 0.3, 0.5]}},
    )
    env = os.environ | {
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "WANDB_SILENT": "true",
        "WANDB_API_KEY": SECRET,
    }
    env.pop("RAY_AUTH_MODE", None)  # the embedded Ray keeps token auth on by itself
    cmd = [
        sys.executable,
        "-m",
        "raysweep",
        "run",
        str(spec),
        "--storage",
        str(tmp_path / "runs"),
        "--wandb",
        "offline",
    ]
    driver = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in driver.stdout:
            lines.append(line)
            if match := re.search(r"Ray dashboard (http://\S+)", line):
                url = match.group(1)
                break
        else:
            pytest.fail("no dashboard address printed:\n" + "".join(lines) + driver.stderr.read())
        session = own_session(driver.pid)
        address = urlparse(url)
        assert address.hostname == "127.0.0.1"
        assert _listen_hosts(address.port) == {"127.0.0.1"}  # loopback only

        token = (Path.home() / ".ray" / "auth_token").read_text().strip()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=browser_path, args=["--no-sandbox", "--disable-gpu"])
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(url)
                login = page.get_by_placeholder("Enter your authentication token")
                login.wait_for(timeout=60_000)  # Ray's login prompt: nothing is shown without the token
                login.fill(token)
                # Ray checks the token, then reloads the page; going on before that reload is done
                # races it (a goto then waits for a load that the reload replaced).
                with page.expect_event("load", timeout=60_000):
                    login.press("Enter")
                page.goto(f"{url}/#/jobs")
                page.get_by_text("raysweep run").first.wait_for(timeout=60_000)
                page.goto(f"{url}/#/actors")
                # A trial running: its actor's own row shows ALIVE (the page refreshes itself).
                trial_row = page.get_by_role("row").filter(has_text="ImplicitFunc")
                trial_row.filter(has=page.get_by_text("ALIVE", exact=True)).first.wait_for(timeout=90_000)
                page.screenshot(path=str(screenshot_path(tmp_path, "dashboard.png")))
                # What the dashboard knows of every actor: the driver writes the W&B runs itself,
                # so no actor of the sweep holds the key (Ray's W&B callback put it in one's runtime_env).
                actors = page.request.get(f"{url}/logical/actors").text()
                assert "ImplicitFunc" in actors and "DDPWorker" in actors and SECRET not in actors
                assert "LoggingActor" not in actors
            finally:
                browser.close()
        stdout, stderr = driver.communicate(timeout=300)
    finally:
        kill_tree(driver.pid)  # the embedded Ray's processes are the driver's children
    assert driver.returncode == 0, stderr + stdout
    assert "warning" not in stderr

    run_dir = tmp_path / "runs" / "dash"
    assert len(show(run_dir)["trials"]) == 3
    assert len(list(run_dir.glob("*/wandb/offline-run-*/*.wandb"))) == 3  # W&B did run, offline
    assert json.loads((run_dir / "run.json").read_text())["wandb"] == "offline"
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert run_dir / "driver.log" in files and len(files) > 10
    leaked = [str(p.relative_to(run_dir)) for p in files if SECRET.encode() in p.read_bytes()]
    assert leaked == []
    # Ray's session dir (its logs, runtime_env_agent.log among them): the key is in no file.
    logged = [p for p in session.rglob("*") if p.is_file() and not p.is_symlink()]
    assert any(p.name.startswith("runtime_env") for p in logged), "Ray's runtime_env logs were expected"
    assert [str(p) for p in logged if SECRET.encode() in p.read_bytes()] == []


def own_session(driver_pid: int) -> Path:
    """The session dir of the Ray this driver started: named in its processes' command lines (a
    sweep run beside the suite has a session dir of its own in the same temp dir)."""
    found = set()
    for child in psutil.Process(driver_pid).children(recursive=True):
        try:
            found |= set(re.findall(r"/tmp/ray/session_[0-9_\-]+", " ".join(child.cmdline())))
        except psutil.NoSuchProcess:
            continue
    (session,) = found
    return Path(session)
