"""raysweep: W&B-style sweep files run on Ray Tune, each trial a DDP job.

From Python: ``raysweep.run(sweep, function=main, count=N)``, ``raysweep.resume(...)`` and
``raysweep.load(name)`` (``api.py``); in a trial: ``get_context``, ``report``, ``get_checkpoint``.

``api.py`` (the driver's side: Tune, the spec parser, numpy) is imported on first use, so the
processes of a trial (its Tune actor, warm workers, scripts) that import only ``raysweep.trial``
do not pay for it.
"""

from typing import TYPE_CHECKING, Any

from raysweep.errors import SpecError, UserError
from raysweep.trial import TrialContext, get_checkpoint, get_context, report, run_local

if TYPE_CHECKING:
    from raysweep.api import SweepResult, TrialResult, load, resume, run

__all__ = [
    "SpecError",
    "SweepResult",
    "TrialContext",
    "TrialResult",
    "UserError",
    "get_checkpoint",
    "get_context",
    "load",
    "report",
    "resume",
    "run",
    "run_local",
]
__version__ = "0.1.0"
_FROM_API = ("SweepResult", "TrialResult", "load", "resume", "run")


def __getattr__(name: str) -> Any:
    if name in _FROM_API:
        from raysweep import api

        return getattr(api, name)
    raise AttributeError(f"module 'raysweep' has no attribute {name!r}")
