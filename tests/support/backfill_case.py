"""A grid sweep whose order forces a reservation and a backfill, on any cluster of 4 worker slots
(one node of 4, or two of 2), and the order of events its run dir must show.

Tune makes them in the grid's order (epochs 2, 3, 8, 1 for each of sizes 1 and 4, the size
varying fastest), the first five before any starts:

* Those five run largest first (``backfill.largest_first``): the 2- and 3-epoch 4-worker trials,
  then the 1-worker trials of 2, 3 and 8 epochs. Every slot is free at the start, and a small
  head would leave the others to drain for a large trial with no estimate to backfill by.
* The long 4-worker trial (the head) then waits for the 8-epoch 1-worker one, with a
  reservation. The 1-epoch 1-worker trial, made after it, fits in the slot left free and ends
  before it (backfilled); the 1-epoch 4-worker one waits its turn.

The 1-epoch trial is weighed against the 8-epoch one's reports, each priced at the slowest
size's seconds per report, start-up and all (``estimates.py``), so it is backfilled however
slowly a loaded machine starts workers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import write_spec

from raysweep.runs.rows import LATE_GRACE, TrialRow

SLOTS = 4  # the cluster's worker slots


def backfill_sweep(tmp_path: Path, name: str, **raysweep_keys: Any) -> Path:
    return write_spec(
        tmp_path / f"{name}.yaml",
        name=name,
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        parameters={"num_gpus": {"values": [1, 4]}, "epochs": {"values": [2, 3, 8, 1]}},
        raysweep={"train_loop": "train_loops.smoke:train", "base_config": {"sleep": 1.0}} | raysweep_keys,
    )


def check_backfill(rows: list[TrialRow]) -> None:
    """The first five ran largest first; the head waited with a reservation and started on time;
    every trial made after it that started first was backfilled and ended before it started (the
    1-epoch 1-worker one among them); the 1-epoch 4-worker trial went after it."""
    by = {(r.world_size, r.config["epochs"]): r for r in rows}
    head, short = by[(4, 8)], by[(1, 1)]
    assert all(r.status == "done" and r.created is not None for r in rows), [(r.trial_id, r.status) for r in rows]
    first_small = min(by[(1, e)].start for e in (2, 3, 8))
    assert by[(4, 2)].start < by[(4, 3)].start < first_small, [(r.trial_id, r.world_size, r.start) for r in rows]
    # it started on time, or late only by a trial ahead of it that overran its estimate (under load,
    # a size's first estimate is the other size's: CI, 2026-12-02), never by a backfilled one
    before = [r.end for r in rows if r.start < head.start and not r.backfilled]
    assert head.reserved_at is not None, head
    assert head.start <= max(head.reserved_at, *before) + LATE_GRACE, (head.start, head.reserved_at, before)
    ahead = [r for r in rows if r.created > head.created and r.start < head.start]
    assert short in ahead, [(r.trial_id, r.start, r.end) for r in rows]
    for r in ahead:
        assert r.backfilled and r.end <= head.start + LATE_GRACE, (r, head.start)
    assert by[(4, 1)].start >= head.start and not by[(4, 1)].backfilled
    # two trials too large to run together held their slots one after the other: the later started
    # after the earlier's last report (a trial that places its slots starts when it holds them, the
    # sweep's last one too; Tune's ``timestamp``, whole seconds, is no later than that report)
    for a in rows:
        for b in rows:
            if a.start < b.start and a.world_size + b.world_size > SLOTS:
                assert b.start >= a.metrics["timestamp"], (a.trial_id, b.trial_id, b.start, a.metrics["timestamp"])
    # Tune made the trials behind the first while it started (with one trial pending at a time it
    # made the next only once the one before had started: starts went one after another)
    assert sum(r.created < by[(4, 2)].start for r in rows) >= 3, [(r.trial_id, r.created, r.start) for r in rows]


def check_started_ahead(rows: list[TrialRow], run_dir: Path) -> None:
    """Issue 50, start-ahead (the default): warm trials place their own slots (``trial/slots.py``),
    so each rank count is the trial's own, and the head's process was started ahead of its slots
    (driver.log). Whether Tune then runs trials of different sizes in one actor hangs on which of
    its actors is idle when (two of three runs under load: none was), so that is a figure of
    ``bench.admission`` (``actors_with_several_sizes``), not an assert."""
    by = {(r.world_size, r.config["epochs"]): r for r in rows}
    assert all(r.metrics["world_size"] == r.world_size for r in rows), [(r.world_size, r.metrics) for r in rows]
    log = (run_dir / "driver.log").read_text()
    assert f"start {by[(4, 8)].trial_id} ahead of its slots" in log, log[-3000:]
    # the log gives the order the first trials ran in, largest first
    first = [line for line in log.splitlines() if "trials waiting at the start run largest first: " in line]
    assert first and first[0].split("first: ")[1].startswith(f"{by[(4, 2)].trial_id} (4), "), first or log[-3000:]
