"""Ctrl-C and SIGTERM during a sweep: the first ends it with its state saved, a second exits at once.

Tune catches the first SIGINT itself: its loop ends, trials are left to ``resume``, callbacks
clean up. SIGTERM (what SLURM sends before its time limit, and ``kill``) is turned into that
same SIGINT. A second signal while Tune cleans up exits 130 at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Signals:
    received: list[int] = field(default_factory=list)


@contextlib.contextmanager
def handled() -> Iterator[Signals]:
    signals = Signals()

    def on_signal(signum: int, frame: object) -> None:
        signals.received.append(signum)
        if len(signals.received) > 1 or signum == signal.SIGINT:  # Tune's own handler took the first SIGINT
            sys.stderr.write("\nraysweep: interrupted again; exiting now (`raysweep resume` continues the sweep)\n")
            sys.stderr.flush()
            os._exit(130)
        sys.stderr.write("\nraysweep: stopping the sweep and saving its state (press Ctrl-C again to exit at once)\n")
        os.kill(os.getpid(), signal.SIGINT)  # Tune's handler: end the run as on Ctrl-C

    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, on_signal)
    try:
        yield signals
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
