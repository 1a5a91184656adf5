"""``raysweep/hints.py``: the commands raysweep prints work as printed, from where the user is."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from raysweep import hints


def test_a_command_names_this_interpreter_and_paths_from_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["python -m raysweep"])
    text = hints.command("resume", tmp_path / "runs" / "my sweep")
    python = str(Path(sys.executable))
    shown = python if os.sep in python else f".{os.sep}{python}"
    assert text == f"{shown} -m raysweep resume 'runs/my sweep'"  # quoted for the shell, relative to here


def test_from_python_a_hint_is_the_python_call_with_its_function_and_keywords(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with hints.from_python("main"):
        assert (
            hints.command("resume", tmp_path / "runs" / "s", "--budget-gpu-hours", "2")
            == "raysweep.resume('runs/s', function=main, budget_gpu_hours=2)"
        )
        assert hints.command("show", tmp_path / "runs" / "s") == "raysweep.load('runs/s').dataframe()"
    with hints.from_python(None):  # a sweep file's own entry point: nothing to pass again
        assert hints.command("resume", "runs/s") == "raysweep.resume('runs/s')"
    assert "-m raysweep resume" in hints.command("resume", "runs/s")  # outside raysweep.run again
