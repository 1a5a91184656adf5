"""A loop whose process dies (SIGKILL to itself) at its first epoch when ``die`` is set, as a
warm worker killed by the kernel's OOM killer or a crash in native code would; else the smoke
loop (tests/trial/test_reliability.py)."""

from __future__ import annotations

import os
import signal

from train_loops import smoke


def train(config: dict) -> None:
    config = dict(config)
    if config.pop("die", False):
        os.kill(os.getpid(), signal.SIGKILL)
    smoke.train(config)
