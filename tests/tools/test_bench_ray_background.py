"""The Ray-background control's arithmetic (bench/ray_background.py), from hand-made events:
which epochs count as run with Ray's other processes stopped, and which with them running."""

from __future__ import annotations

from bench.ray_background import split_epochs

# rank 0's epochs end at t = 2 (epoch 1, warm-up: never counted), 4, 6, 8, 10 and 12
SPS = {2: 1000, 4: 3000, 6: 3500, 8: 4000, 10: 4100, 12: 3100}


def events() -> list[dict]:
    reports = [{"kind": "report", "rank": 0, "t": t, "metrics": {"samples_per_sec": s}} for t, s in SPS.items()]
    other_rank = {"kind": "report", "rank": 1, "t": 7, "metrics": {"samples_per_sec": 1}}
    return [*reports, other_rank, {"kind": "end", "rank": 0, "t": 12.1}]


def test_an_epoch_counts_inside_or_outside_the_window_only_wholly() -> None:
    assert split_epochs(events(), start=4, end=10) == ([3500, 4000, 4100], [3000, 3100])
    # 4-6 and 10-12 straddle this one's edges: neither side counts them
    assert split_epochs(events(), start=5, end=10.5) == ([4000, 4100], [3000])
