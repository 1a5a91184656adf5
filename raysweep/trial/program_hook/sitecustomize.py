"""Loaded by every Python that raysweep starts for a ``program:`` script (it is first on PYTHONPATH).

It tees what the script logs with ``wandb.log`` (more precisely ``Run.log``, and ``NoopRun.log``
in disabled mode) into the JSON-lines file named by RAYSWEEP_METRICS_FILE, which the trial
reads live and reports to the scheduler. wandb itself is untouched and imported only if the
script imports it: a post-import hook patches the class when its module is first loaded. The interpreter's own
``sitecustomize`` (if any) is still run.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = os.path.dirname(os.path.dirname(_HERE))


def _load(name, path):
    """One raysweep module, loaded by path: importing the raysweep package here would slow every script's start."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(_PACKAGE, *path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as an import does (a dataclass looks its module up there)
    spec.loader.exec_module(module)
    return module


def _patch(module) -> None:
    run_cls = getattr(module, _TARGETS[module.__name__])
    original = run_cls.log
    path = os.environ[_ENV.METRICS_FILE]

    def log(self, data, *args, **kwargs):
        result = original(self, data, *args, **kwargs)
        _note_run_dir(self, path)
        if isinstance(data, dict):
            numbers = _numbers(data)
            if numbers:
                with open(path, "a") as f:
                    f.write(json.dumps({"source": "wandb", "metrics": numbers}) + "\n")
        return result

    log.__wrapped__ = original
    run_cls.log = log


_NOTED = set()


def _note_run_dir(run, path) -> None:
    """Once per run: its dir (under WANDB_DIR), so the trial links it into its own dir."""
    run_dir = os.path.dirname(getattr(run, "dir", "") or "")  # run.dir is <run dir>/files
    if run_dir and run_dir not in _NOTED:
        _NOTED.add(run_dir)
        with open(path, "a") as f:
            f.write(json.dumps({"source": "wandb", "run_dir": run_dir}) + "\n")


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        _patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in _TARGETS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)  # the real module
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def _chain_original() -> None:
    """Run the sitecustomize this one shadows (Debian's, a virtualenv's), if there is one."""
    rest = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_ENV = _load("_raysweep_env", ("env.py",))  # the variables' names (os and dataclasses: nothing slow)
if os.environ.get(_ENV.METRICS_FILE):
    _numbers = _load("_raysweep_wandb_log", ("trial", "wandb_log.py")).numbers
    _TARGETS = _load("_raysweep_private_api", ("private_api.py",)).WANDB_RUN_CLASSES
    sys.meta_path.insert(0, _Finder())
_chain_original()
