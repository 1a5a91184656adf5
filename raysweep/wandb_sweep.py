"""The sweep on W&B's sweep page: a W&B sweep that W&B creates, and that every trial's run joins.

raysweep proposes the trials itself (Ray Tune), so the sweep is created locally controlled
(``controller: {type: local}``): W&B's controller proposes nothing, and a ``wandb agent`` given
its id gets no run. Only an id W&B returned is ever given to a run. The id is kept in the run
dir, so ``resume`` and ``publish`` reuse the sweep rather than create another.

Every call to W&B runs on a thread of its own with a bound on its wait: wandb retries an
unreachable server for minutes, and a sweep must not wait on W&B to start.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import netrc
import os
import sys
import threading
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from raysweep.env import WANDB_API_KEY, WANDB_ENTITY, WANDB_PROJECT
from raysweep.runs.files import WANDB_SWEEP_FILE, write_json
from raysweep.spec import SweepSpec

log = logging.getLogger("raysweep")

CALL_TIMEOUT_S = 60  # one call to W&B: wandb gives up on an unreachable server after ~20 s
FINISHED, PAUSED, RUNNING = "FINISHED", "PAUSED", "RUNNING"  # W&B's sweep states raysweep sets

T = TypeVar("T")


class WandbUnavailable(Exception):
    """W&B did not answer, or refused: the message says why, in a form to print."""


class WandbUnreachable(WandbUnavailable):
    """W&B cannot be logged in to at all (no network, a key it refuses): runs online would only wait."""


@dataclass(frozen=True)
class WandbSweep:
    """A sweep W&B created for a raysweep sweep (``wandb_sweep.txt`` in its run dir)."""

    id: str  # W&B's sweep id (its "name"), as W&B returned it
    entity: str
    project: str
    url: str
    runs: tuple[str, ...] = ()  # runs attached after the fact (publish), by run id

    @property
    def path(self) -> str:
        return f"{self.entity}/{self.project}/{self.id}"


def key_configured() -> bool:
    """A W&B key in the environment or in ~/.netrc."""
    if os.environ.get(WANDB_API_KEY):
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (FileNotFoundError, netrc.NetrcParseError):
        return False


def load(run_dir: Path) -> WandbSweep | None:
    path = Path(run_dir) / WANDB_SWEEP_FILE
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return WandbSweep(**{**data, "runs": tuple(data.get("runs", ()))})


def save(run_dir: Path, sweep: WandbSweep) -> None:
    write_json(Path(run_dir) / WANDB_SWEEP_FILE, asdict(sweep))


def sweep_config(spec: SweepSpec) -> dict[str, Any]:
    """What W&B's sweep holds: the sweep file's W&B keys as read (its ``raysweep:`` block is
    raysweep's), marked locally controlled."""
    return {**spec.wandb_document, "controller": {"type": "local"}}


def create(spec: SweepSpec, prior_runs: Iterable[str] = ()) -> WandbSweep:
    """Create the W&B sweep, with ``prior_runs`` (run ids already on W&B) attached."""
    import wandb

    project, entity = spec.wandb.project_name, spec.wandb.entity

    def call() -> WandbSweep:
        sweep_id = wandb.sweep(sweep_config(spec), entity=entity, project=project, prior_runs=list(prior_runs) or None)
        return _located(sweep_id, entity, project)

    return _call(call, "create a sweep")


def attach(sweep: WandbSweep, spec: SweepSpec, run_ids: Iterable[str]) -> WandbSweep:
    """Add runs already on W&B to an existing sweep, as ``wandb sweep --update ID -R RUN`` does."""
    from raysweep.private_api import add_prior_runs

    new = [run_id for run_id in run_ids if run_id not in sweep.runs]
    if new:
        _call(
            lambda: add_prior_runs(sweep.id, sweep_config(spec), sweep.entity, sweep.project, new),
            "add runs to the sweep",
        )
    return replace(sweep, runs=(*sweep.runs, *new))


def set_state(sweep: WandbSweep, state: str) -> None:
    """Set the sweep's state on W&B (``wandb sweep --stop/--pause/--resume``); what W&B refuses
    (a finished sweep cannot be paused) is logged, not raised."""
    from raysweep.private_api import set_sweep_state

    try:
        _call(
            lambda: set_sweep_state(sweep.id, state, sweep.entity, sweep.project), f"set the sweep's state to {state}"
        )
    except WandbUnavailable as e:
        log.info("W&B: %s", e)


def check_reachable() -> str:
    """The entity of the W&B user whose key is configured; raises when W&B cannot be reached or
    refuses the key."""
    import wandb

    def call() -> str:
        entity = wandb.Api().default_entity
        if not entity:
            raise WandbUnavailable("W&B did not say which user this key belongs to")
        return entity

    return _call(call, "log in to W&B")


def _located(sweep_id: str, entity: str | None, project: str) -> WandbSweep:
    import wandb
    from wandb import util

    api = wandb.Api()
    entity = entity or api.default_entity
    base = util.app_url(api.settings["base_url"])
    url = f"{base}/{urllib.parse.quote(entity)}/{urllib.parse.quote(project)}/sweeps/{urllib.parse.quote(sweep_id)}"
    return WandbSweep(id=sweep_id, entity=entity, project=project, url=url)


def _call(function: Callable[[], T], what: str) -> T:
    """``function()`` on a thread, waited for at most CALL_TIMEOUT_S; what it prints goes to
    driver.log, and the process's WANDB_PROJECT/WANDB_ENTITY (which wandb.sweep sets) are kept."""
    kept = {key: os.environ.get(key) for key in (WANDB_PROJECT, WANDB_ENTITY)}
    outcome: dict[str, Any] = {}

    def target() -> None:
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
                outcome["value"] = function()
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = e
        finally:
            if printed.getvalue().strip():
                log.info("W&B (%s) printed: %s", what, printed.getvalue().strip())

    thread = threading.Thread(target=target, name="raysweep-wandb-sweep", daemon=True)
    thread.start()
    thread.join(CALL_TIMEOUT_S)
    for key, value in kept.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    if thread.is_alive():
        raise WandbUnavailable(f"could not {what}: W&B did not answer in {CALL_TIMEOUT_S} s")
    if "error" in outcome:
        error = outcome["error"]
        if isinstance(error, WandbUnavailable):
            raise error
        log.info("W&B could not %s", what, exc_info=error)
        raise WandbUnavailable(f"could not {what}: {_first_line(error)}")
    return outcome["value"]


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0].rstrip(".")


def open_for_run(spec: SweepSpec, run_dir: Path, name: str, trial_ids: Iterable[str]) -> WandbSweep | None:
    """The W&B sweep an online run's trials join: the run dir's (``resume``, a published sweep),
    else a new one with the trials that already ran (``trial_ids``) attached. None, said once,
    when W&B cannot give one: the runs still log, as the sweep's group, without a sweep. Raises
    ``WandbUnreachable`` when W&B cannot be logged in to: the caller writes the runs offline."""
    try:
        check_reachable()
    except WandbUnavailable as e:
        raise WandbUnreachable(str(e)) from None
    sweep = load(run_dir)
    try:
        if sweep is None:
            sweep = create(spec, prior_runs=trial_ids)
            save(run_dir, sweep)
        else:
            set_state(sweep, RUNNING)
    except WandbUnavailable as e:
        print(
            f"W&B: {e}; each trial's run still logs, in group {spec.wandb.group or name}, but on no sweep page",
            file=sys.stderr,
        )
        return None
    return sweep
