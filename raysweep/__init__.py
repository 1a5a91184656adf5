"""raysweep: W&B-style sweep files run on Ray Tune, each trial a DDP job.

From Python: ``raysweep.run(sweep, function=main, count=N)``, ``raysweep.resume(...)`` and
``raysweep.load(name)`` (``api.py``); in a trial: ``get_context``, ``report``, ``get_checkpoint``.
"""

from raysweep.api import SweepResult, load, resume, run
from raysweep.errors import SpecError, UserError
from raysweep.trial import TrialContext, get_checkpoint, get_context, report, run_local

__all__ = [
    "SpecError",
    "SweepResult",
    "TrialContext",
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
