"""raysweep: W&B-style sweep files run on Ray Tune, each trial a DDP job."""

from raysweep.trial import TrialContext, get_checkpoint, get_context, report, run_local

__all__ = ["TrialContext", "get_checkpoint", "get_context", "report", "run_local"]
__version__ = "0.1.0"
