"""A trial's output on the user's console, as ``wandb.agent`` shows its function's prints.

Rank 0's lines (a train loop's or function's ``print``, a script's stdout and stderr) go to its
process's own stream with ``MARK`` and the trial's id in front; Ray streams every worker's output
to the driver, and the driver's ``driver/trial_output.py`` shows just those lines, prefixed with the
trial's id (``--quiet`` keeps them off; driver.log keeps them either way). Every rank's lines also
go to ``stdout.rank<R>.log`` / ``stderr.rank<R>.log`` in the trial dir, as a script's do.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

MARK = "[raysweep trial "  # then the trial id and "] "
END = "\x04"  # a marked line of this alone: the rank's output is over (the driver waits for it, never shows it)


def marked(trial_id: str, line: str) -> str:
    return f"{MARK}{trial_id}] {line}"


def unmark(line: str) -> tuple[str, str] | None:
    """(trial id, the line) of a marked line, else None."""
    if not line.startswith(MARK):
        return None
    trial_id, sep, rest = line[len(MARK) :].partition("] ")
    return (trial_id, rest) if sep else None


class _Tee:
    """A text stream that writes through to ``inner`` (each complete line marked when ``trial_id``)
    and to ``log``."""

    def __init__(self, inner: IO[str], log: IO[str], trial_id: str | None):
        self.inner, self.log, self.trial_id = inner, log, trial_id
        self._partial = ""

    def write(self, text: str) -> int:
        self.log.write(text)
        if self.trial_id is None:
            return self.inner.write(text)
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            self.inner.write(marked(self.trial_id, line) + "\n")
        return len(text)

    def flush(self) -> None:
        self.log.flush()
        self.inner.flush()

    def close_line(self) -> None:
        if self._partial and self.trial_id is not None:
            self.inner.write(marked(self.trial_id, self._partial) + "\n")
        self._partial = ""
        self.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, encoding, fileno...: the stream's own
        return getattr(self.inner, name)


def rank_logs(trial_dir: str | Path, rank: int) -> tuple[Path, Path]:
    """A rank's stdout and stderr logs in its trial dir (its loop's, function's or script's)."""
    return Path(trial_dir) / f"stdout.rank{rank}.log", Path(trial_dir) / f"stderr.rank{rank}.log"


@contextlib.contextmanager
def shown(trial_id: str, trial_dir: str, rank: int) -> Iterator[None]:
    """While the rank's loop or function runs: its ``sys.stdout``/``sys.stderr`` teed to the trial
    dir's logs, and rank 0's marked for the driver's console."""
    Path(trial_dir).mkdir(parents=True, exist_ok=True)
    shown_id = trial_id if rank == 0 else None
    stdout_path, stderr_path = rank_logs(trial_dir, rank)
    with open(stdout_path, "a") as out, open(stderr_path, "a") as err:
        tees = _Tee(sys.stdout, out, shown_id), _Tee(sys.stderr, err, shown_id)
        before = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = tees
        try:
            yield
        finally:
            for tee in tees:
                tee.close_line()
            sys.stdout, sys.stderr = before
            if shown_id is not None:
                ended(shown_id)


def ended(trial_id: str) -> None:
    """Rank 0's output is over: every line of it was written before this one."""
    sys.stdout.write(marked(trial_id, END) + "\n")
    sys.stdout.flush()


def forward(path: Path, offset: int, trial_id: str, stream: IO[str]) -> int:
    """Rank 0's new complete lines of a script's log ``path``, from ``offset``, written marked to
    ``stream``; the new offset."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return offset
    complete = data[: data.rfind(b"\n") + 1]
    for line in complete.decode(errors="replace").splitlines():
        stream.write(marked(trial_id, line) + "\n")
    if complete:
        stream.flush()
    return offset + len(complete)
