"""Warm start (``run --warm-start RUN_DIR ...``, ``warm_start=``): the finished trials of earlier
sweeps, read from their run dirs, each with its config and the values of this sweep's goals.

Which of them fit this sweep's space is the searcher's to say (``search/warm_start.py``): a
trial told to a searcher must replay to the same configuration in this sweep's space. Here the
run dirs are read, and what cannot be told at all is set aside with its reason.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raysweep.errors import UserError
from raysweep.runs.files import SPEC_FILE
from raysweep.runs.rows import read_rows
from raysweep.spec.objectives import Objectives
from raysweep.words import TrialStatus


@dataclass(frozen=True)
class Prior:
    """One finished trial of an earlier sweep: its flat config, and the values of this sweep's goals."""

    config: dict[str, Any]
    values: tuple[float, ...]


@dataclass
class WarmStart:
    """What warm start found: the trials to tell, and how many were left out, by reason."""

    priors: list[Prior] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)
    run_dirs: list[str] = field(default_factory=list)

    def leave_out(self, reason: str, count: int = 1) -> None:
        self.left_out[reason] = self.left_out.get(reason, 0) + count

    def told(self, count: int) -> None:
        """The searcher took ``count`` of the priors; the rest did not fit its space."""
        if len(self.priors) > count:
            self.leave_out("outside this sweep's space", len(self.priors) - count)
        self.priors = self.priors[:count]

    def sentence(self) -> str:
        """The banner's line."""
        left = "; ".join(f"{n} {why}" for why, n in sorted(self.left_out.items()))
        return (
            f"warm start: told {len(self.priors)} finished trial(s) of {len(self.run_dirs)} earlier sweep(s) to the "
            f"search before its first new trial" + (f"; left out {sum(self.left_out.values())}: {left}" if left else "")
        )


def read_priors(run_dirs: list[str | os.PathLike], goals: Objectives) -> WarmStart:
    """The finished trials of ``run_dirs`` (each a sweep's run dir) with every goal's value."""
    found = WarmStart(run_dirs=[str(d) for d in run_dirs])
    for run_dir in run_dirs:
        if not (Path(run_dir) / SPEC_FILE).exists():
            raise UserError(f"--warm-start {run_dir}: not a sweep's run dir (it has no {SPEC_FILE})")
        for row in read_rows(run_dir):
            if row.status != TrialStatus.DONE:
                found.leave_out(f"not done ({row.status})")
                continue
            values = goals.values(row.metrics, row.world_size)
            if values is None:
                found.leave_out(f"without {' and '.join(g.name for g in goals)} in its last report")
                continue
            found.priors.append(Prior(dict(row.config), values))
    return found
