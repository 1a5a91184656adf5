"""Where a sweep's run dir lives (``SweepHome``): a directory under a local ``--storage``, or, under
a URI's, its local copy with the URI it is a copy of (``runs/storage.py``). Decided and checked
before anything of the sweep is written."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from raysweep.errors import UserError
from raysweep.runs import storage
from raysweep.runs.files import SPEC_FILE


@dataclass(frozen=True)
class SweepHome:
    """Where a sweep's run dir lives: ``run_dir`` on this machine, and, on a URI storage, ``remote``,
    the truth the run dir is a local copy of (``runs/storage.py``)."""

    run_dir: Path
    remote: storage.Remote | None = None
    flag: str = ""  # how the user gave the storage, for messages

    @property
    def uri(self) -> str | None:
        """The storage's URI, as run.json keeps it (None: a local path)."""
        return self.flag if self.remote is not None else None

    def exists(self) -> bool:
        if self.remote is None:
            return (self.run_dir / SPEC_FILE).exists()
        return storage.exists(self.remote, SPEC_FILE)

    def fetch(self) -> Path:
        return storage.fetch(self.remote) if self.remote is not None else self.run_dir

    def new_run_dir(self) -> Path:
        """The run dir of a new sweep: on a URI storage an empty local copy (one an earlier sweep of this
        name left, whose storage no longer holds it, is removed)."""
        if self.remote is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)
        return self.run_dir


def sweep_home(where: str | os.PathLike, name: str, check: bool = True) -> SweepHome:
    """``<storage>/<name>``, checked before anything is written: a local dir created user-only
    (``resume`` unpickles Tune's state from it, so whoever can write it can run code as the
    sweep's user), or a URI's, whose storage is checked writable (``check``)."""
    if storage.is_uri(str(where)):
        remote = storage.parse(str(where))
        if check:
            storage.check_writable(remote)
        run = remote.join(name)
        return SweepHome(storage.local_copy(run), run, str(where))
    root = Path(where).resolve()
    if check and root.exists() and not root.is_dir():
        raise UserError(f"--storage {where}: is a file; it must be a directory (it is created if missing)")
    run_dir = root / name
    if run_dir.parent != root:
        raise UserError(f"--name {name!r} would leave --storage {where}; pick a plain name")
    return SweepHome(run_dir)
