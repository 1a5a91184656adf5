"""The smoke loop with one grid parameter, ``case``: a dict of smoke settings (a fault to plant),
so one grid sweep runs a trial of each fault (tests/trial/test_reliability.py). Each rank writes its
process's command line to ``<trial_dir>/cmdline.rank<r>``: Ray titles it by what runs the rank.
"""

from __future__ import annotations

import os

import psutil

import raysweep
from train_loops import smoke


def train(config: dict) -> None:
    config = dict(config)
    case = config.pop("case", {})
    ctx = raysweep.get_context()
    with open(os.path.join(ctx.trial_dir, f"cmdline.rank{ctx.rank}"), "w") as f:
        f.write(" ".join(psutil.Process().cmdline()))
    smoke.train(config | case)
