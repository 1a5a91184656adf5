"""The driver's record and live view of a sweep: a Tune callback.

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
import re
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from ray.tune import Callback

from raysweep.driver.admission import Board
from raysweep.driver.budget import Ledger
from raysweep.runs.files import TRIALS_FILE, TUNE_KEYS, read_explanation, replace_text
from raysweep.runs.rows import Rows, TrialRow, read_rows
from raysweep.spec import SweepSpec
from raysweep.values import HOUR, clock, finite_number, plain, short, short_config
from raysweep.words import ENDED, STATES, TrialStatus


class SweepMonitor(Callback):
    def __init__(
        self,
        spec: SweepSpec,
        run_dir: Path,
        budget: int,
        *,
        quiet: bool = False,
        interval_s: float = 10.0,
        board: Board | None = None,
        rows: dict[str, TrialRow] | None = None,
        ledger: Ledger | None = None,
        stopped_by_scheduler: set[str] | None = None,
        never_placed: dict[str, str] | None = None,
    ):
        self.spec = spec
        self.board = board or Board()  # the admission's: reservations, backfilled trials
        # the scheduler's own records, which it keeps current: trials it stopped; trials failed for
        # nodes that left, and why
        self.stopped_by_scheduler = stopped_by_scheduler if stopped_by_scheduler is not None else set()
        self.never_placed = never_placed if never_placed is not None else {}
        self.ledger = ledger  # the sweep's budget, if it has one (the line shows the spend)
        self.path = run_dir / TRIALS_FILE
        self.budget = budget
        self.quiet = quiet
        self.interval_s = interval_s
        self.tty = sys.stdout.isatty()
        self.rows = journal_rows(run_dir) if rows is None else rows  # the estimates read the same dict
        if self.rows:
            self.compact()  # one line per trial, and no half line a killed driver left to append after
        self.started = time.time()
        self.last_print = 0.0
        self.first_error: str | None = None
        self.stopped_at: float | None = None  # when Tune stopped every trial (on_experiment_end)
        self.ended: list[str] = [r.status for r in self.rows.values() if r.ended]
        self.ended_before = len(self.ended)  # by an earlier driver of this sweep: not in this one's ETA
        self.finished_before = {k for k, r in self.rows.items() if r.finished}
        self.warned_metric = any(not r.metric_logged for r in self.rows.values())
        self._reconciled = not self.rows  # a fresh sweep has nothing left over

    # --- bookkeeping ---
    def _row(self, trial: Any, started: bool = True, **changes: Any) -> TrialRow:
        """The trial's row with Tune's view of it and ``changes``, kept (not yet saved)."""
        row = self.rows.get(trial.trial_id) or TrialRow(trial.trial_id, created=time.time())
        row = replace(
            row,
            start=row.start if row.start is not None or not started else time.time(),
            config={k: plain(v) for k, v in trial.config.items()},
            world_size=_world_size(self.spec, trial.config),
            trial_dir=_trial_dir(trial, self.path.parent) or row.trial_dir,
            **changes,
        )
        self.rows[trial.trial_id] = row
        return row

    def _save(self, row: TrialRow) -> None:
        """Append the trial's row: constant work per change, however long the sweep."""
        with open(self.path, "a") as f:
            f.write(json.dumps(row.to_json(), default=str) + "\n")

    def compact(self) -> None:
        """Rewrite the journal as one line per trial (atomically)."""
        replace_text(self.path, "".join(json.dumps(r.to_json(), default=str) + "\n" for r in self.rows.values()))

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        # a failed trial run again (resume --retry-failed) starts clean; its running time is
        # counted from here (its cost: workers x run_s)
        key = trial.trial_id
        self._grew(trial)
        admitted = {"reserved_at": self.board.reserved_at.get(key), "backfilled": key in self.board.backfilled or None}
        admitted = {k: v for k, v in admitted.items() if v is not None}
        self._save(self._row(trial, status=TrialStatus.RUNNING, error=None, since=time.time(), **admitted))

    def _grew(self, trial: Any) -> None:
        """A trial that goes on at another size (``growth.py``: Tune paused it at a promotion, to fill
        idle slots or to give them back, and the admission started it again): its row accounts the
        time before at its size before."""
        row = self.rows.get(trial.trial_id)
        size = _world_size(self.spec, trial.config)
        if self.spec.grow is None or row is None or not row.iterations or size is None or size == row.world_size:
            return
        self.rows[trial.trial_id] = row.grown(size, time.time())

    @staticmethod
    def _account(row: TrialRow, running: bool = True) -> TrialRow:
        """Add the time since the last account to the trial's ``run_s`` (the seconds it held its
        workers, every driver's, start-up included); ``running`` False: its run ended here."""
        return row.accounted(time.time(), running)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        """Tune has stopped every trial: a trial still running (an interrupt, the budget) held its
        workers until now, not until the driver has ended its warm workers (16 s more per trial on
        2 loaded cores, counted as spend)."""
        for trial in trials:  # a trial Tune made that never started (it waited for room): pending
            if trial.trial_id not in self.rows:
                self._row(trial, started=False, status=TrialStatus.PENDING)  # it starts when it runs
        self.stopped_at = time.time()
        for key, row in self.rows.items():
            if row.status == TrialStatus.RUNNING:
                self.rows[key] = self._account(row, running=False)
        self.compact()

    def sweep_stopped(self) -> None:
        """A stopper ended the sweep: trials still running then were stopped with it (and ended
        when Tune stopped them: their rows have an end, as every ended trial's), and trials Tune
        made that never started are no trials of it."""
        end = self.stopped_at or time.time()
        for key, row in list(self.rows.items()):
            if row.status == TrialStatus.PENDING and row.start is None:
                del self.rows[key]
            elif row.status == TrialStatus.RUNNING:
                self.rows[key] = self._account(row, running=False).end_at(TrialStatus.STOPPED, end)
        self.compact()

    def interrupted(self) -> list[TrialRow]:
        """The sweep was interrupted: its running trials and those that never started wait for
        ``resume`` (``show``: pending); returns their rows."""
        for key, row in self.rows.items():
            if row.status == TrialStatus.RUNNING:
                self.rows[key] = replace(self._account(row, running=False), status=TrialStatus.PENDING)
        self.compact()
        return [r for r in self.rows.values() if r.status == TrialStatus.PENDING]

    def initial_failures(self, limit: int) -> bool:
        """The sweep's first ``limit`` trials to end all failed (W&B's agent gives up at 5)."""
        mine = self.ended[self.ended_before :]  # this driver's, as each of W&B's agents counts its own
        return limit > 0 and len(mine) >= limit and all(s == TrialStatus.FAILED for s in mine[:limit])

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        self._held_from(trial.trial_id)
        row = self._row(
            trial,
            status=TrialStatus.RUNNING,
            iterations=result.get("training_iteration"),
            metrics={k: plain(v) for k, v in result.items() if not isinstance(v, dict)},
        )
        row = self._account(replace(row, wall_s=round(time.time() - row.start, 2)))
        missing = self.spec.objectives.missing(result)
        if missing:
            row = replace(row, metric_logged=False)
            self._metric_not_logged(row, missing)
        self.rows[row.trial_id] = row
        self._save(row)
        self._print(trials)

    def _held_from(self, trial_id: str) -> None:
        """A trial that placed its own slots (``admission.py``, ``trial/slots.py``) starts, and is
        accounted, from when it held them: its process only waited before."""
        held, row = self.board.held_at.pop(trial_id, None), self.rows.get(trial_id)
        if held is None or row is None or row.start is None or row.iterations or held <= row.start:
            return
        since = held if row.since is not None and row.since < held else row.since
        self.rows[trial_id] = replace(row, start=held, since=since)

    def _metric_not_logged(self, row: TrialRow, missing: tuple[str, ...]) -> None:
        """A W&B-style function or script ended without logging the metric: done, with no value (as
        its W&B run is), marked in the row (``metric_logged``); said once a sweep."""
        if self.warned_metric:
            return
        self.warned_metric = True
        logged = ", ".join(sorted(k for k in row.metrics if k not in TUNE_KEYS)) or "nothing"
        print(
            f"\nwarning: trial {row.trial_id} ended without logging the sweep's metric "
            f"{', '.join(map(repr, missing))} (metric.name); it logged: {logged}. As under wandb.agent, such a trial "
            "is done with no value (show: not logged); bayes leaves it out of its model, and no scheduler stops it.",
            file=sys.stderr,
        )

    def _end(self, trials: list, trial: Any, status: str, error: str | None = None) -> None:
        row = self._account(self._row(trial), running=False)
        end = time.time()
        row = replace(row.end_at(status, end), error=error or row.error)
        self.rows[row.trial_id] = row
        self.ended.append(status)
        if error:
            self.first_error = self.first_error or error
        self._save(row)
        self._print(trials, force=True)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        if trial.trial_id in self.never_placed:
            self._end(trials, trial, TrialStatus.FAILED, self.never_placed[trial.trial_id])
            return
        self._end(
            trials, trial, TrialStatus.STOPPED if trial.trial_id in self.stopped_by_scheduler else TrialStatus.DONE
        )

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        """A trial Tune starts again: one that left a draining or lost node counts a preemption."""
        if _was_preempted(trial):
            row = self.rows.get(trial.trial_id) or TrialRow(trial.trial_id)
            self._save(self._row(trial, preemptions=row.preemptions + 1))

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._end(trials, trial, TrialStatus.FAILED, _error_text(trial, self.path.parent))

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        if not self._reconciled:
            self._reconcile(trials)

    def _reconcile(self, trials: list) -> None:
        """On resume, drop rows a killed driver left running or pending for trials Tune never saved:
        Tune runs their configuration again under a new id (or makes a new trial in their place),
        and ``show`` must list each once."""
        self._reconciled = True
        known = {t.trial_id for t in trials}
        unfinished = (TrialStatus.RUNNING, TrialStatus.PENDING)
        stale = [k for k, r in self.rows.items() if r.status in unfinished and k not in known]
        for key in stale:
            del self.rows[key]
        if stale:
            self.compact()

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        if len(trials) > len(self.rows):  # Tune made trials: each waits, pending, from now on
            for trial in trials:
                if trial.trial_id not in self.rows:
                    self._save(self._row(trial, started=False, status=TrialStatus.PENDING))
        self._print(trials)

    # --- the view ---
    def best(self, ended: bool = True) -> TrialRow | None:
        """The best trial by its last report, among the ended trials (``ended``: a value that can no
        longer change, so the line's best never goes back), else among all: under one metric (none
        under several: a front, or none)."""
        metric = self.spec.objectives.single
        if metric is None:
            return None
        rows = [r for r in self.rows.values() if r.status in ENDED or not ended]
        best = min(rows, key=lambda r: metric.best_first(r.metric(metric.name)), default=None)
        return best if best is not None and finite_number(best.metric(metric.name)) else None

    def status_line(self, trials: list) -> str:
        counts = dict.fromkeys(STATES, 0)
        for r in self.rows.values():
            counts[r.status] = counts.get(r.status, 0) + 1
        # Tune's status; PAUSED: a trial the admission holds back, waiting as a pending one does
        counts[TrialStatus.PENDING] = sum(1 for t in trials if t.status in ("PENDING", "PAUSED"))
        elapsed = time.time() - self.started
        finished = sum(counts[s] for s in ENDED)
        here = len(self.ended) - self.ended_before  # the ETA's rate: trials this driver ended, in its time
        parts = [f"[{clock(elapsed)}]", " · ".join(f"{counts[s]} {s}" for s in STATES), f"of {self.budget}"]
        if here and finished < self.budget:
            parts.append(f"ETA {clock(elapsed / here * (self.budget - finished))}")
        reservation = self.board.reservation
        if reservation is not None and any(
            t.trial_id == reservation.trial_id and t.status != "RUNNING" for t in trials
        ):
            when = f"starts in ~{clock(max(0.0, reservation.at - time.time()))}" if reservation.at else "waits"
            workers = f"{reservation.size} worker{'s' if reservation.size != 1 else ''}"
            parts.append(f"| trial {reservation.trial_id} ({workers}) reserved, {when}")
        if self.ledger is not None:
            parts.append(f"spent {self.ledger.spent_s() / HOUR:.3g}/{self.ledger.limit_s / HOUR:g} {self.ledger.unit}")
        # each trial ranked by its last report, as show, the report and W&B's summary rank it; "best"
        # is the ended trials' (it only gets better), "leading" a running trial's while none has ended
        best, word = self.best(), "best"
        if best is None:
            best, word = self.best(ended=False), "leading"
        if best:
            name = self.spec.objectives.single.name
            said = "of the ended trials" if word == "best" else "a running trial's last report"
            parts.append(f"| {word} {name}={short(best.metric(name))} ({said})")
            parts.append(f"({short_config(best.config)})")
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


def journal_rows(run_dir: Path) -> dict[str, TrialRow]:
    """The run dir's rows as a driver takes them over: what an earlier driver recorded, its open
    accounts closed (a killed driver's last reports counted them)."""
    return Rows({r.trial_id: replace(r, since=None) for r in read_rows(run_dir)})


def _was_preempted(trial: Any) -> bool:
    """The trial's last failure was a preemption (``trial/preemption.py``'s, or Ray's actor of a preempted node)."""
    path = Path(trial.local_path or "") / "error.txt"
    last = path.read_text().rpartition("Failure #")[2] if path.exists() else ""
    return "preempted: " in last or "DRAIN_PREEMPTED" in last or "preempted=True" in last


def _error_text(trial: Any, run_dir: Path) -> str:
    """The part of the trial's error a user reads first: the sentence of one of raysweep's own
    errors (they say what happened and what to do) without its traceback, else the last lines of
    the traceback; never terminal colour codes (the text goes to files and pipes).

    A trial the watchdog ended died with its process; its explanation is in the trial dir.
    """
    for trial_dir in (trial.path, trial.local_path, run_dir / Path(trial.path or "-").name):
        explanation = read_explanation(trial_dir or "")
        if explanation:
            return explanation
    path = Path(trial.local_path or "") / "error.txt"
    text = path.read_text() if path.exists() else str(getattr(trial, "error_msg", "") or "unknown error")
    return error_summary(text)


_COLOUR = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_OWN_ERROR = re.compile(r"^\s*raysweep(?:\.\w+)*\.(\w+): ", re.M)


def error_summary(text: str) -> str:
    """``text`` (a traceback) as ``_error_text`` shows it."""
    text = _COLOUR.sub("", text)
    own = list(_OWN_ERROR.finditer(text))
    if own:
        return text[own[-1].end() :].strip()
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(lines[-12:])


def _trial_dir(trial: Any, run_dir: Path) -> str | None:
    """The trial's dir in the run dir (``trial.local_path`` is Ray's session staging copy, and
    ``trial.path`` is on the storage, which may be a URI's); None for a trial held back before
    Tune named its dir."""
    try:
        return str(run_dir / Path(trial.path).name)
    except RuntimeError:
        return None


def _world_size(spec: SweepSpec, config: dict[str, Any]) -> int | None:
    try:
        return spec.world_size(config)
    except ValueError:  # the trial fails with the explanation
        return None
