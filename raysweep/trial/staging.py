"""A warm rank 0 on another node than its trial's process: the trial's process cannot read that
node's disk, so the checkpoint reaches the storage from the rank's own node, staged in the trial's
dir there (``staged/``); the trial's report copies it into Tune's checkpoint and removes the staged
copy. On the trial's own node a rank hands over its directory as before."""

from __future__ import annotations

import uuid
from typing import Any

from raysweep.runs.storage import join, open_path

STAGED = "staged"


def stage(local_dir: str, stage_at: str) -> Any:
    """``local_dir`` copied under ``stage_at`` (a URI or a path every node sees), as a ``ray.train.Checkpoint``."""
    import pyarrow.fs
    from ray.train import Checkpoint

    fs, path = open_path(join(stage_at, uuid.uuid4().hex))
    fs.create_dir(path)
    pyarrow.fs.copy_files(local_dir, path, source_filesystem=pyarrow.fs.LocalFileSystem(), destination_filesystem=fs)
    return Checkpoint(path, filesystem=fs)


def unstage(checkpoint: Any) -> None:
    """Remove a staged copy once Tune has its own."""
    try:
        checkpoint.filesystem.delete_dir(checkpoint.path)
    except OSError:
        pass
