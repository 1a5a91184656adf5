"""trials.jsonl as a journal: a result appends its trial's row and never rewrites the file,
a reader keeps each trial's last row, and a line a killed driver left half-written is
dropped; result.json holds each iteration once. Runs the driver's callbacks on stand-in
trials; no Ray is started."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

from conftest import write_spec

from raysweep.driver.monitor import SweepMonitor
from raysweep.driver.outcome import ended_counts
from raysweep.driver.result_log import ResultLog
from raysweep.runs.files import read_trials
from raysweep.spec import load_spec


@dataclass(eq=False)
class Trial:
    trial_id: str
    config: dict
    path: str
    local_path: str
    status: str = "RUNNING"
    checkpoint: object = None

    def init_local_path(self) -> None:
        Path(self.local_path).mkdir(parents=True, exist_ok=True)


def monitor_and_trials(tmp_path: Path, n: int) -> tuple[SweepMonitor, list[Trial]]:
    spec = load_spec(
        write_spec(
            tmp_path / "s.yaml",
            name="s",
            method="grid",
            metric={"name": "score"},
            parameters={"x": {"values": list(range(n))}},
            train_loop="train_loops.smoke:train",
        )
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    trials = [Trial(f"t{i}", {"x": i}, str(run_dir / f"t{i}"), str(run_dir / f"t{i}")) for i in range(n)]
    return SweepMonitor(spec, run_dir, budget=n, quiet=True), trials


def test_a_result_appends_one_line_and_leaves_the_rest_of_the_file_as_it_was(tmp_path):
    monitor, trials = monitor_and_trials(tmp_path, 50)
    for t in trials:
        monitor.on_trial_start(0, trials, t)
        monitor.on_trial_result(0, trials, t, {"score": 1.0, "training_iteration": 1})
    before = monitor.path.read_bytes()
    monitor.on_trial_result(0, trials, trials[7], {"score": 0.5, "training_iteration": 2})
    after = monitor.path.read_bytes()
    assert after.startswith(before)  # nothing rewritten: the cost of a result does not grow with the sweep
    (line,) = after[len(before) :].decode().splitlines()
    assert json.loads(line)["trial_id"] == "t7" and json.loads(line)["iterations"] == 2

    rows = read_trials(monitor.path)
    assert [r["trial_id"] for r in rows] == [t.trial_id for t in trials]  # each trial once, in first-seen order
    assert rows[7]["metrics"]["score"] == 0.5 and rows[8]["metrics"]["score"] == 1.0  # its last row wins

    monitor.on_trial_complete(0, trials, trials[7])
    monitor.on_experiment_end(trials)
    assert len(monitor.path.read_text().splitlines()) == 50  # compacted when the sweep ends
    assert read_trials(monitor.path)[7]["status"] == "done"


def test_a_half_written_last_line_is_dropped_and_a_resuming_driver_appends_after_it_cleanly(tmp_path):
    monitor, trials = monitor_and_trials(tmp_path, 3)
    for t in trials:
        monitor.on_trial_start(0, trials, t)
        monitor.on_trial_result(0, trials, t, {"score": 1.0, "training_iteration": 1})
    with open(monitor.path, "a") as f:  # the driver was killed while writing t2's next row
        f.write('{"trial_id": "t2", "status": "runn')
    assert [r["iterations"] for r in read_trials(monitor.path)] == [1, 1, 1]

    resumed, _ = monitor_and_trials(tmp_path, 3)
    resumed.on_trial_result(0, trials, trials[2], {"score": 0.2, "training_iteration": 2})
    rows = read_trials(resumed.path)
    assert [r["iterations"] for r in rows] == [1, 1, 2]
    assert all(json.loads(line) for line in resumed.path.read_text().splitlines())  # every line whole


def test_result_json_holds_each_iteration_once_when_a_resumed_trial_goes_back_to_an_earlier_checkpoint(tmp_path):
    (trial,) = monitor_and_trials(tmp_path, 1)[1]
    trial.init_local_path()
    report = lambda it, resumed_from: {"training_iteration": it, "epoch": it, "resumed_from": resumed_from}  # noqa: E731
    killed = ResultLog()
    for it in (1, 2, 3):
        killed.on_trial_result(0, [trial], trial, report(it, 0))
    # The killed driver's saved state still had epoch 2's checkpoint: the resumed driver's trial
    # trains epoch 3 again; and a trial restored at its end sends its last result again.
    resumed = ResultLog()
    resumed.on_trial_result(0, [trial], trial, report(3, 2))
    resumed.on_trial_result(0, [trial], trial, report(3, 2))
    resumed.on_trial_result(0, [trial], trial, report(4, 2))
    lines = [json.loads(line) for line in (Path(trial.local_path) / "result.json").read_text().splitlines()]
    assert [(r["epoch"], r["resumed_from"]) for r in lines] == [(1, 0), (2, 0), (3, 2), (4, 2)]


def test_the_progress_lines_best_is_each_trials_last_report_as_show_ranks_it(tmp_path):
    """Issue 42: the line said best 0.988, one trial's best report, while show ranked that trial
    by its last value; one rule now, and the line says which."""
    monitor, trials = monitor_and_trials(tmp_path, 2)  # metric score, minimize
    for t in trials:
        monitor.on_trial_start(0, trials, t)
    monitor.on_trial_result(0, trials, trials[0], {"score": 0.1, "training_iteration": 1})
    monitor.on_trial_result(0, trials, trials[0], {"score": 0.9, "training_iteration": 2})  # worse at its end
    monitor.on_trial_result(0, trials, trials[1], {"score": 0.5, "training_iteration": 1})
    line = monitor.status_line(trials)
    assert "leading score=0.5 (a running trial's last report) (x=1)" in line, line
    assert monitor.best(ended=False).trial_id == "t1"


def test_the_progress_lines_best_is_the_ended_trials_and_never_goes_back(tmp_path):
    """From outside: `make run`'s line said best 0.965, then 0.9615, and users read it as the best so
    far. It is the ended trials' best, whose values no longer change; a running trial that does
    better, then worse, moves it neither way."""
    monitor, trials = monitor_and_trials(tmp_path, 2)  # metric score, minimize
    for t in trials:
        monitor.on_trial_start(0, trials, t)
    monitor.on_trial_result(0, trials, trials[0], {"score": 0.3, "training_iteration": 1})
    monitor.on_trial_complete(0, trials, trials[0])
    seen = []
    for value in (0.2, 0.1, 0.9):  # the running trial leads, then falls back
        monitor.on_trial_result(0, trials, trials[1], {"score": value, "training_iteration": 1})
        seen.append(monitor.status_line(trials))
    assert all("| best score=0.3 (of the ended trials) (x=0)" in line for line in seen), seen
    monitor.on_trial_complete(0, trials, trials[1])
    assert "| best score=0.3 (of the ended trials)" in monitor.status_line(trials)  # 0.9 at its end: not better


def test_the_progress_line_names_a_waiting_trials_reservation_and_its_size(tmp_path):
    from raysweep.backfill import Reservation

    monitor, trials = monitor_and_trials(tmp_path, 2)
    trials[1].status = "PAUSED"  # the admission holds it back
    for size, words in ((4, "4 workers"), (1, "1 worker")):
        monitor.board.reservation = Reservation("t1", size, time.time() + 12.4)
        assert f"| trial t1 ({words}) reserved, starts in ~00:1" in monitor.status_line(trials)
    trials[1].status = "RUNNING"  # it started: no reservation to show
    assert "reserved" not in monitor.status_line(trials)


def test_the_eta_counts_only_the_trials_this_driver_ended(tmp_path):
    """Issue 42: after a resume, trials that ended before the interrupt made the ETA fall 1:00:00 -> 13:30."""
    first, trials = monitor_and_trials(tmp_path, 10)
    for t in trials[:6]:  # an earlier driver ended six trials
        first.on_trial_start(0, trials, t)
        first.on_trial_complete(0, trials, t)
    resumed, trials = monitor_and_trials(tmp_path, 10)
    resumed.started -= 100.0  # this driver has run 100 s
    resumed.on_trial_start(0, trials, trials[6])
    resumed.on_trial_complete(0, trials, trials[6])  # and ended one trial in them
    assert "ETA 05:00" in resumed.status_line(trials)  # 3 left at 100 s each, not at 100 s / 7


def test_a_trials_error_is_its_own_sentence_without_a_traceback_or_colour_codes():
    """Issue 42: show printed Ray's `\\x1b[36mray::ImplicitFunc.train()\\x1b[39m` into files and pipes;
    an error of raysweep's own is its sentence, anything else the end of its traceback."""
    from raysweep.driver.monitor import error_summary

    ray_error = (
        'Traceback (most recent call last):\n  File "x.py", line 1\n'
        "\x1b[36mray::ImplicitFunc.train()\x1b[39m (pid=1, ip=10.0.0.1)\n"
        "  raysweep.trial.job_builder.InfeasibleTrial: num_gpus=4 can never be placed: ...\nSizes that fit: 1-2"
    )
    assert error_summary(ray_error) == "num_gpus=4 can never be placed: ...\nSizes that fit: 1-2"
    user_error = "Traceback:\n\x1b[36mray::ImplicitFunc.train()\x1b[39m\nValueError: boom"
    assert error_summary(user_error) == "Traceback:\nray::ImplicitFunc.train()\nValueError: boom"


def test_a_trial_started_ahead_of_its_slots_starts_and_is_accounted_from_when_it_held_them(tmp_path):
    """Issue 50: the admission starts the reserved trial's process before its slots free
    (``trial/slots.py``); its row's start, wall time and the seconds it is charged for count from
    when it held them (``Board.held_at``), not from its process's start."""
    monitor, trials = monitor_and_trials(tmp_path, 2)
    for t in trials:
        monitor.on_trial_start(0, trials, t)
    early, on_time = trials
    started = time.time() - 40.0  # its process started 40 s ago, and waited 30 s for its slots
    for t in trials:
        monitor.rows[t.trial_id] = replace(monitor.rows[t.trial_id], start=started, since=started)
    monitor.board.held_at[early.trial_id] = held = started + 30.0
    monitor.on_trial_result(0, trials, early, {"score": 1.0, "training_iteration": 1})
    monitor.on_trial_result(0, trials, on_time, {"score": 1.0, "training_iteration": 1})
    rows = {r["trial_id"]: r for r in read_trials(monitor.path)}
    assert rows[early.trial_id]["start"] == held and 10.0 <= rows[early.trial_id]["run_s"] < 20.0
    assert rows[early.trial_id]["wall_s"] < 20.0
    assert rows[on_time.trial_id]["start"] == started and rows[on_time.trial_id]["run_s"] >= 40.0  # none to correct
    monitor.board.held_at[early.trial_id] = held + 60.0  # a later attempt's: a trial that reported keeps its start
    monitor.on_trial_result(0, trials, early, {"score": 1.0, "training_iteration": 2})
    assert read_trials(monitor.path)[0]["start"] == held


def test_a_trial_a_stopper_ends_before_its_first_report_is_not_counted_finished(tmp_path):
    """The sweep's last line said "1 finished, 5 failed" of a sweep whose first trials all failed:
    the one finished was the trial starting when the stopper fired, which never reported. And the
    trials a stopper ended had no end in trials.jsonl (show: no wall_s)."""
    monitor, trials = monitor_and_trials(tmp_path, 4)
    for t in trials:
        monitor.on_trial_start(0, trials, t)
    monitor.on_trial_result(0, trials, trials[0], {"score": 0.5, "training_iteration": 1})
    monitor.on_trial_complete(0, trials, trials[0])
    monitor.on_trial_error(0, trials, trials[1])
    monitor.on_trial_result(0, trials, trials[2], {"score": 0.7, "training_iteration": 2})
    monitor.on_experiment_end(trials)
    monitor.sweep_stopped()  # trials 2 (reported) and 3 (not yet) were running
    assert ended_counts(list(monitor.rows.values())) == "2 finished, 1 failed, 1 stopped before its first report"
    # the stopped trials ended when Tune stopped them, as the run dir says
    stopped = [r for r in read_trials(tmp_path / "run" / "trials.jsonl") if r["status"] == "stopped"]
    assert [r["trial_id"] for r in stopped] == ["t2", "t3"]
    assert all(r["end"] >= r["start"] and r["wall_s"] == round(r["end"] - r["start"], 2) for r in stopped), stopped
