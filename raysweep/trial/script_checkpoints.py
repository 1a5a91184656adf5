"""A ``program:`` script's trial checkpoint directory (``RAYSWEEP_CHECKPOINT_DIR``), so that a
script that keeps its framework's checkpoints there goes on where it was after a resume, a node
lost, a retry or growth. W&B has no such directory; torchrun's agent neither.

Every rank's script gets the directory (one per trial on each node, so ranks of a node share it,
as HF Trainer's ``output_dir`` is shared). What rank 0's script wrote there since the last report
is kept with its next report, as a loop's ``raysweep.report(checkpoint=)`` is; before a restarted
trial's scripts start, the trial's checkpoint is put back in it on every node.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

Fingerprint = tuple[tuple[str, int, int], ...]


def directory(trial_id: str) -> Path:
    """The trial's directory on this node (the same on every node: a script may print it)."""
    return Path(tempfile.gettempdir()) / "raysweep_checkpoints" / trial_id


def put_back(trial_id: str, local_rank: int, world_size: int, checkpoint: Any, share: Callable[[Any], Any]) -> Path:
    """The trial's directory, emptied and holding ``checkpoint`` (a ``ray.train.Checkpoint``, or None
    on a fresh start), put there by each node's first rank while the others wait (``share``: the
    trial's collective), before any script starts."""
    where = directory(trial_id)
    if local_rank == 0:
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True)
        if checkpoint is not None:
            with checkpoint.as_directory() as src:
                shutil.copytree(src, where, dirs_exist_ok=True)
    if world_size > 1:
        share(None)
    return where


def ready(
    trial_id: str, rank: int, local_rank: int, world_size: int, checkpoint: Any, share: Callable[[Any], Any]
) -> Snapshots | None:
    """``put_back``, then rank 0's ``Snapshots`` of the directory (None on the other ranks)."""
    where = put_back(trial_id, local_rank, world_size, checkpoint, share)
    return Snapshots(where) if rank == 0 else None


def fingerprint(where: Path) -> Fingerprint:
    """What the directory holds, as names, sizes and change times."""
    out = []
    for root, _, files in os.walk(where):
        for name in files:
            path = Path(root, name)
            try:
                stat = path.stat()
            except FileNotFoundError:  # the script removed it meanwhile
                continue
            out.append((path.relative_to(where).as_posix(), stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(out))


class Snapshots:
    """Rank 0's directory, copied aside at a report when it changed since the last one kept (the
    script goes on writing while the copy is stored)."""

    def __init__(self, where: Path):
        self.where = where
        self.kept = fingerprint(where)  # what was put back is the trial's checkpoint already

    def changed(self) -> str | None:
        """A copy of the directory if it changed (the caller removes it once reported), else None."""
        now = fingerprint(self.where)
        if not now or now == self.kept:
            return None
        copy = tempfile.mkdtemp(prefix="raysweep_script_ckpt_")
        shutil.copytree(self.where, copy, dirs_exist_ok=True)
        self.kept = now
        return copy
