"""One spelling per concept: the words users see in files, messages and ``show``, as str Enums.

A member equals, hashes and prints as its word, so values read back from JSON (plain strings)
compare with, and are found in sets and dicts under, the members.
"""

from __future__ import annotations

from enum import Enum


class Word(str, Enum):
    __str__ = str.__str__  # "done" in f-strings, as in the files
    __hash__ = str.__hash__


class TrialStatus(Word):
    """A trial's status in ``trials.jsonl``, ``show``, the report and the progress line."""

    RUNNING = "running"
    PENDING = "pending"
    DONE = "done"
    STOPPED = "stopped"  # by the scheduler: finished early, not failed
    FAILED = "failed"


STATES = tuple(TrialStatus)  # in the order the progress line and the report count them
FINISHED = (TrialStatus.DONE, TrialStatus.STOPPED)  # ended with results a metric can rank
ENDED = (*FINISHED, TrialStatus.FAILED)


class Runner(Word):
    """How a trial's ranks run (``trial/runners.RUNNERS``); the spec's ``ddp_workers``
    chooses between the last two for trials of 2+ workers."""

    IN_PROCESS = "in_process"  # one rank, in the Tune trial's own process
    WARM = "warm"  # the sweep's warm DDP workers
    TORCHTRAINER = "torchtrainer"  # a Ray Train TorchTrainer run per trial


DDP_WORKERS = tuple(r for r in Runner if r is not Runner.IN_PROCESS)  # what ``ddp_workers`` may choose
