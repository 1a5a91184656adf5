"""``python -m raysweep.trial.supervise GRACE_S PARENT_PID -- COMMAND...``

Runs a ``program:`` script in its own process group, and ends the whole group (the script,
its data-loader workers, anything it spawned) when told to: SIGTERM first, SIGKILL after
GRACE_S seconds. It is told to by SIGTERM/SIGINT from the trial, or by the kernel when the
Ray worker that started it dies (PR_SET_PDEATHSIG): a trial stopped by the scheduler or
killed with its node leaves no orphaned script behind. SIGUSR1 passes a SIGTERM to the group and
waits on: a node's notice of its end, which the script may use to save (``script_preemption.py``).
Exits with the script's exit code (128 + N when signal N ended it).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the trial's own SIGTERM still works
        return
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _end_group(pgid: int, child: subprocess.Popen, grace_s: float) -> None:
    try:
        os.killpg(pgid, signal.SIGTERM)
        child.wait(grace_s)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        return
    try:
        os.killpg(pgid, signal.SIGKILL)  # leftovers of the group, or a script that ignored SIGTERM
    except ProcessLookupError:
        pass


def main(argv: list[str]) -> int:
    grace_s, parent_pid, sep, *command = argv
    if sep != "--" or not command:
        print("usage: python -m raysweep.trial.supervise GRACE_S PARENT_PID -- COMMAND...", file=sys.stderr)
        return 2
    child = subprocess.Popen(command, start_new_session=True)

    def stop(signum: int, frame: object) -> None:
        _end_group(child.pid, child, float(grace_s))
        sys.exit(128 + signum)

    def notice(signum: int, frame: object) -> None:
        try:
            os.killpg(child.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGUSR1, notice)
    _die_with_parent(int(parent_pid))
    code = child.wait()
    try:
        os.killpg(child.pid, signal.SIGKILL)  # what the script left running dies with it
    except ProcessLookupError:
        pass
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
