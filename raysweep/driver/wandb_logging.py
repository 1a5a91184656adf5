"""W&B logging of every trial, offline by default: one run per trial, written by the driver.

Ray's ``WandbLoggerCallback`` starts two actors per trial (a logging actor and its queue), two
Python processes that each import wandb, per trial (the cost is in docs/benchmarks.md). wandb holds several runs in one process (``reinit="create_new"``, one wandb-core
service for all), so the driver writes them itself, on one thread of its own: Tune's loop only
queues each result, since ``wandb.init`` online is a network call. With no actor, the API key is
never in a ``runtime_env`` (Ray writes those to its session logs): wandb reads it from the
driver's environment or ~/.netrc, and raysweep never copies it anywhere.
"""

from __future__ import annotations

import json
import logging
import numbers
import os
import queue
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ray.tune.logger import LoggerCallback
from ray.tune.utils import flatten_dict

from raysweep.env import WANDB_SILENT
from raysweep.runs.pareto import front, on_front
from raysweep.spec.objectives import Objectives

logger = logging.getLogger(__name__)

END_WAIT_S = 20  # the runs' last writes at the sweep's end (offline: local files)
NOT_LOGGED = ("done", "should_checkpoint", "config")  # Tune's bookkeeping, as Ray's callback leaves out
TO_CONFIG = ("trial_id", "experiment_tag", "node_ip", "hostname", "pid")  # facts of the run, not series


def loggable(result: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Tune result as one W&B history row (numbers, nested keys joined by ``/``) and the run's facts."""
    row, facts = {}, {}
    kept = {
        key: value for key, value in result.items() if key not in NOT_LOGGED
    }  # the trial's whole config unflattened
    for key, value in flatten_dict(kept, delimiter="/").items():
        if key in TO_CONFIG:
            facts[key] = value
        elif isinstance(value, numbers.Number):
            row[key] = value
    return row, facts


class WandbRuns(LoggerCallback):
    """One W&B run per trial, its id the trial's id, in the trial's dir of the run dir.

    A resumed sweep continues each trial's run (``resume="allow"``) and logs its earlier results
    again from ``result.json``: a killed driver takes with it what wandb had not yet written.

    Under several objectives (``goals``) each run's summary says whether the trial is on the
    Pareto front (``pareto``, and the run's tag ``pareto``): W&B draws no front, and its runs
    table and plots can filter and colour by these. A run is marked as it ends, against the
    trials ended so far; one that a later trial beats is opened again at the sweep's end and
    marked off, so the marks agree with ``show``.
    """

    def __init__(
        self,
        project: str,
        *,
        entity: str | None,
        group: str,
        mode: str,
        resuming: bool,
        sweep_id: str | None = None,
        goals: Objectives | None = None,
        world_size: Callable[[dict[str, Any]], int] | None = None,
        run_dir: Path | None = None,
    ):
        self.run_dir = run_dir  # the trials' runs go in their dirs there (the local copy of a URI storage's)
        self.init_kwargs: dict[str, Any] = {"project": project, "group": group, "mode": mode}
        if entity:
            self.init_kwargs["entity"] = entity
        self.resuming = resuming
        self.sweep_id = sweep_id  # the W&B sweep the runs join (wandb_sweep.py); None: none
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._open: set[str] = set()  # trials whose run is started and not yet ended
        self._started: set[str] = set()  # every trial that has had a run in this driver
        self.goals = goals if goals and goals.several else Objectives()  # a front to mark only among several
        self.world_size = world_size
        self._points: dict[str, tuple[float, ...] | None] = {}  # the ended trials' objectives
        self._marked: dict[str, bool] = {}  # the front membership each run's summary holds

    def __getstate__(self) -> dict[str, Any]:  # Tune pickles its RunConfig, callbacks included
        fresh = {"_queue": None, "_thread": None, "_open": set(), "_started": set(), "_points": {}, "_marked": {}}
        return {**self.__dict__, **fresh}

    def setup(self, *args: Any, **kwargs: Any) -> None:
        os.environ.setdefault(WANDB_SILENT, "true")
        self._queue = queue.Queue()
        self._thread = threading.Thread(
            target=self._write, args=(self._queue, self.sweep_id), name="raysweep-wandb", daemon=True
        )
        self._thread.start()

    def log_trial_start(self, trial: Any) -> None:
        if trial.trial_id in self._open:  # a restarted trial goes on in its run
            return
        trial_dir = self._dir(trial)
        Path(trial_dir).mkdir(parents=True, exist_ok=True)
        again = self.resuming or trial.trial_id in self._started
        init = {
            **self.init_kwargs,
            "id": trial.trial_id,
            "name": str(trial),
            "dir": trial_dir,
            "config": {**trial.config, "trial_log_path": trial.path},
            "resume": "allow" if again else None,
        }
        self._open.add(trial.trial_id)
        self._queue.put(("start", trial.trial_id, init))
        if self.resuming and trial.trial_id not in self._started:
            self._replay(trial)
        self._started.add(trial.trial_id)

    def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
        if trial.trial_id not in self._open:
            self.log_trial_start(trial)
        self._queue.put(("log", trial.trial_id, loggable(result)))

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        if trial.trial_id in self._open:
            self._open.discard(trial.trial_id)
            if self.goals:  # against the trials ended so far: one pass, not the whole front again
                point = self._objectives(trial)
                self._mark(trial.trial_id, on_front(point, self._points.values(), self.goals))
                self._points[trial.trial_id] = point
            self._queue.put(("end", trial.trial_id, 1 if failed else 0))

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        """End every run still open (after Ctrl-C, Tune ends none), then wait a bounded time."""
        if self._thread is None:
            return
        if self.goals:
            self._mark_the_front(trials)
        for trial_id in list(self._open):
            self._queue.put(("end", trial_id, 0))
        self._open.clear()
        self._queue.put(None)
        self._thread.join(END_WAIT_S)
        if self._thread.is_alive():
            print(f"W&B: runs still writing after {END_WAIT_S} s were left unfinished", file=sys.stderr)
        else:
            import wandb

            wandb.teardown()  # ends the wandb-core process the runs shared
        self._thread = None

    def _objectives(self, trial: Any) -> tuple[float, ...] | None:
        size = self.world_size(trial.config) if self.world_size else 1
        return self.goals.values(trial.last_result or {}, size)

    def _mark(self, trial_id: str, on_front: bool, reopen: dict[str, Any] | None = None) -> None:
        """The run's summary and tag say ``on_front``; a run already ended is opened with ``reopen``."""
        self._marked[trial_id] = on_front
        self._queue.put(("mark", trial_id, (on_front, reopen)))

    def _mark_the_front(self, trials: list) -> None:
        """Every run whose mark differs from the sweep's final front, this driver's and earlier ones'
        (a resumed sweep's runs ended in an earlier driver: their marks are unknown here)."""
        logged = [t for t in trials if t.trial_id in self._started or t.last_result]
        on_front = front([self._objectives(t) for t in logged], self.goals)
        for trial, on in zip(logged, on_front, strict=True):
            if self._marked.get(trial.trial_id) == on:
                continue
            reopen = None
            if trial.trial_id not in self._open:
                reopen = {**self.init_kwargs, "id": trial.trial_id, "dir": self._dir(trial), "resume": "allow"}
            self._mark(trial.trial_id, on, reopen)

    def _dir(self, trial: Any) -> str:
        """The trial's dir on this machine: ``trial.path`` is on the storage, which may be a URI's."""
        return str(self.run_dir / Path(trial.path).name) if self.run_dir is not None else trial.path

    def _replay(self, trial: Any) -> None:
        results = Path(trial.local_path or "", "result.json")  # restored there by ResultLog
        if not results.exists():
            results = Path(self._dir(trial)) / "result.json"
        if results.exists():
            for line in results.read_text().splitlines():
                if line.strip():
                    self._queue.put(("log", trial.trial_id, loggable(json.loads(line))))

    @staticmethod
    def _write(ops: queue.Queue, sweep_id: str | None) -> None:
        """The W&B thread: start, log to and end runs, in the order Tune's loop queued them."""
        import wandb

        # console off: the driver's terminal is not a trial's output
        settings = wandb.Settings(console="off", silent=True, sweep_id=sweep_id)
        runs: dict[str, Any] = {}
        facts: dict[str, dict[str, Any]] = {}
        warned: set[str] = set()  # one line per kind of failure; driver.log has each
        while (op := ops.get()) is not None:
            kind, trial_id, arg = op
            try:
                if kind == "start":
                    runs[trial_id] = wandb.init(**arg, reinit="create_new", allow_val_change=True, settings=settings)
                elif kind == "mark":
                    on_front, reopen = arg
                    run = runs.get(trial_id)
                    if run is None and reopen is not None:
                        run = wandb.init(**reopen, reinit="create_new", allow_val_change=True, settings=settings)
                    if run is not None:
                        run.summary["pareto"] = on_front
                        run.tags = ("pareto",) if on_front else ()
                        if trial_id not in runs:
                            run.finish()
                elif trial_id not in runs:  # its start failed, and said so
                    continue
                elif kind == "log":
                    row, new_facts = arg
                    if new_facts and new_facts != facts.get(trial_id):
                        runs[trial_id].config.update(new_facts, allow_val_change=True)
                        facts[trial_id] = new_facts
                    runs[trial_id].log(row, step=row.get("training_iteration"))
                else:
                    runs.pop(trial_id).finish(exit_code=arg)
                    facts.pop(trial_id, None)
            except Exception as e:  # W&B trouble must not end the sweep; the run dir has every result
                logger.exception("W&B %s of trial %s failed", kind, trial_id)
                if kind not in warned:
                    warned.add(kind)
                    print(
                        f"W&B: {kind} of trial {trial_id}'s run failed ({e}); the run dir keeps every result",
                        file=sys.stderr,
                    )
                if kind == "start":
                    runs.pop(trial_id, None)
