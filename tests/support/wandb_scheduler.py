"""W&B's sweep scheduler (wandb 0.31, ``wandb sweep-scheduler``) as an oracle, run without a W&B
server: the ``SweepInfo`` it would get is built by hand from the sweep file, and its own
``make_optimizer`` builds the optimizer and is asked for a first run, as the scheduler does at
start. What raises there is what W&B refuses at start; what it prints is what it warns about.

Engine wandb's optimizer is the ``sweeps`` engine (it lives in ``.venv-wandb``, the oracle of
tests/search/test_wandb_oracle.py); this one answers for engines optuna and ax.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any


def sweep_info(doc: dict[str, Any], base_dir: Path) -> Any:
    from wandb.sdk.sweeps import SweepInfo

    config = {k: v for k, v in doc.items() if k != "raysweep"}
    scheduler = config.get("scheduler")
    if isinstance(scheduler, dict) and scheduler.get("source"):  # the scheduler runs beside the sweep file
        config["scheduler"] = scheduler | {"source": str((base_dir / scheduler["source"]).resolve())}
    return SweepInfo(id="s", name="s", entity="e", project="p", config=config, controller_run_name="")


def at_start(doc: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """``{"ok", "errors", "warnings", "config"}``: whether W&B's scheduler starts the sweep (its
    optimizer built and a first run proposed), why not, what it warned, and the first run's config."""
    from wandb.sdk.sweeps.scheduler.optimizer import make_optimizer

    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
            optimizer = make_optimizer(sweep_info(doc, base_dir))
            asked = optimizer.ask_n_runs(1)
    except Exception as e:  # noqa: BLE001  (any refusal at start is the verdict)
        return {"ok": False, "errors": [str(e)], "warnings": [], "config": None}
    warnings = [line for line in said.getvalue().splitlines() if "WARNING" in line]
    config = asked[0].config.flat_dict() if asked else None
    return {"ok": True, "errors": [], "warnings": warnings, "config": config}


def engine_of(doc: dict[str, Any]) -> str | None:
    scheduler = doc.get("scheduler")
    return scheduler.get("engine") if isinstance(scheduler, dict) else None
