"""Ctrl-C and SIGTERM during a sweep: the first ends it resumable, a second exits at once.

Three phases, as the sweep starts:

* **Ray starting** (``ray.init``): a first signal exits at once, 130. A Ctrl-C from the terminal
  reaches Ray's starting processes too (the dashboard's forkserver dies, and ``ray.init`` then
  waits for a dashboard that never comes up), and a KeyboardInterrupt raised inside ``ray.init``
  left a half-built core worker that crashed the interpreter's exit (139). No trial has run:
  ``resume`` starts the sweep. (A SIGTERM inside ``ray.init`` meets Ray's own handler, which
  ends Ray's processes and exits 1; ``ray_is_up`` takes SIGTERM back afterwards.)
* **Ray up, Tune not yet listening** (the pool, the Tuner, ``fit``'s preamble): a first signal is
  held, and ``TuneListens`` hands it to Tune as soon as Tune's handler is in place.
* **Tune listening**: Tune catches the first SIGINT itself: its loop ends, trials are left to
  ``resume``, callbacks clean up. SIGTERM (what SLURM sends before its time limit, and ``kill``)
  is turned into that same SIGINT.

A second signal, in any phase, exits 130 at once; under ``raysweep.run`` (a notebook's kernel
must live on) it raises KeyboardInterrupt instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ray.tune import Callback

from raysweep import hints


@dataclass
class Signals:
    received: list[int] = field(default_factory=list)
    ray_started: bool = False  # ray.init has returned
    tune_listens: bool = False  # Tune's own SIGINT handler is in place


class TuneListens(Callback):
    """Tune installs its SIGINT handler before it sets up its callbacks: from ``setup`` on, a
    SIGINT reaches Tune, so a signal held while the sweep started is sent on to it now."""

    def __init__(self, signals: Signals):
        self.signals = signals

    def setup(self, **info: Any) -> None:
        self.signals.tune_listens = True
        if self.signals.received:
            os.kill(os.getpid(), signal.SIGINT)


def ray_is_up(signals: Signals) -> None:
    """``ray.init`` has returned. It set its own SIGTERM handler (end Ray's processes, exit 1):
    the sweep's handler, still SIGINT's, takes SIGTERM back."""
    signals.ray_started = True
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.getsignal(signal.SIGINT))


@contextlib.contextmanager
def handled(run_dir: Path, exit_at_once: bool = True) -> Iterator[Signals]:
    """Signals as the module docstring says, from the sweep's start to the end of ``fit()``."""
    signals = Signals()

    def _exit_now(message: str) -> None:
        sys.stderr.write(f"\nraysweep: {message}\n")
        sys.stderr.flush()
        if not exit_at_once:
            raise KeyboardInterrupt(message)
        os._exit(130)

    def on_signal(signum: int, frame: object) -> None:
        # A SIGINT that reaches this handler once Tune listens: Tune took the first and put this one back.
        if signals.received or (signals.tune_listens and signum == signal.SIGINT):
            _exit_now(f"interrupted again; exiting now (continue the sweep with: {hints.command('resume', run_dir)})")
        signals.received.append(signum)
        if not signals.ray_started:
            _exit_now(
                f"interrupted while Ray was starting; no trial had run (start the sweep with: {hints.command('resume', run_dir)})"
            )
        if signals.tune_listens:  # SIGTERM: Tune's handler ends the run as on Ctrl-C
            sys.stderr.write(
                "\nraysweep: stopping the sweep and saving its state (press Ctrl-C again to exit at once)\n"
            )
            os.kill(os.getpid(), signal.SIGINT)
        else:
            sys.stderr.write(
                "\nraysweep: stopping the sweep as soon as it has started, with its state saved "
                "(a second or two; press Ctrl-C again to exit at once)\n"
            )

    if (
        threading.current_thread() is not threading.main_thread()
    ):  # raysweep.run from a thread: Python allows no handler
        yield signals
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, on_signal)
    try:
        yield signals
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
