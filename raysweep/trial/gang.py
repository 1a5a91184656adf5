"""A trial's side of its DDP ranks on warm workers (the ranks' side is ``warm_rank.py``): one new
process group per trial, every report a round trip.

The workers are the sweep's (``pool.py``): started once per node, lent to each trial, so a trial
costs one new ``torch.distributed`` group instead of a Ray Train controller plus N worker
processes that each import torch (docs/benchmarks.md).

Every report is a round trip: each rank hands its metrics to the trial and waits; the trial
forwards the mean over ranks to Tune, then tells every rank to go on or to stop. All ranks
stop at the same report, so no rank is left inside a collective; a rank that fails or dies
breaks the whole lease (its peers may be stuck in one), and the pool ends those workers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ray

from raysweep.trial.metrics import mean_over_ranks
from raysweep.trial.start_bound import StartBound, group_state
from raysweep.trial.warm_rank import DONE, ERROR, SHARE, RankMessage
from raysweep.trial.watchdog import ended_early_text

if TYPE_CHECKING:
    from raysweep.trial.lease import Lease
    from raysweep.trial.warm_rank import RankCall

STOP_GRACE_S = 20.0  # a stopped loop unwinds from its report; longer means it is stuck: end the group


class RankReports(RuntimeError):
    """Ranks of one trial reported a different number of times."""


class WorkerDied(RuntimeError):
    """The process of a warm worker lent to the trial died (killed, out of memory, a crash in native
    code, or a worker that could not start). Never Ray's ``RayActorError``: Tune's actor manager
    takes one raised by a trial for the death of the trial's own actor, and drops that actor."""


def run(
    lease: Lease,
    call: RankCall,
    on_report: Callable[[dict[str, Any], str | None], None],
    bound: StartBound,
) -> None:
    """Run one trial on the lease's workers (rank r on the r-th); ``on_report(mean over ranks,
    checkpoint dir)`` per report. Every worker answers by ``bound``'s deadline (a worker lent while
    it starts answers once torch is imported), or the trial fails and the workers are ended."""
    workers, size = lease.workers, len(lease.workers)
    stopping = False
    try:

        def waited_for(late: list[int]) -> str:
            where = ", ".join(dict.fromkeys(call.places[r].address for r in late))
            return (
                f"rank(s) {', '.join(map(str, late))} of {size}: the warm worker(s) lent to them on {where} did not "
                f"answer (a worker process that never started, or hangs); the trial holds its "
                f"{group_state(lease.group)}"
            )

        # raises if a worker died while it waited; rank 0's node and port are the group's master
        store_timeout = call.group_timeout_s if call.group_backend else None  # rank 0 binds the group's store
        nodes = [w.node.remote(store_timeout if r == 0 else None) for r, w in enumerate(workers)]
        try:
            master = bound.get(nodes, waited_for)[0]
        except ray.exceptions.RayActorError as e:
            raise worker_died(e, "a warm worker of this trial, before its loop began,", call) from e
        runs = [w.run.remote(call, r, size, master) for r, w in enumerate(workers)]
        reports = 0
        while True:
            messages = _next_messages(workers, runs)
            kinds = [m.kind for m in messages]
            if set(kinds) == {DONE}:
                ray.get(runs)  # each rank's teardown (destroy_process_group) ends before the workers go back
                return
            if DONE in kinds:
                raise RankReports(ended_early_text([r for r, k in enumerate(kinds) if k == DONE], size, reports))
            if set(kinds) == {SHARE}:  # a collective: rank 0's value to every rank
                for w in workers:
                    w.answer.remote((messages[0].value,))
                continue
            if SHARE in kinds:
                raise RankReports(f"ranks of one trial disagreed: {kinds} (a report where another rank shared a value)")
            try:
                on_report(
                    mean_over_ranks([m.metrics for m in messages]),
                    next((m.checkpoint for m in messages if m.checkpoint), None),
                )
            except BaseException:  # stopped by the scheduler, or a report Tune refused
                stopping = True
                _stop(lease, runs)
                raise
            reports += 1
            for w in workers:
                w.answer.remote(True)
    except BaseException:
        if not stopping:  # a rank failed or died: its peers may be stuck in a collective
            lease.broken = True
        raise


def _next_messages(workers: list[Any], runs: list[Any]) -> list[RankMessage]:
    """Every rank's next message; the first error (or death) is raised at once, not after its
    peers report: they may be waiting for the failed rank inside a collective. A rank's ``run``
    task that fails outside its own handler (it could not start) raises here too."""
    pending = {w.next_message.remote(): rank for rank, w in enumerate(workers)}
    watched = {ref: rank for rank, ref in enumerate(runs)}
    messages: list[RankMessage | None] = [None] * len(workers)
    while pending:
        ready, _ = ray.wait(list(pending) + list(watched), num_returns=1)
        rank = watched.pop(ready[0], None)
        try:
            if rank is not None:
                ray.get(ready[0])  # raises the rank's error; a run that ended has put its last message already
                continue
            rank = pending.pop(ready[0])
            message = messages[rank] = ray.get(ready[0])  # raises if the rank's process died
        except ray.exceptions.RayActorError as e:
            raise worker_died(e, f"the warm worker of rank {rank} of {len(workers)}") from e
        if message.kind == ERROR:
            raise rank_error(message.error, rank, len(workers), message.trace)
    return messages


def worker_died(error: BaseException, who: str, call: RankCall | None = None) -> WorkerDied:
    """The sentence for an actor of the trial whose process ended (``who``: which one)."""
    where = f" on {', '.join(dict.fromkeys(p.address for p in call.places))}" if call else ""
    first_line = str(error).splitlines()[0] if str(error) else ""
    return WorkerDied(
        f"{who} died{where} (its process was killed, ran out of memory, crashed in native code, or could not "
        f"start): {type(error).__name__}: {first_line}"
    )


def rank_error(error: BaseException, rank: int, world_size: int, trace: str) -> BaseException:
    """A rank's error as its trial raises it: the rank's own traceback, then which rank it was,
    last, so however deep the traceback, the row's last lines (``monitor.error_summary``) name it."""
    error.add_note(f"the rank's traceback:\n{trace.rstrip()}")
    error.add_note(f"(raised on rank {rank} of {world_size})")
    return error


def _stop(lease: Lease, runs: list[Any]) -> None:
    """Every rank waits at this report: tell them to stop there; break the lease if one does not."""
    for w in lease.workers:
        w.answer.remote(False)
    done, _ = ray.wait(runs, num_returns=len(runs), timeout=STOP_GRACE_S)
    try:
        ray.get(done)
    except ray.exceptions.RayError:
        done = []
    if len(done) < len(runs):
        lease.broken = True
