"""``resume`` goes on from the checkpoints on storage, whatever Tune's saved state names
(``driver/checkpoints.py``): a run dir whose state names a checkpoint that is gone is resumed, each
trial from its newest stored checkpoint or from scratch, never failed for it.

The moment that leaves such a state (a driver killed between Tune deleting a trial's old checkpoint
and saving the state that names a newer one) is made here by hand: after a Ctrl-C, one trial's
newest checkpoint is deleted, and all of another's. Killing the driver at random moments until it
happens is ``make test-slow``'s (``test_a_driver_killed_at_random_moments``).
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, cli_env, show, write_spec

from raysweep.runs.files import TRIALS_FILE, read_trials

pytestmark = pytest.mark.ray
EPOCHS = 6


def _start(cluster: str, storage: Path, *args: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "raysweep", *args, "--address", cluster, "--storage", str(storage), "--quiet"]
    return subprocess.Popen(cmd, cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _spec(tmp_path: Path, name: str, trials: int, sleep: float) -> Path:
    return write_spec(
        tmp_path / f"{name}.yaml",
        name=name,
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        parameters={"x": {"values": [round(0.1 * i, 1) for i in range(trials)]}},
        raysweep={"train_loop": "train_loops.smoke:train", "base_config": {"epochs": EPOCHS, "sleep": sleep}},
    )


def _until(driver: subprocess.Popen, done, timeout: float = 240) -> None:
    deadline = time.time() + timeout
    while not done():
        assert driver.poll() is None and time.time() < deadline, driver.communicate()
        time.sleep(0.2)


def _every_epoch_once(run_dir: Path) -> dict[str, list[int]]:
    """Each trial's reports, as its result.json holds them: epochs 1..EPOCHS, each once."""
    out = {}
    for row in read_trials(run_dir / TRIALS_FILE):
        lines = (Path(row["trial_dir"]) / "result.json").read_text().splitlines()
        out[row["trial_id"]] = [int(json.loads(line)["epoch"]) for line in lines]
    return out


def test_a_state_naming_a_gone_checkpoint_resumes_from_the_newest_stored_or_from_scratch(tmp_path, ray_cluster):
    """Guarantee: "A driver killed at any moment leaves a run dir that `resume` completes: each trial goes
    on from the newest of its checkpoints that exists on storage (one a report in its `result.json`
    names), or starts over when none does, never failed for a checkpoint Tune's saved state names and
    that is gone (a driver killed between Tune deleting a trial's old checkpoint and saving the state
    that names a newer one used to leave one)."
    """
    storage = tmp_path / "runs"
    run_dir = storage / "c"
    # 1 s epochs: 3 s from the third report to a trial's end, for the Ctrl-C to stop both under load
    driver = _start(ray_cluster, storage, "run", str(_spec(tmp_path, "c", 2, 1.0)), "--wandb", "disabled")
    trials_file = run_dir / TRIALS_FILE

    def two_trials_three_epochs_in() -> bool:
        rows = read_trials(trials_file) if trials_file.exists() else []
        return len([r for r in rows if (r.get("iterations") or 0) >= 3]) >= 2

    _until(driver, two_trials_three_epochs_in)
    driver.send_signal(signal.SIGINT)
    out, err = driver.communicate(timeout=120)
    assert driver.returncode == 130, out + err
    rows = [r for r in read_trials(trials_file) if r["status"] == "pending"]
    assert len(rows) == 2, rows
    newest_gone, all_gone = (Path(r["trial_dir"]) for r in rows)
    stored = sorted(newest_gone.glob("checkpoint_*"))
    assert len(stored) >= 2  # Tune keeps two, and the one it saved as the sweep stopped
    for path in [stored[-1], *all_gone.glob("checkpoint_*")]:
        subprocess.run(["rm", "-rf", str(path)], check=True)

    resumed = _start(ray_cluster, storage, "resume", "c")
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, out + err
    assert [t["status"] for t in show(run_dir)["trials"]] == ["done", "done"]
    assert _every_epoch_once(run_dir) == {r["trial_id"]: list(range(1, EPOCHS + 1)) for r in rows}
    went_on = {}
    for path in (newest_gone, all_gone):
        firsts = [json.loads(line) for line in (path / "result.json").read_text().splitlines()]
        went_on[path] = max(r["resumed_from"] for r in firsts)  # the checkpoint's epoch it went on from
    assert went_on[newest_gone] == int(stored[-2].name.rsplit("_", 1)[1]) + 1  # the newest one left
    assert went_on[all_gone] == 0  # from scratch


@pytest.mark.slow  # make test: the state naming a gone checkpoint, made by hand (above)
def test_a_driver_killed_at_random_moments_is_resumed_to_the_end_every_epoch_once(tmp_path, ray_cluster):
    """Six SIGKILLs at random moments of a sweep that checkpoints every epoch, each followed by
    ``resume``: the sweep ends whole, no trial failed, every epoch reported once."""
    rng = random.Random(int(time.time()))
    storage = tmp_path / "runs"
    run_dir = storage / "r"
    driver = _start(ray_cluster, storage, "run", str(_spec(tmp_path, "r", 3, 0.3)), "--wandb", "disabled")
    for _ in range(6):
        _until(driver, lambda: (run_dir / TRIALS_FILE).exists())
        time.sleep(rng.uniform(1.0, 6.0))
        if driver.poll() is not None:
            break
        driver.kill()
        driver.communicate()
        driver = _start(ray_cluster, storage, "resume", "r")
    out, err = driver.communicate(timeout=600)
    assert driver.returncode == 0, out + err
    trials = show(run_dir)["trials"]
    assert [t["status"] for t in trials] == ["done"] * 3, trials
    assert set(map(tuple, _every_epoch_once(run_dir).values())) == {tuple(range(1, EPOCHS + 1))}
