"""Run dirs written by earlier raysweeps stay resumable.

Tune pickles the searcher, scheduler, callbacks and stoppers into a run dir, under the module
paths their classes had then: before the re-layering (2026-11-24), ``raysweep.engine.search.RecordingASHA``,
a ``SweepSpec`` from ``raysweep.spec.loader``, ...; before 2026-11-25, a W&B callback that is
gone. ``register`` makes each old path a module that holds the names of its new homes, so
``resume`` unpickles them; a fresh sweep never needs it.
"""

from __future__ import annotations

import importlib
import sys
import types

MOVED = {
    "raysweep.engine.search": ("raysweep.search.searchers", "raysweep.search.schedulers"),
    "raysweep.engine.hyperband": ("raysweep.search.hyperband",),
    "raysweep.engine.progress": (
        "raysweep.engine.monitor",
        "raysweep.engine.result_log",
        "raysweep.search.stoppers",
        "raysweep.runs.files",
    ),
    "raysweep.engine.trainable": ("raysweep.trial.tune_trial", "raysweep.engine.trainable", "raysweep.trial.job"),
    "raysweep.engine.results": ("raysweep.runs.show",),
    "raysweep.engine.gang": ("raysweep.trial.gang",),
    "raysweep.engine.pool": ("raysweep.trial.pool",),
    "raysweep.engine.rank": ("raysweep.trial.rank",),
    "raysweep.engine.program": ("raysweep.trial.program",),
    "raysweep.engine.watchdog": ("raysweep.trial.watchdog",),
    "raysweep.spec.loader": ("raysweep.spec.model", "raysweep.spec.parse", "raysweep.spec.reading"),
    "raysweep.sweep_report": ("raysweep.runs.report", "raysweep.runs.figures"),
}


def register() -> None:
    for old, homes in MOVED.items():
        if old in sys.modules:
            continue
        module = types.ModuleType(old, f"moved to {', '.join(homes)}")
        for home in homes:
            for name, value in vars(importlib.import_module(home)).items():
                if not name.startswith("__") and not hasattr(module, name):
                    setattr(module, name, value)
        sys.modules[old] = module
    # Ray's W&B callback, subclassed, logged trials until 2026-11-25; a resumed driver attaches
    # its own callbacks, so the old one only has to unpickle.
    from raysweep.engine import wandb_logging

    for old in ("raysweep.private_api", "raysweep.engine.wandb_logging"):
        importlib.import_module(old).SweepWandbCallback = wandb_logging.WandbRuns
