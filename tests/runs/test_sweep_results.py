"""A run dir's results stay typed to every reader (``RankedTrial``, ``SweepResults``), and the
public JSON is made from them in one place: ``show --json``, ``raysweep.load`` and the
DataFrame agree with the records.

Modules: ``runs/sweep_results.py``, ``runs/show.py``, ``runs/results.py``, ``runs/record.py``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from conftest import raysweep

from bench.readers import write_run_dir
from raysweep.runs.record import SweepRecord
from raysweep.runs.results import SweepResult
from raysweep.runs.rows import TrialRow
from raysweep.runs.sweep_results import RankedTrial, load_results


def test_the_records_are_what_show_json_and_load_read(tmp_path: Path):
    run_dir = write_run_dir(tmp_path, trials=6, epochs=3)
    results = load_results(run_dir)
    assert all(isinstance(t, RankedTrial) and isinstance(t.row, TrialRow) for t in results.trials)
    metrics = [t.metric for t in results.trials]
    assert metrics == sorted(metrics, reverse=results.goal == "maximize") and results.best is results.trials[0]

    shown = raysweep("show", str(run_dir), "--json")
    assert shown.returncode == 0, shown.stderr
    shown = json.loads(shown.stdout)
    held = shown.pop("storage")  # what the sweep holds on its storage: read there, not from the records
    assert json.loads(json.dumps(results.to_json(), default=str)) == shown
    assert held["bytes"] > 0 and held["checkpoints"] == 0
    top = json.loads(raysweep("show", str(run_dir), "--json", "--top", "2").stdout)
    assert [t["trial_id"] for t in top["trials"]] == [t.trial_id for t in results.trials[:2]]
    assert top["best"]["trial_id"] == results.best.trial_id and top["cost"] == results.to_json()["cost"]

    loaded = SweepResult(run_dir)
    assert [t.to_json() for t in loaded.trials] == [t.to_json() for t in results.trials]
    assert loaded.best.to_json() == results.best.to_json()
    frame = loaded.dataframe()
    assert list(frame["trial_id"]) == [t.trial_id for t in results.trials]
    assert math.isclose(frame["cost_hours"].sum(), results.cost.spent_hours, abs_tol=1e-5)
    record = SweepRecord.read(run_dir)
    assert record.trials == results.trials and record.cost == results.cost
