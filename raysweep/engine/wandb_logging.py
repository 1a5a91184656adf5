"""W&B logging of every trial through Ray's ``WandbLoggerCallback``, offline by default.

Ray's callback insists on an API key even for offline runs; offline needs none, so this
subclass skips that check. The key itself is only ever read by wandb from the environment
or ~/.netrc: raysweep never copies it into the run dir or its logs.
"""

from __future__ import annotations

import json
import netrc
import os
from pathlib import Path
from typing import Any

import ray
from ray.air.integrations.wandb import WandbLoggerCallback, _get_wandb_project, _WandbLoggingActor
from ray.air.util.node import _force_on_current_node

WANDB_KEY_ENV = "WANDB_API_KEY"


def key_configured() -> bool:
    """A W&B key in the environment or in ~/.netrc."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (FileNotFoundError, netrc.NetrcParseError):
        return False


END_WAIT_S = 20  # the runs' last writes at the sweep's end (offline: a local file)


class _FlushingLoggingActor(_WandbLoggingActor):
    """Wait for wandb's writer process before returning: Ray kills this actor right after.

    The API key (online mode only) arrives as a constructor argument, not in the actor's
    ``runtime_env`` where Ray's callback puts it: Ray writes runtime envs to its session logs
    and shows them in the dashboard.
    """

    def __init__(self, *args: Any, raysweep_api_key: str | None = None, **kwargs: Any):
        if raysweep_api_key:
            os.environ[WANDB_KEY_ENV] = raysweep_api_key
        super().__init__(*args, **kwargs)

    def run(self) -> None:
        super().run()
        import wandb

        wandb.teardown()


class SweepWandbCallback(WandbLoggerCallback):
    _logger_actor_cls = _FlushingLoggingActor

    def _start_logging_actor(self, trial: Any, exclude_results: list[str], **wandb_init_kwargs: Any) -> None:
        # Write straight into the trial's dir in the run dir. Ray's default (the session's
        # staging dir, synced at trial end) races with the last trial's final W&B writes.
        Path(trial.path).mkdir(parents=True, exist_ok=True)
        fresh = trial not in self._trial_logging_futures
        if not self._remote_logger_class:  # Ray's own would carry WANDB_API_KEY in its runtime_env
            # No restarts: its constructor's arguments live in the object store, so a restart could
            # not rebuild it (Ray warns of this on the terminal at every start when restarts are on).
            self._remote_logger_class = ray.remote(num_cpus=0, **_force_on_current_node())(self._logger_actor_cls)
        if self.kwargs.get("mode") == "online" and os.environ.get(WANDB_KEY_ENV):
            wandb_init_kwargs["raysweep_api_key"] = os.environ[WANDB_KEY_ENV]
        super()._start_logging_actor(trial, exclude_results, dir=trial.path, **wandb_init_kwargs)
        if fresh and self.kwargs.get("resume") == "allow":
            self._replay(trial)

    def _replay(self, trial: Any) -> None:
        """Log a resumed trial's earlier results again, from its ``result.json``.

        A killed driver takes with it what its logging actors had not yet written (a trial that
        finished in the first seconds of a sweep can have logged nothing), and Tune does not send
        those results again. Results the killed run had already written are logged a second
        time, in the resumed run's own offline file.
        """
        results = Path(trial.path) / "result.json"
        if not results.exists():
            return
        for line in results.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                self.log_trial_result(row.get("training_iteration", 0), trial, row)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        """End every run still logging, then wait a bounded time for their last writes.

        After Ctrl-C, Tune never ends the runs of interrupted trials, so Ray's own wait (up to
        ``upload_timeout``, 30 min) would hang the driver on actors that never finish.
        """
        for trial in list(self._trial_logging_actors):
            if trial in self._trial_queues:
                self._signal_logging_actor_stop(trial=trial)
        self._cleanup_logging_actors(timeout=END_WAIT_S, kill_on_timeout=True)

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

