"""A trial's old checkpoints are deleted only once the run dir's saved experiment state names
newer ones (``driver/checkpoint_keep.py``): a driver killed at any moment leaves a state whose
checkpoints exist, for ``resume``.

Tune's callback hooks are called here by hand with real ``ray.tune.Checkpoint``s, in the order
Tune calls them; the state file stands for the copy Tune makes of a staged state.

Modules: driver/checkpoint_keep.py, private_api.py (``saved_experiment_state``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

from ray import tune

from raysweep.driver.checkpoint_keep import KeepNewestCheckpoints

TRIAL = SimpleNamespace(trial_id="t1")


def _write_checkpoint(run_dir: Path, keeper: KeepNewestCheckpoints, index: int) -> Path:
    path = run_dir / "t1" / f"checkpoint_{index:06d}"
    path.mkdir(parents=True)
    (path / "model.pt").write_text(str(index))
    keeper.on_checkpoint(iteration=index, trials=[TRIAL], trial=TRIAL, checkpoint=tune.Checkpoint.from_directory(path))
    return path


def _stage(keeper: KeepNewestCheckpoints) -> None:
    """Tune stages a state (``get_state``), then copies it to the run dir after."""
    keeper.get_state()
    time.sleep(0.02)


def _copy_state(run_dir: Path) -> None:
    state = run_dir / "experiment_state-2026-11-28_00-00-00.json"
    state.write_text("{}")
    now = time.time()
    os.utime(state, (now, now))
    time.sleep(0.02)


def _kept(run_dir: Path) -> list[str]:
    return sorted(p.name for p in (run_dir / "t1").iterdir())


def test_no_checkpoint_is_deleted_while_the_run_dirs_state_may_still_name_it(tmp_path: Path):
    keeper = KeepNewestCheckpoints(tmp_path, keep=2)
    _stage(keeper)
    _copy_state(tmp_path)  # state 0 names no checkpoint
    for i in range(3):
        _write_checkpoint(tmp_path, keeper, i)
    _stage(keeper)  # state 1 names checkpoint 2, not yet copied
    for i in range(3, 5):
        _write_checkpoint(tmp_path, keeper, i)
    assert _kept(tmp_path) == [f"checkpoint_{i:06d}" for i in range(5)], "Tune's own rule would keep 3 and 4"
    _stage(keeper)  # state 2 staged; the run dir still holds state 0
    assert len(_kept(tmp_path)) == 5


def test_once_a_newer_state_has_reached_the_run_dir_the_old_checkpoints_go(tmp_path: Path):
    keeper = KeepNewestCheckpoints(tmp_path, keep=2)
    for i in range(3):
        _write_checkpoint(tmp_path, keeper, i)
    _stage(keeper)  # state 1: checkpoints 0-2
    _copy_state(tmp_path)
    for i in range(3, 6):
        _write_checkpoint(tmp_path, keeper, i)
    _stage(keeper)  # state 2: checkpoints 0-5; a copy after it holds state 1 at least
    assert len(_kept(tmp_path)) == 6, "the copy before state 2 was staged may hold state 1 only just"
    _copy_state(tmp_path)
    _stage(keeper)  # state 3; the run dir holds state 2 or later, so state 1's thinning is safe
    assert _kept(tmp_path) == [f"checkpoint_{i:06d}" for i in range(1, 6)]


def test_at_the_sweeps_end_the_last_saved_state_keeps_only_the_newest(tmp_path: Path):
    keeper = KeepNewestCheckpoints(tmp_path, keep=2)
    for i in range(4):
        _write_checkpoint(tmp_path, keeper, i)
    _stage(keeper)  # Tune's final save, waited for
    _copy_state(tmp_path)
    keeper.on_experiment_end(trials=[TRIAL])
    assert _kept(tmp_path) == ["checkpoint_000002", "checkpoint_000003"]


def test_a_sweep_that_ended_before_its_last_state_was_copied_deletes_nothing(tmp_path: Path):
    keeper = KeepNewestCheckpoints(tmp_path, keep=2)
    for i in range(4):
        _write_checkpoint(tmp_path, keeper, i)
    _stage(keeper)
    keeper.on_experiment_end(trials=[TRIAL])  # no state in the run dir at all
    assert len(_kept(tmp_path)) == 4
