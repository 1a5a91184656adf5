"""Run a W&B ``program:`` script, unchanged, as every DDP worker of a trial.

Every worker of the trial (the Tune trial itself for one worker, each warm DDP worker or
TorchTrainer worker for more) starts the spec's ``command`` (W&B's default ``${env} ${interpreter} ${program}
${args}``) with the environment torchrun would give it: RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, MASTER_ADDR and a MASTER_PORT free for this trial, plus the devices Ray
assigned (CUDA_VISIBLE_DEVICES: its trial's GPUs, its own at index LOCAL_RANK, as torchrun's
ranks see them). The trial's parameters reach ``wandb.config`` on every rank the way
``wandb agent`` hands them over: a config file named by WANDB_SWEEP_PARAM_PATH.

Metrics: what the script logs with ``wandb.log`` (teed by ``program_hook/sitecustomize.py``)
or reports with ``raysweep.report`` goes to ``metrics/<attempt>.rank<R>.jsonl`` in the trial
dir. Rank 0 reads its own file and turns each line that carries the spec's metric, merged with
the latest value of every other key, into a report; with 2+ ranks it shares those reports with
every rank twice a second through the trial's runner (the ranks of a trial can be on nodes that
share no files), so all ranks report the same number of times and the scheduler sees rank 0's
values as they are logged.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from raysweep import private_api
from raysweep.env import (
    CHECKPOINT_DIR,
    CUDA_VISIBLE_DEVICES,
    METRIC,
    METRICS_FILE,
    PYTHONPATH,
    PYTHONUNBUFFERED,
)
from raysweep.placement import RankPlace
from raysweep.trial import preemption, script_checkpoints, script_preemption, torchrun_env
from raysweep.trial.job import ProgramLaunch, TrialJob
from raysweep.trial.metrics import check_metric
from raysweep.trial.output_marks import ended as console_ended
from raysweep.trial.output_marks import forward, rank_logs
from raysweep.trial.program_wandb import link_wandb_runs, run_dirs_logged, wandb_variables
from raysweep.trial.wandb_log import LoggedReports
from raysweep.values import plain

DEFAULT_COMMAND = ("${env}", "${interpreter}", "${program}", "${args}")
GRACE_S = 10.0  # SIGTERM, then SIGKILL this much later (W&B's agent waits 30 s)
POLL_S = 0.2
SHARE_S = 0.5  # with 2+ ranks: how often rank 0's reports reach the others (each share is a round trip)
_TAIL_LINES = 20
_running: set[subprocess.Popen] = set()  # this process's supervised scripts (end_running_scripts)
_running_lock = threading.Lock()


class ProgramFailed(RuntimeError):
    """The script exited non-zero; the message carries the tail of its stderr."""


class ProgramHung(RuntimeError):
    """The script logged nothing for report_timeout_s."""


def render_command(
    command: tuple[str, ...] | None, program: str | None, params: Mapping[str, Any], args_json_file: str
) -> list[str]:
    """The argv of one trial, rendered exactly as ``wandb agent`` renders it.

    W&B's own functions format the values (``--lr=0.001``, ``--flag=True``, ...);
    ``${interpreter}`` is this Python rather than ``python`` from PATH.
    """
    macros = private_api.sweep_command_args({k: plain(v) for k, v in params.items()})
    macros |= {
        "env": ["/usr/bin/env"],
        "interpreter": [sys.executable],
        "program": [program] if program else [],
        "args_json_file": [args_json_file],
    }
    argv: list[str] = []
    for chunk in private_api.sweep_command(list(command or DEFAULT_COMMAND)):  # fills ${envvar:NAME}
        chunk = str(chunk)
        if chunk.startswith("${") and chunk.endswith("}"):
            argv += macros.get(chunk[2:-1]) or []
        else:
            argv.append(chunk)
    return argv


def script_env(
    job: TrialJob,
    launch: ProgramLaunch,
    rank: int,
    place: RankPlace,
    master: tuple[str, int],
    *,
    visible_devices: str | None = None,
) -> dict[str, str]:
    """torchrun's variables (with NODE_RANK, as multi-node launchers set it), W&B's sweep
    variables, the network interface, and where metrics go."""
    trial_dir, world_size = Path(job.trial_dir), job.world_size
    hook = str(Path(__file__).with_name("program_hook"))
    pythonpath = os.pathsep.join(p for p in (hook, os.environ.get(PYTHONPATH)) if p)
    env = (
        dict(os.environ)
        | torchrun_env.variables(rank, world_size, place, master)
        | {
            PYTHONPATH: pythonpath,
            PYTHONUNBUFFERED: "1",
            METRICS_FILE: str(metrics_file(trial_dir, job.attempt, rank)),
            METRIC: job.metric or "",
            CHECKPOINT_DIR: str(script_checkpoints.directory(job.trial_id)),
        }
        | job.network_env()
    )
    env |= wandb_variables(launch.wandb, job.trial_id, rank)
    env = {key: value for key, value in env.items() if value is not None}  # None: unset, as wandb agent leaves it
    if visible_devices:  # the trial's GPUs on this node (the warm worker that starts it sees only its own)
        env[CUDA_VISIBLE_DEVICES] = visible_devices
    return env


def metrics_file(trial_dir: Path, attempt: str, rank: int) -> Path:
    """One file per rank and attempt: a restarted worker group never reads the last attempt's lines."""
    return trial_dir / "metrics" / f"{attempt}.rank{rank}.jsonl"


class RankZeroMetrics:
    """Reads rank 0's metrics file as it grows and turns its lines into reports."""

    def __init__(self, path: Path, metric: str | None):
        self.path = path
        self.offset = 0
        self.logged = LoggedReports(metric)

    def new_reports(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        complete = data[: data.rfind(b"\n") + 1]  # a line still being written waits for the next poll
        self.offset += len(complete)
        out = []
        for line in complete.decode().splitlines():
            entry = json.loads(line)
            if "metrics" not in entry:  # the hook's note of its W&B run's dir
                continue
            report = self.logged.add(entry["metrics"])
            if report is not None:
                out.append(report)
        return out


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-_TAIL_LINES:])


def _exit_text(code: int) -> str:
    if code > 128 and code - 128 in signal.Signals._value2member_map_:
        return f"was killed by {signal.Signals(code - 128).name}"
    return f"exited with code {code}"


def _start_script(job: TrialJob, launch: ProgramLaunch, rank: int, env: dict[str, str]) -> subprocess.Popen:
    """The rank's script under ``supervise`` (which ends its process group if this process dies),
    its output appended to the trial dir's per-rank logs."""
    trial_dir = Path(job.trial_dir)
    argv = render_command(launch.command, launch.program, launch.params, launch.args_json_file)
    metrics_file(trial_dir, job.attempt, rank).parent.mkdir(parents=True, exist_ok=True)  # also on a node of its own
    stdout_path, stderr_path = rank_logs(trial_dir, rank)
    with open(stdout_path, "ab") as out, open(stderr_path, "ab") as err, _running_lock:
        proc = subprocess.Popen(
            [sys.executable, "-m", "raysweep.trial.supervise", str(GRACE_S), str(os.getpid()), "--", *argv],
            cwd=launch.wandb.workdir,
            env=env,
            stdout=out,
            stderr=err,
        )
        _running.add(proc)
        return proc


def _end_script(proc: subprocess.Popen) -> None:
    _end_supervisors([proc])
    with _running_lock:
        _running.discard(proc)


def end_running_scripts() -> None:
    """End every script this process runs (a warm worker's, before the pool ends the worker):
    Ray SIGKILLs the children of a worker it kills, and a supervisor killed so leaves its script
    running on, its parent 1, until the script ends by itself (issue 49)."""
    with _running_lock:
        procs = list(_running)
    _end_supervisors(procs)


def _end_supervisors(procs: list[subprocess.Popen]) -> None:
    """SIGTERM to each (a supervisor then ends its script's process group), all at once; SIGKILL
    to any still running GRACE_S + 5 s later."""
    live = [proc for proc in procs if proc.poll() is None]
    for proc in live:
        proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S + 5
    for proc in live:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()


def _forward_output(shown: dict[Path, int], trial_id: str) -> None:
    """What rank 0's logs gained since ``shown``'s offsets, to the console; the offsets move on."""
    for path, offset in shown.items():
        shown[path] = forward(path, offset, trial_id, sys.stdout if "stdout" in path.name else sys.stderr)


def _on_rank(rank: int, world_size: int, stderr_path: Path) -> str:
    """Where a script failed, and the end of its stderr."""
    return f"on rank {rank} of {world_size}; the end of its stderr ({stderr_path}):\n{_tail(stderr_path)}"


def _script_ended(job: TrialJob, launch: ProgramLaunch, rank: int, proc: Any, shown: dict[Path, int]) -> None:
    """The script ended (or is ended now): rank 0's last lines and the end of its output on the
    console, and the W&B runs its ranks logged linked into the trial's dir."""
    _end_script(proc)
    if rank == 0:
        _forward_output(shown, job.trial_id)
        console_ended(job.trial_id)
    own = {job.trial_id} if rank == 0 else set()
    trial_dir = Path(job.trial_dir)
    link_wandb_runs(trial_dir, launch.wandb.wandb_dir, own, run_dirs_logged(metrics_file(trial_dir, job.attempt, rank)))


def _report_with_checkpoint(
    report: Callable[..., None], metrics: dict[str, Any], snapshots: script_checkpoints.Snapshots | None
) -> None:
    """One report, with rank 0's checkpoint directory where it changed since the last one kept."""
    copy = snapshots.changed() if snapshots is not None else None
    try:
        report(metrics, copy)
    finally:
        if copy is not None:
            shutil.rmtree(copy, ignore_errors=True)


def run_program(
    job: TrialJob,
    launch: ProgramLaunch,
    rank: int,
    place: RankPlace,
    master: tuple[str, int],
    *,
    report: Callable[..., None],
    share: Callable[[Any], Any],
    visible_devices: str | None = None,
    report_without_metric: Callable[[dict[str, Any]], None] = lambda metrics: None,
    checkpoint: Any = None,
) -> None:
    """Run the script as one rank of the trial and report rank 0's metrics until rank 0's ends;
    ``share(value)`` is rank 0's value on every rank (the runner's collective). A script that never
    logged the metric ends with one ``report_without_metric`` of what rank 0 logged; ``checkpoint``
    (the trial's) is put back in its checkpoint directory first (``script_checkpoints.py``)."""
    snapshots = script_checkpoints.ready(job.trial_id, rank, place.local_rank, job.world_size, checkpoint, share)
    env = script_env(job, launch, rank, place, master, visible_devices=visible_devices)
    script = _ScriptRank(job, launch, rank, _start_script(job, launch, rank, env), snapshots)
    try:
        while not script.poll(report, share):
            time.sleep(SHARE_S if job.world_size > 1 else POLL_S)
    finally:
        _script_ended(job, launch, rank, script.proc, script.shown)
    if job.metric and script.reports == 0:  # as under wandb agent, the run is done, without the metric
        report_without_metric(script.logged)


class _ScriptRank:
    """One rank's script as its trial follows it: rank 0's new reports, its exit, the watchdog, and
    a node's notice of its end (``script_preemption.py``)."""

    def __init__(
        self,
        job: TrialJob,
        launch: ProgramLaunch,
        rank: int,
        proc: subprocess.Popen,
        snapshots: script_checkpoints.Snapshots | None,
    ):
        self.job, self.launch, self.rank, self.proc, self.snapshots = job, launch, rank, proc, snapshots
        trial_dir = Path(job.trial_dir)
        self.metrics = RankZeroMetrics(metrics_file(trial_dir, job.attempt, 0), job.metric)
        self.logs = rank_logs(trial_dir, rank)
        # rank 0's output goes to the console as it comes (an earlier attempt's was shown then)
        self.shown = {path: path.stat().st_size for path in self.logs}
        self.code: int | None = None
        self.reports = 0
        self.logged: dict[str, Any] = {}
        self.last_progress = time.monotonic()
        self.leaving = script_preemption.Leaving(proc)

    def poll(self, report: Callable[..., None], share: Callable[[Any], Any]) -> bool:
        """One look; True once rank 0's script has ended (raises if the trial fails or leaves its node)."""
        job, rank = self.job, self.rank
        if self.leaving.overdue():
            _end_script(self.proc)
        self.code = self.proc.poll() if self.code is None else self.code
        if rank == 0:
            _forward_output(self.shown, job.trial_id)
        held = self.leaving.started and self.code is None  # what it logs on its way out waits for its end
        new = self.metrics.new_reports() if rank == 0 and not held else []
        rank_zero_code, self.logged = self.code, self.metrics.logged.latest
        notice = preemption.notice() if rank == 0 else None
        if job.world_size > 1:  # every rank gets rank 0's reports, and learns when its script ended
            new, rank_zero_code, self.logged, notice = share(
                (new, self.code, self.logged, notice) if rank == 0 else None
            )
        self.leaving.follow(notice)
        for i, m in enumerate(new):
            check_metric(m, job.metric)
            last = i == len(new) - 1  # leaving, its save on the way out goes with its last report
            _report_with_checkpoint(report, m, self.snapshots if last or not self.leaving.started else None)
            self.reports += 1
            self.last_progress = time.monotonic()
        if self.leaving.started:
            if rank_zero_code is not None:
                raise self.leaving.preempted(self.launch.label)
            return False
        if self.code is not None and self.code != 0:
            raise ProgramFailed(
                f"program {self.launch.label} {_exit_text(self.code)} {_on_rank(rank, job.world_size, self.logs[1])}"
            )
        if rank_zero_code is not None:
            return True  # rank 0's script ended: so does this rank, whatever its script does
        self._watchdog()
        return False

    def _watchdog(self) -> None:
        timeout = self.job.report_timeout_s
        if timeout and time.monotonic() - self.last_progress > timeout:
            raise ProgramHung(
                f"watchdog: program {self.launch.label} logged no {self.job.metric or 'metric'} for {timeout:g} s "
                f"(report_timeout_s) after {self.reports} report(s), the trial ended as hung, "
                + _on_rank(self.rank, self.job.world_size, self.logs[1])
            )
