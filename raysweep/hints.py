"""Commands raysweep prints for the user to run next, written so that they work as printed.

A user who ran ``.venv/bin/python -m raysweep`` (``make run`` does) has no ``raysweep`` on their
PATH: the hint names the interpreter that ran this process instead.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path


def command(*args: object) -> str:
    """``raysweep ARGS...`` as the user can type it from the current directory."""
    if Path(sys.argv[0]).name == "raysweep" and shutil.which("raysweep"):
        program = ["raysweep"]
    else:
        python = _shown(Path(sys.executable))
        program = [python if os.sep in python else f".{os.sep}{python}", "-m", "raysweep"]
    return shlex.join([*program, *(_shown(a) for a in args)])


def _shown(arg: object) -> str:
    """A path under the current directory as a relative one (what the user typed, usually)."""
    if isinstance(arg, Path) and arg.is_absolute() and arg.is_relative_to(Path.cwd()):
        return str(arg.relative_to(Path.cwd()))
    return str(arg)
