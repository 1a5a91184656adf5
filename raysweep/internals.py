"""Every private Ray and Optuna name raysweep uses, in this one module.

Each has no public equivalent in the Ray versions raysweep supports; tests/test_internals.py
checks every one against the installed Ray and Optuna, so an upgrade that renames or reshapes
one fails there by name, not deep inside a sweep.

* Tune: ``Tuner.restore`` keeps the original ``RunConfig``; a resumed driver attaches its own
  callbacks and stoppers, and reads the restored scheduler (``restored_config``).
* Optuna search: Ray's ``OptunaSearch`` keeps the Optuna trials it has open and its study
  privately; ``search.searchers.DistinctOptunaSearch`` reads both (``optuna_trials``, ``optuna_study``).
* W&B: Ray's ``WandbLoggerCallback`` has no public hooks for where a run writes, for the key
  kept out of its actor's ``runtime_env``, for a flush before its actor is killed, or for a
  bounded wait at the end (``SweepWandbCallback``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import ray
from ray.air.integrations.wandb import WandbLoggerCallback, _get_wandb_project, _WandbLoggingActor
from ray.air.util.node import _force_on_current_node

WANDB_KEY_ENV = "WANDB_API_KEY"


# --- Tune --------------------------------------------------------------------------------------


def restored_config(tuner: Any) -> tuple[Any, Any]:
    """A restored ``Tuner``'s ``RunConfig`` (to set this driver's callbacks and stop on) and ``TuneConfig``."""
    local = tuner._local_tuner  # noqa: SLF001
    return local._run_config, local._tune_config  # noqa: SLF001


# --- Optuna search -----------------------------------------------------------------------------


def optuna_trials(search: Any) -> dict[str, Any]:
    """Ray's ``OptunaSearch``: Tune trial id -> the Optuna trial it asked for and has not told yet."""
    return search._ot_trials  # noqa: SLF001


def optuna_study(search: Any) -> Any:
    return search._ot_study  # noqa: SLF001


# --- W&B ---------------------------------------------------------------------------------------


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
    """Ray's W&B callback, with each trial's run written into its run-dir dir, no API key in
    any actor's ``runtime_env``, offline runs without a key (Ray's insists on one), a resumed
    trial's earlier results logged again, and a bounded wait at the sweep's end."""

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


