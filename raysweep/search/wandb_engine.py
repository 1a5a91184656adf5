"""W&B's new sweep format as ``wandb sweep-scheduler`` (wandb 0.31) runs it: W&B's own optimizer
(engine optuna or ax, built by ``wandb_optimizer.py``) asked and told inside a Ray Tune ``Searcher``.

raysweep adds what W&B's scheduler has not:

* ``cost_hours``: a trial's measured workers x hours, in the summary W&B's optimizer reads;
* resume: the search is pickled without the optimizer, and rebuilt as W&B's scheduler rebuilds
  one on restart: its ended trials told as existing finished runs, its running ones adopted;
* pruning: a user's study with a pruner (or a client with an early-stopping strategy) stops
  trials through the sweep's Tune scheduler (``search/schedulers.py``), which asks ``prune``.

Each ``suggest`` is one ``ask_n_runs(1)``: None (Ax waits for data) proposes nothing for now, an
empty answer ends the search, as does a terminator that fires after a trial ends (``end``).
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass, field
from typing import Any

from ray.tune.search import Searcher

from raysweep import private_api
from raysweep.search.wandb_optimizer import build_optimizer, sentence
from raysweep.spec import SweepSpec
from raysweep.spec.objectives import COST, measured_cost
from raysweep.values import plain
from raysweep.words import TrialStatus

EXHAUSTED = "W&B's optimizer has no configuration left to propose"  # W&B: an empty ask finishes the sweep


@dataclass
class TrialRecord:
    """What the search knows of one of its trials: its config, W&B's id for it, its history."""

    config: dict[str, Any]
    run_id: Any = None
    history: list[dict[str, Any]] = field(default_factory=list)
    pruned: bool = False


@dataclass(frozen=True)
class Ended:
    """A trial that ended, as W&B's scheduler tells an existing finished run on restart."""

    config: dict[str, Any]
    state: str  # a RunState value
    summary: dict[str, Any]
    history: list[dict[str, Any]]


def told_priors(spec: SweepSpec, priors: list[Any]) -> list[Ended]:
    """Earlier sweeps' finished trials (``runs/priors.py``), as the finished runs W&B's scheduler tells
    its optimizer before its first ask (its summary holds each objective's value)."""
    names = spec.objectives.names
    return [Ended(dict(p.config), "finished", dict(zip(names, p.values, strict=True)), []) for p in priors]


def ended_rows(rows: list[Any]) -> list[Ended]:
    """This sweep's own ended trials (``runs/rows.TrialRow``), for a driver that joins it: W&B's
    scheduler, restarted, tells its optimizer the sweep's runs so."""
    states = {TrialStatus.DONE: "finished", TrialStatus.FAILED: "failed", TrialStatus.STOPPED: "killed"}
    return [Ended(dict(r.config), states[r.status], _numbers(r.metrics), []) for r in rows if r.status in states]


def _numbers(result: dict[str, Any]) -> dict[str, Any]:
    return {
        k: plain(v)
        for k, v in result.items()
        if isinstance(plain(v), (int, float)) and not isinstance(plain(v), bool) and math.isfinite(plain(v))
    }


class EngineSearch(Searcher):
    """W&B's optimizer behind Tune's ``Searcher``; ``told``: earlier trials (warm start, or a
    joining driver's view of the sweep) told as existing finished runs before the first ask."""

    def __init__(self, spec: SweepSpec, seed: int | None = None, told: list[Ended] | None = None):
        metric, mode = spec.objectives.tune()
        super().__init__(metric=metric, mode=mode)
        self.spec, self.seed = spec, seed
        self.told = list(told or ())
        self.trials: dict[str, TrialRecord] = {}  # Tune trial id -> its record, until it ends
        self.ended: list[Ended] = []
        self.end: str | None = None  # why the search proposes no more (a terminator, an exhausted space)
        self.tell_errors: dict[
            str, str
        ] = {}  # trial id -> what W&B's optimizer raised when told (W&B: stops tracking it)
        self._optimizer: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"_optimizer": None}  # rebuilt from the records on restore, as W&B's scheduler restarts

    def set_search_properties(self, metric: Any, mode: Any, config: dict, **spec: Any) -> bool:
        return True  # the sweep's objectives, W&B's optimizer's own

    @property
    def optimizer(self) -> Any:
        if self._optimizer is None:
            self._optimizer = self._rebuilt()
        return self._optimizer

    def _rebuilt(self) -> Any:
        w = private_api.wandb_scheduler()
        optimizer = build_optimizer(self.spec, self.seed).optimizer
        for run in [*self.told, *self.ended]:
            with contextlib.suppress(Exception):  # W&B's scheduler skips a run its optimizer rejects
                optimizer.tell_existing_finished_run(_with_metrics(w, run.config, run.state, run.summary, run.history))
        for record in self.trials.values():  # in flight when the search was saved: Tune runs them again
            record.run_id = optimizer.tell_existing_active_run(
                w.Run(config=w.RunConfig.from_values(record.config), state=w.RunState.RUNNING, wandb_run_id="")
            )
        return optimizer

    def suggest(self, trial_id: str) -> dict | None:
        if self.end:
            return Searcher.FINISHED
        asked = self.optimizer.ask_n_runs(1)
        if asked is None:  # Ax waits for the running trials' data
            return None
        if not asked:
            self.end = EXHAUSTED
            return Searcher.FINISHED
        config = asked[0].config.flat_dict()
        self.trials[trial_id] = TrialRecord(config, asked[0].run_id)
        return dict(config)

    def observe(self, trial_id: str, result: dict) -> None:
        """A report: one more step of the run's history, told to W&B's optimizer as a running run's."""
        record = self.trials.get(trial_id)
        step = result.get("training_iteration")
        if record is None or (record.history and record.history[-1].get("_step") == step):
            return
        record.history.append({"_step": step, **_numbers(result)})
        self._tell(trial_id, record, "running", _numbers(result))

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        self.observe(trial_id, result)

    def prune(self, trial_id: str, result: dict) -> bool:
        """Whether W&B's optimizer stops the trial at this report (a study's pruner, Ax's early stopping)."""
        self.observe(trial_id, result)
        record = self.trials.get(trial_id)
        if record is None or record.run_id is None:
            return False
        w = private_api.wandb_scheduler()
        data = _with_metrics(w, record.config, "running", _numbers(result), record.history)
        record.pruned = bool(self.optimizer.prune_runs([record.run_id], [data]))
        return record.pruned

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        optimizer = self.optimizer  # a restored search is rebuilt first, with this trial among the running
        record = self.trials.pop(trial_id, None)
        if record is None:
            return
        state = "failed" if error else "killed" if record.pruned else "finished"
        summary = _numbers(result or {})
        cost = measured_cost(summary, _size(self.spec, record.config))
        if COST in self.spec.objectives.names and COST not in summary and cost is not None:
            summary[COST] = cost
        self._tell(trial_id, record, state, summary)
        self.ended.append(Ended(record.config, state, summary, record.history))
        if self.end is None and optimizer.has_terminator() and optimizer.should_terminate_sweep():
            engine = self.spec.engine
            self.end = (  # W&B: "the optimizer terminated the sweep"
                f"the terminator that {engine.optimizer}() in {os.path.basename(engine.source)} returned ended "
                f"the search after {len(self.ended)} trials"
            )

    def _tell(self, trial_id: str, record: TrialRecord, state: str, summary: dict[str, Any]) -> None:
        if record.run_id is None or trial_id in self.tell_errors:
            return
        w = private_api.wandb_scheduler()
        try:
            self.optimizer.tell_run(record.run_id, _with_metrics(w, record.config, state, summary, record.history))
        except Exception as e:  # noqa: BLE001  (W&B's scheduler: a failed tell stops tracking that run)
            self.tell_errors[trial_id] = sentence(e)

    def save(self, checkpoint_path: str) -> None:
        import pickle

        with open(checkpoint_path, "wb") as f:
            pickle.dump(self.__getstate__(), f)

    def restore(self, checkpoint_path: str) -> None:
        import pickle

        with open(checkpoint_path, "rb") as f:
            self.__dict__.update(pickle.load(f))


def _size(spec: SweepSpec, config: dict[str, Any]) -> int:
    try:
        return spec.world_size(config)
    except ValueError:
        return 1


def _with_metrics(w: Any, config: dict, state: str, summary: dict, history: list) -> Any:
    return w.RunWithMetrics(
        config=w.RunConfig.from_values(config),
        state=w.RunState(state),
        wandb_run_id="",
        summary_metrics=dict(summary),
        history_metrics=list(history),
    )
