"""A failed rank's error as its trial raises it (``trial/gang.py``), with no cluster: a trial's
row keeps the last lines of its traceback (``monitor.error_summary``), and which rank failed
must be among them however deep the user's traceback is."""

from __future__ import annotations

import traceback

from raysweep.driver.monitor import error_summary
from raysweep.trial.gang import rank_error


def _fails_deep(depth: int) -> None:
    if depth == 0:
        raise ValueError("loss is nan")
    _fails_deep(depth - 1)


def test_a_deep_user_traceback_keeps_the_failed_rank_in_the_rows_error():
    try:
        _fails_deep(20)
    except ValueError as e:
        error, trace = e, traceback.format_exc()
    raised = rank_error(error, 1, 2, trace)
    summary = error_summary("".join(traceback.format_exception(raised)))
    assert summary.splitlines()[-1] == "(raised on rank 1 of 2)", summary
    assert "ValueError: loss is nan" in summary  # the rank's own last line, just above
