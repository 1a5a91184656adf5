"""Commands raysweep prints for the user to run next, written so that they work as printed.

A user who ran ``.venv/bin/python -m raysweep`` (``make run`` does) has no ``raysweep`` on their
PATH: the hint names the interpreter that ran this process instead. A sweep started from Python
(``raysweep.run``) gets the Python call instead: ``raysweep.resume('runs/s', function=main)``.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import shlex
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from raysweep.runs.storage import stored_at

# Set while raysweep.run/resume runs: the name its function goes by ("" for a sweep file's own entry).
_PYTHON_FUNCTION: contextvars.ContextVar[str | None] = contextvars.ContextVar("raysweep_python_function", default=None)
_PYTHON_CALLS = {
    "resume": "raysweep.resume({run}{function}{more})",
    "show": "raysweep.load({run}).dataframe()",
}
# A command's flags as the Python call's keywords (``--budget-gpu-hours H`` -> ``budget_gpu_hours=H``).
_KEYWORDS = {"--budget-gpu-hours": "budget_gpu_hours"}


@contextlib.contextmanager
def from_python(function: str | None) -> Iterator[None]:
    """Hints name Python calls while a sweep started by ``raysweep.run`` runs."""
    token = _PYTHON_FUNCTION.set(function or "")
    try:
        yield
    finally:
        _PYTHON_FUNCTION.reset(token)


def command(*args: object) -> str:
    """``raysweep ARGS...`` as the user can type it from the current directory (or, from Python, the call)."""
    function = _PYTHON_FUNCTION.get()
    if function is not None and str(args[0]) in _PYTHON_CALLS:
        flags = [str(a) for a in args[2:]]
        more = "".join(f", {_KEYWORDS[flag]}={value}" for flag, value in zip(flags[::2], flags[1::2], strict=False))
        return _PYTHON_CALLS[str(args[0])].format(
            run=repr(_shown(args[1])),
            function=f", function={function}" if function and args[0] == "resume" else "",
            more=more,
        )
    if Path(sys.argv[0]).name == "raysweep" and shutil.which("raysweep"):
        program = ["raysweep"]
    else:
        python = _shown(Path(sys.executable))
        program = [python if os.sep in python else f".{os.sep}{python}", "-m", "raysweep"]
    return shlex.join([*program, *(_shown(a) for a in args)])


def _shown(arg: object) -> str:
    """A path under the current directory as a relative one (what the user typed, usually); the
    local copy of a run dir on a URI storage as that run dir's URI (the truth, from any machine)."""
    run = stored_at(arg) if isinstance(arg, Path) else None
    if run is not None:
        return run.uri
    if isinstance(arg, Path) and arg.is_absolute() and arg.is_relative_to(Path.cwd()):
        return str(arg.relative_to(Path.cwd()))
    return str(arg)
