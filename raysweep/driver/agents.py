"""A sweep's run dir shared over time by several drivers, as W&B's agents share a sweep: one at a
time (``driver_lock``), each later one adding trials to what ran before (``JoinPlan``).

``raysweep.run(sweep, function=f, count=n, name=existing)`` is a second ``wandb.agent(sweep_id,
function=f, count=n)``: n more trials, the search going on from the sweep's history (grid: the
points not tried yet; random: fresh draws; bayes: the same Optuna study), joining its W&B sweep.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raysweep import hints
from raysweep.errors import UserError
from raysweep.runs.rows import read_rows
from raysweep.spec import SweepSpec

LOCK_FILE = "driver.lock"
# What may differ between the drivers of one sweep: how it was named and seeded, and what runs its trials.
_NOT_COMPARED = ("seed", "source", "notes", "function", "train_loop", "program", "command", "name", "description")


@contextlib.contextmanager
def driver_lock(run_dir: Path) -> Iterator[None]:
    """Hold the run dir for this driver; another driver of the same sweep is refused with a sentence
    instead of writing into its files at the same time. The lock ends with the process, whatever
    ends it (a killed driver leaves none behind)."""
    path = Path(run_dir) / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            raise UserError(
                f"sweep {Path(run_dir).name} is being run by another driver ({holder}); two drivers of one "
                "sweep would write over each other's records: wait for it to end, or use another name"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {os.uname().nodename}".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@dataclass(frozen=True)
class JoinPlan:
    """What a joining driver runs: ``count`` trials more, with the sweep's search seeded anew."""

    count: int
    ran: int  # trials of the sweep so far
    seed: int  # the sweep's seed and the driver's number: random draws afresh, reproducibly
    tried: list[dict[str, Any]]  # the configurations run so far (grid goes on with the rest)


def plan_join(stored: SweepSpec, given: SweepSpec, run_dir: Path, count: int | None, agents: int) -> JoinPlan:
    """Check that ``given`` is the sweep ``stored`` in ``run_dir`` and that none of its trials is
    unfinished; the trials to add: ``count`` within what is left of its run_cap, else that rest
    (a grid: of its points not tried yet)."""
    different = _difference(stored, given)
    if different:
        raise UserError(
            f"{run_dir} holds another sweep: its {different} differs from this one's; give this one another name"
        )
    rows = read_rows(run_dir)
    unfinished = [r for r in rows if not r.ended]
    if unfinished:
        raise UserError(
            f"sweep {run_dir.name} has {len(unfinished)} unfinished trial(s): continue them with "
            f"`{hints.command('resume', run_dir)}` (or resume_existing), then add trials"
        )
    left = stored.trial_budget(count, ran=len(rows)) or 0  # None: no count, no run_cap, no grid
    if stored.search_method.enumerates:
        left = min(left, stored.grid_size - len({_key(r.config) for r in rows}))
    return JoinPlan(max(left, 0), len(rows), (stored.seed or 0) + agents, [r.config for r in rows])


def _difference(stored: SweepSpec, given: SweepSpec) -> str | None:
    a, b = stored.to_json(), given.to_json()
    for key in sorted(set(a) | set(b)):
        if key not in _NOT_COMPARED and a.get(key) != b.get(key):
            return key
    return None


def _key(config: dict[str, Any]) -> str:
    return repr(sorted(config.items()))
