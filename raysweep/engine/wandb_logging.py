"""W&B logging of every trial through Ray's ``WandbLoggerCallback``, offline by default.

The callback itself (``internals.SweepWandbCallback``) lives with raysweep's other uses of
private Ray names. The key is only ever read by wandb from the environment or ~/.netrc:
raysweep never copies it into the run dir or its logs.
"""

from __future__ import annotations

import netrc
import os
from typing import Any

from raysweep.internals import SweepWandbCallback


def key_configured() -> bool:
    """A W&B key in the environment or in ~/.netrc."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (FileNotFoundError, netrc.NetrcParseError):
        return False


def wandb_callback(project: str, entity: str | None, group: str, mode: str, resuming: bool) -> SweepWandbCallback:
    os.environ.setdefault("WANDB_SILENT", "true")
    kwargs: dict[str, Any] = {"mode": mode}
    if entity:
        kwargs["entity"] = entity
    if resuming:
        kwargs["resume"] = "allow"  # continue a resumed trial's run instead of duplicating it
    return SweepWandbCallback(project=project, group=group, **kwargs)

