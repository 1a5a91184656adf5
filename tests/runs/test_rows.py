"""``TrialRow``: the typed row of ``trials.jsonl`` that every reader and writer in raysweep goes
through (issue 45: rows were dicts in eight modules), and its JSON, which is the file's."""

from __future__ import annotations

import json

from raysweep.runs.files import TRIALS_FILE
from raysweep.runs.rows import TrialRow, read_rows
from raysweep.words import TrialStatus

LINES = [
    {"trial_id": "a", "start": 1.0, "config": {"x": 1}, "num_workers": 2, "trial_dir": "/t", "status": "running"},
    {"trial_id": "b", "config": {"x": 2}, "num_workers": 1, "trial_dir": "/u", "status": "pending"},
    {
        "trial_id": "a",
        "start": 1.0,
        "end": 5.0,
        "config": {"x": 1},
        "num_workers": 2,
        "trial_dir": "/t",
        "status": "done",
        "iterations": 3,
        "metrics": {"loss": 0.5},
        "wall_s": 4.0,
        "run_s": 3.9,
        "metric_logged": False,
    },
]


def test_a_rows_json_is_the_files_and_reads_back_the_same():
    for line in LINES:
        row = TrialRow.from_json(line)
        assert row.to_json().items() >= line.items()  # what the file said, said again (defaults beside it)
        assert TrialRow.from_json(row.to_json()) == row
    done = TrialRow.from_json(LINES[2])
    assert done.status is TrialStatus.DONE and done.world_size == 2 and not done.metric_logged
    assert done.finished and done.ended and done.metric("loss") == 0.5 and done.metric(None) is None
    assert done.cost_hours == 2 * 3.9 / 3600
    assert "metric_logged" not in TrialRow("t").to_json() and "start" not in TrialRow("t").to_json()


def test_the_journal_reads_each_trials_last_line_and_passes_over_a_half_one(tmp_path):
    text = "".join(json.dumps(line) + "\n" for line in LINES) + '{"trial_id": "c", "sta'
    (tmp_path / TRIALS_FILE).write_text(text)
    rows = read_rows(tmp_path)
    assert [(r.trial_id, r.status) for r in rows] == [("a", "done"), ("b", "pending")]
    assert rows[1].start is None and rows[1].run_s == 0.0 and rows[1].metrics == {}
