"""How many intra-op threads each warm CPU rank computes with, and how a change reaches it.

A rank computes with its trial's ``cpus_per_worker`` threads, except while its trial is the only
one computing on its node: then the node's CPUs are shared among the trial's ranks there, so a
lone 1-worker trial runs on every core, as a lone torchrun process does (``threads_on_node``).

The pool decides (``pool.Lending.share_threads``): it lends every warm worker, so it sees the
moment a second trial starts beside a lone one. A rank whose share shrinks must shrink before the
new trial's ranks compute: a 2-thread rank beside another busy rank on 2 cores crawled at 1/8 of
its speed (OpenMP's threads wait for each other at every parallel region), and so did the trial
beside it, until its next report, an epoch later (docs/benchmarks.md, 2026-12-05). torch's thread
count belongs to the thread that sets it, so the pool's word is kept here (``RankThreads``) and the
rank's own thread takes it: at its next optimizer step when it shrinks, at its next report when
it grows (a trial that starts beside it is often a few tenths of a second away).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ThreadShare:
    """What a trial's CPU ranks may use on their node: ``own`` threads each beside other trials
    (``cpus_per_worker``, at least 1), and the node's ``node_cpus`` shared among them while the trial
    is alone there (None: never more than ``own``, as for a trial across nodes)."""

    own: int
    node_cpus: int | None = None


@dataclass(frozen=True)
class ThreadCount:
    """The pool's word to one rank: compute with ``count`` threads. ``seq`` orders the pool's words
    (the lend's count and later changes reach a worker from two callers, in either order)."""

    count: int
    seq: int


def threads_on_node(leases: list[tuple[ThreadShare | None, int]]) -> list[int | None]:
    """Threads per rank of each trial computing on one node, given its share (None: a GPU trial,
    no CPU threads to set) and its ranks there: the node's CPUs among the ranks of a lone trial,
    else each trial's own."""
    if len(leases) == 1:
        share, ranks = leases[0]
        if share is not None and share.node_cpus:
            return [max(share.own, share.node_cpus // ranks)]
    return [share.own if share is not None else None for share, _ in leases]


class RankThreads:
    """A warm worker's record of the threads its rank should compute with: set from any thread
    (the pool's ``use_threads`` call, or the trial's start), applied in the rank's own thread."""

    def __init__(self) -> None:
        self.wanted: int | None = None  # None: no CPU trial runs here (a GPU trial sets nothing)
        self.seq = 0
        self.rank_thread: int | None = None

    def set(self, told: ThreadCount) -> None:
        """The pool's word, unless a later one came first."""
        if told.seq >= self.seq:
            self.seq, self.wanted = told.seq, told.count

    def begin(self, told: ThreadCount | None) -> None:
        """A trial starts in this thread with the lend's count (None: a GPU trial), or the pool's
        later word if that came first."""
        self.rank_thread = threading.get_ident()
        if told is None:
            self.wanted = None
            return
        self.set(told)
        self.apply(grow=True)

    def end(self) -> None:
        self.wanted, self.rank_thread = None, None

    def apply(self, grow: bool) -> None:
        """Take the wanted count in the rank's thread: a smaller one always, a larger one if ``grow``."""
        if self.wanted is None or threading.get_ident() != self.rank_thread:
            return
        import torch

        have = torch.get_num_threads()
        if self.wanted < have or (grow and self.wanted > have):
            torch.set_num_threads(self.wanted)

    def on_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """torch's global optimizer step pre-hook: the loop's thread passes here at every step."""
        self.apply(grow=False)
