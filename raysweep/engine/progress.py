"""Trial bookkeeping and the live view: a Tune callback on the driver.

It keeps ``trials.jsonl`` in the run dir current (status, flat config, last metrics, workers,
wall time, error) so ``show`` works during a sweep and after a killed driver, and it prints
a compact status: counts, best so far, elapsed and an ETA.

``trials.jsonl`` is a journal: each change to a trial appends that trial's whole row, and a
reader keeps each trial's last line. A result costs the driver one short append however many
trials the sweep has (a 2,000-trial sweep rewrote the whole file per result); the file is
compacted to one line per trial when the sweep ends and when a driver resumes it.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from ray.tune import Callback
from ray.tune.logger import JsonLoggerCallback
from ray.tune.stopper import Stopper

from raysweep.engine.watchdog import read_explanation
from raysweep.spec import SweepSpec
from raysweep.spec.space import plain

# Not *.json: Tune copies a run dir's top-level .json files into its staging dir on restore and
# syncs them back later, which would overwrite this file with the stale copy.
TRIALS_FILE = "trials.jsonl"
STATES = ("running", "pending", "done", "stopped", "failed")


def write_json(path: Path, data: Any) -> None:
    """Write atomically: a reader (or a killed driver) never sees half a file."""
    _replace(path, json.dumps(data, indent=1, default=str))


def _replace(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_trials(path: Path) -> list[dict[str, Any]]:
    """The rows of a run dir's trials file: each trial's last line, in the order trials first appeared."""
    if not path.exists():
        return []
    rows: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # blank, or the line a killed driver was writing
        rows[row["trial_id"]] = row
    return list(rows.values())


def finite_number(x: Any) -> bool:
    """A real number a metric can be ranked by (not a bool, NaN or inf)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


class SweepMonitor(Callback):
    def __init__(self, spec: SweepSpec, run_dir: Path, budget: int, quiet: bool = False, interval_s: float = 10.0):
        self.spec = spec
        self.stopped_by_scheduler: set[str] = set()  # the scheduler's own record, when it keeps one
        self.path = run_dir / TRIALS_FILE
        self.budget = budget
        self.quiet = quiet
        self.interval_s = interval_s
        self.tty = sys.stdout.isatty()
        self.rows: dict[str, dict[str, Any]] = {}
        # resuming: keep what the earlier driver recorded
        self.rows = {r["trial_id"]: r for r in read_trials(self.path)}
        if self.rows:
            self.compact()  # one line per trial, and no half line a killed driver left to append after
        self.started = time.time()
        self.last_print = 0.0
        self.first_error: str | None = None
        self.ended: list[str] = [r["status"] for r in self.rows.values() if r.get("status") in ("done", "stopped", "failed")]
        self.best_seen: tuple[float, dict[str, Any]] | None = None  # the live line's best: any report's, never worse later
        self._reconciled = not self.rows  # a fresh sweep has nothing left over

    # --- bookkeeping ---
    def _row(self, trial: Any) -> dict[str, Any]:
        row = self.rows.setdefault(trial.trial_id, {"trial_id": trial.trial_id, "start": time.time()})
        row["config"] = {k: plain(v) for k, v in trial.config.items()}
        row["num_workers"] = int(self.spec.trial_size(trial.config))
        row["trial_dir"] = trial.path  # in the run dir (trial.local_path is Ray's session staging copy)
        return row

    def _save(self, row: dict[str, Any]) -> None:
        """Append the trial's row: constant work per change, however long the sweep."""
        with open(self.path, "a") as f:
            f.write(json.dumps(row, default=str) + "\n")

    def compact(self) -> None:
        """Rewrite the journal as one line per trial (atomically)."""
        _replace(self.path, "".join(json.dumps(r, default=str) + "\n" for r in self.rows.values()))

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        row = self._row(trial)
        row["status"] = "running"
        row.pop("error", None)  # a failed trial run again (resume --retry-failed) starts clean
        self._save(row)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self.compact()

    def interrupted(self) -> None:
        """The sweep was interrupted: its running trials wait for ``resume`` (``show``: pending)."""
        for row in self.rows.values():
            if row.get("status") == "running":
                row["status"] = "pending"
        self.compact()

    def initial_failures(self, limit: int) -> bool:
        """The sweep's first ``limit`` trials to end all failed (W&B's agent gives up at 5)."""
        return limit > 0 and len(self.ended) >= limit and all(s == "failed" for s in self.ended[:limit])

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        row = self._row(trial)
        row["status"] = "running"
        row["iterations"] = result.get("training_iteration")
        row["metrics"] = {k: plain(v) for k, v in result.items() if not isinstance(v, dict)}
        row["wall_s"] = round(time.time() - row["start"], 2)
        metric = self.spec.metric
        value = row["metrics"].get(metric.name) if metric else None
        if finite_number(value) and (self.best_seen is None or _better(value, self.best_seen[0], metric.goal)):
            self.best_seen = (value, row["config"])
        self._save(row)
        self._print(trials)

    def _end(self, trials: list, trial: Any, status: str, error: str | None = None) -> None:
        row = self._row(trial)
        row["status"] = status
        row["end"] = time.time()
        row["wall_s"] = round(row["end"] - row["start"], 2)
        self.ended.append(status)
        if error:
            row["error"] = error
            self.first_error = self.first_error or error
        self._save(row)
        self._print(trials, force=True)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._end(trials, trial, "stopped" if trial.trial_id in self.stopped_by_scheduler else "done")

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._end(trials, trial, "failed", _error_text(trial))

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        if not self._reconciled:
            self._reconcile(trials)

    def _reconcile(self, trials: list) -> None:
        """On resume, drop rows a killed driver left running for trials Tune never saved: Tune
        runs their configuration again under a new id, and ``show`` must list it once."""
        self._reconciled = True
        known = {t.trial_id for t in trials}
        stale = [k for k, r in self.rows.items() if r.get("status") == "running" and k not in known]
        for key in stale:
            del self.rows[key]
        if stale:
            self.compact()

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        self._print(trials)

    # --- the view ---
    def best(self) -> dict[str, Any] | None:
        metric = self.spec.metric
        if metric is None:
            return None
        scored = [r for r in self.rows.values() if finite_number((r.get("metrics") or {}).get(metric.name))]
        if not scored:
            return None
        pick = max if metric.goal == "maximize" else min
        return pick(scored, key=lambda r: r["metrics"][metric.name])

    def status_line(self, trials: list) -> str:
        counts = dict.fromkeys(STATES, 0)
        for r in self.rows.values():
            counts[r.get("status", "pending")] = counts.get(r.get("status", "pending"), 0) + 1
        counts["pending"] = sum(1 for t in trials if t.status == "PENDING")
        elapsed = time.time() - self.started
        finished = counts["done"] + counts["stopped"] + counts["failed"]
        parts = [f"[{_clock(elapsed)}]", " · ".join(f"{counts[s]} {s}" for s in STATES), f"of {self.budget}"]
        if 0 < finished < self.budget:
            parts.append(f"ETA {_clock(elapsed / finished * (self.budget - finished))}")
        if self.best_seen:
            value, config = self.best_seen
            params = ", ".join(f"{k}={_short(v)}" for k, v in config.items())
            parts.append(f"| best {self.spec.metric.name}={_short(value)} ({params})")
        return " ".join(parts)

    def _print(self, trials: list, force: bool = False) -> None:
        if self.quiet:
            return
        now = time.time()
        if not force and now - self.last_print < (1.0 if self.tty else self.interval_s):
            return
        self.last_print = now
        line = self.status_line(trials)
        if self.tty:
            width = shutil.get_terminal_size().columns
            sys.stdout.write("\r" + line[: width - 1].ljust(width - 1))
            if force:
                sys.stdout.write("\n")
        else:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()


class ResultLog(JsonLoggerCallback):
    """Tune's ``result.json`` logger, except that a trial restarted by this driver keeps its lines.

    When a trial (re)starts from a checkpoint, Tune copies ``result.json`` back from storage,
    which it syncs only every few minutes: a trial that failed and restarted from its last
    checkpoint lost the results logged since (a gap in its learning curve). The driver's own
    copy is never older than storage's, so it is kept whenever there is one.
    """

    def __init__(self) -> None:
        super().__init__()
        self._last: dict[str, dict[str, Any] | None] = {}

    def _restore_from_remote(self, file_name: str, trial: Any) -> None:
        local = Path(trial.local_path, file_name)
        if not (local.exists() and local.stat().st_size > 0):
            super()._restore_from_remote(file_name, trial)

    def log_trial_result(self, iteration: int, trial: Any, result: dict) -> None:
        """Skip a result Tune sends again: a trial that finished just before its driver was
        killed is restored at its end and re-sends its last result, which is already logged.

        A result for an iteration already logged means the trial went back to an earlier
        checkpoint (a killed driver's saved state lags the results it logged): the lines from
        that iteration on are dropped, so the curve holds each iteration once, as last trained.
        """
        if trial.trial_id not in self._last:
            self._last[trial.trial_id] = _last_line(Path(trial.local_path, "result.json"))
        last = self._last[trial.trial_id]
        if last is not None and _same_report(last, result):
            return
        now, before = _iteration(result), _iteration(last or {})
        if now is not None and before is not None and now <= before:
            self._rewind(trial, now)
        self._last[trial.trial_id] = dict(result)
        super().log_trial_result(iteration, trial, result)

    def _rewind(self, trial: Any, iteration: float) -> None:
        """Drop the logged results from ``iteration`` on (rare: only after going back to a checkpoint)."""
        if trial in self._trial_files:
            self._trial_files.pop(trial).close()
        path = Path(trial.local_path, "result.json")
        kept = []
        for line in path.read_text().splitlines() if path.exists() else []:
            try:
                logged = _iteration(json.loads(line))
            except json.JSONDecodeError:
                continue  # the line a killed driver was writing
            if logged is not None and logged < iteration:
                kept.append(line + "\n")
        _replace(path, "".join(kept))
        self._trial_files[trial] = path.open("at")

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        """Forget the ended trial: the driver's memory stays flat over a long sweep."""
        super().log_trial_end(trial, failed)
        self._last.pop(trial.trial_id, None)
        self._trial_configs.pop(trial, None)


# Keys Tune fills in itself, which differ when it sends a result again.
_BOOKKEEPING = {"timestamp", "date", "time_since_restore", "iterations_since_restore", "time_this_iter_s", "time_total_s",
                "pid", "hostname", "node_ip", "done", "checkpoint_dir_name", "config", "should_checkpoint"}  # fmt: skip


def _same_report(last: dict[str, Any], result: dict[str, Any]) -> bool:
    """The same iteration with the same reported values: a re-sent result, not a new one."""
    if last.get("training_iteration") != result.get("training_iteration"):
        return False
    keys = (set(last) | set(result)) - _BOOKKEEPING
    return all(json.dumps(last.get(k), default=str) == json.dumps(result.get(k), default=str) for k in keys)


def _iteration(result: dict[str, Any]) -> float | None:
    value = result.get("training_iteration")
    return value if finite_number(value) else None


def _last_line(path: Path) -> dict[str, Any] | None:
    """The last result a trial's ``result.json`` holds (read from its end), or None."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - 65536))
        lines = [ln for ln in f.read().splitlines() if ln.strip()]
    try:
        return json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None


class TargetStopper(Stopper):
    """End the sweep once any trial reaches ``metric.target``."""

    def __init__(self, metric: str, goal: str, target: float):
        self.metric, self.goal, self.target = metric, goal, target
        self.reached = False

    def __call__(self, trial_id: str, result: dict) -> bool:
        value = result.get(self.metric)
        if finite_number(value) and (value >= self.target if self.goal == "maximize" else value <= self.target):
            self.reached = True
        return False

    def stop_all(self) -> bool:
        return self.reached


class InitialFailureStopper(Stopper):
    """End the sweep when its first ``limit`` trials all failed: a script that fails on import
    would otherwise fail every trial of the budget (W&B's agent stops after 5)."""

    def __init__(self, monitor: SweepMonitor, limit: int):
        self.monitor, self.limit = monitor, limit

    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        return self.monitor.initial_failures(self.limit)


def _better(value: float, than: float, goal: str) -> bool:
    return value > than if goal == "maximize" else value < than


def _error_text(trial: Any) -> str:
    """The last lines of the trial's error, the part a user reads first.

    A trial the watchdog ended died with its process; its explanation is in the trial dir.
    """
    for trial_dir in (trial.path, trial.local_path):
        explanation = read_explanation(trial_dir or "")
        if explanation:
            return explanation
    path = Path(trial.local_path or "") / "error.txt"
    text = path.read_text() if path.exists() else str(getattr(trial, "error_msg", "") or "unknown error")
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(lines[-12:])


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
