"""W&B logging of every trial through Ray's ``WandbLoggerCallback``, offline by default.

Ray's callback insists on an API key even for offline runs; offline needs none, so this
subclass skips that check. The key itself is only ever read by wandb from the environment
or ~/.netrc: raysweep never copies it into the run dir or its logs.
"""

from __future__ import annotations

import netrc
import os
from typing import Any

from ray.air.integrations.wandb import WandbLoggerCallback, _get_wandb_project


def key_configured() -> bool:
    """A W&B key in the environment or in ~/.netrc."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (FileNotFoundError, netrc.NetrcParseError):
        return False


class SweepWandbCallback(WandbLoggerCallback):
    def setup(self, *args: Any, **kwargs: Any) -> None:
        if self.kwargs.get("mode") == "online":
            return super().setup(*args, **kwargs)
        self.project = _get_wandb_project(self.project)


def wandb_callback(project: str, entity: str | None, group: str, mode: str, resuming: bool) -> SweepWandbCallback:
    os.environ.setdefault("WANDB_SILENT", "true")
    kwargs: dict[str, Any] = {"mode": mode}
    if entity:
        kwargs["entity"] = entity
    if resuming:
        kwargs["resume"] = "allow"  # continue a resumed trial's run instead of duplicating it
    return SweepWandbCallback(project=project, group=group, **kwargs)
