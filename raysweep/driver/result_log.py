"""Each trial's ``result.json``: one JSON line per report, kept whole across restarts and resumes.

Tune's own JSON logger is off (``ray_settings.py``); this one is built on Tune's public
``LoggerCallback`` and differs where a sweep needs it to (see ``ResultLog``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

from ray.tune.logger import LoggerCallback

from raysweep.private_api import trial_filesystem
from raysweep.runs.files import RESULTS_FILE, TUNE_KEYS, replace_text
from raysweep.runs.storage import read_text
from raysweep.values import finite_number, json_default

PARAMS_FILE = "params.json"  # the trial's flat config, where Tune's own logger put it


class ResultLog(LoggerCallback):
    """A trial's reports in ``result.json`` in its dir, each iteration once.

    * When a trial (re)starts, the driver's copy (Ray's staging dir, synced to the run dir every
      few minutes) is kept if it has one: a trial that failed and restarted from its last
      checkpoint keeps the results logged since. A driver that resumes the sweep has none, and
      copies the run dir's back first, for a trial that resumes from a checkpoint.
    * A result Tune sends again is skipped; a result for an iteration already logged (the trial
      went back to an earlier checkpoint) drops the lines from that iteration on.
    """

    def __init__(self) -> None:
        self._files: dict[Any, TextIO] = {}
        self._last: dict[str, dict[str, Any] | None] = {}

    def log_trial_start(self, trial: Any) -> None:
        self._close(trial)
        trial.init_local_path()
        local = Path(trial.local_path)
        (local / PARAMS_FILE).write_text(json.dumps(trial.config, indent=2, sort_keys=True, default=json_default))
        stored = f"{trial.path}/{RESULTS_FILE}"
        if _empty(local / RESULTS_FILE) and trial.checkpoint and Path(stored) != local / RESULTS_FILE:
            text = read_text(trial_filesystem(trial), stored)  # on the storage, which may be a URI's
            if text:
                (local / RESULTS_FILE).write_text(text)
        self._files[trial] = (local / RESULTS_FILE).open("at")

    def log_trial_result(self, iteration: int, trial: Any, result: dict) -> None:
        """Skip a result Tune sends again: a trial that finished just before its driver was
        killed is restored at its end and re-sends its last result, which is already logged.

        A result for an iteration already logged means the trial went back to an earlier
        checkpoint (a killed driver's saved state lags the results it logged): the lines from
        that iteration on are dropped, so the curve holds each iteration once, as last trained.
        """
        if trial not in self._files:
            self.log_trial_start(trial)
        if trial.trial_id not in self._last:
            self._last[trial.trial_id] = _last_line(Path(trial.local_path, RESULTS_FILE))
        last = self._last[trial.trial_id]
        if last is not None and _same_report(last, result):
            return
        now, before = _iteration(result), _iteration(last or {})
        if now is not None and before is not None and now <= before:
            self._rewind(trial, now)
        self._last[trial.trial_id] = dict(result)
        f = self._files[trial]
        f.write(json.dumps(result, default=json_default) + "\n")
        f.flush()

    def _rewind(self, trial: Any, iteration: float) -> None:
        """Drop the logged results from ``iteration`` on (rare: only after going back to a checkpoint)."""
        self._close(trial)
        path = Path(trial.local_path, RESULTS_FILE)
        kept = []
        for line in path.read_text().splitlines() if path.exists() else []:
            try:
                logged = _iteration(json.loads(line))
            except json.JSONDecodeError:
                continue  # the line a killed driver was writing
            if logged is not None and logged < iteration:
                kept.append(line + "\n")
        replace_text(path, "".join(kept))
        self._files[trial] = path.open("at")

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        """Forget the ended trial: the driver's memory stays flat over a long sweep."""
        self._close(trial)
        self._last.pop(trial.trial_id, None)

    def _close(self, trial: Any) -> None:
        f = self._files.pop(trial, None)
        if f is not None:
            f.close()


def _empty(path: Path) -> bool:
    return not path.exists() or path.stat().st_size == 0


def _same_report(last: dict[str, Any], result: dict[str, Any]) -> bool:
    """The same iteration with the same reported values: a re-sent result, not a new one."""
    if last.get("training_iteration") != result.get("training_iteration"):
        return False
    keys = (set(last) | set(result)) - TUNE_KEYS  # they differ when Tune sends a result again
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
