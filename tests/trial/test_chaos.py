"""A sweep through faults on the two-node test cluster (bench/chaos.py runs it and says what it
injects): a node killed and started again, the driver killed then resumed, a Ctrl-C then resumed.
Marked slow (minutes): `pytest -m slow`; `python -m bench.chaos` writes its figures."""

from __future__ import annotations

import pytest

from bench.chaos import scenario

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def test_a_sweep_through_a_lost_node_a_killed_driver_and_a_ctrl_c_ends_whole(tmp_path):
    result = scenario(tmp_path, trials=8, epochs=6)
    summary = {k: v for k, v in result.items() if k != "final_output_tail"}
    assert result["interrupted_exit"] == 130 and result["final_exit"] == 0, result["final_output_tail"]
    assert sum(result["statuses"].values()) == 8 and sorted(set(result["sizes"])) == [1, 2, 4], summary
    assert result["unfinished"] == [] and result["failed_without_a_sentence"] == [], summary
    assert result["trials_restarted"] >= 1, summary  # the faults hit running trials
    assert result["restarts_that_lost_a_checkpoint"] == 0, summary  # restarts go on from their checkpoints
    assert result["ranks_left_after_driver_kill"] == 0, summary
    assert result["processes_left"] == [] and result["placement_groups_left"] == [], summary
    assert result["show_agrees"], summary
