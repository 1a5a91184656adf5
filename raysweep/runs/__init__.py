"""A sweep's run dir, read and written without Ray: its file format, ``show`` and ``report``.

Nothing under ``runs/`` imports Ray or Tune (tests/runs/test_runs_without_ray.py checks it), so a
run dir can be read on a laptop with no Ray, during a sweep or long after it.
"""
