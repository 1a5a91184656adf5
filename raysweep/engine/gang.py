"""Warm DDP worker groups: a 2+-worker trial's workers outlive it, for the next trial of its size.

Starting workers is most of a short trial's cost: a Ray Train ``TorchTrainer`` run creates a
controller and N worker processes per trial, and each imports torch (12-17 s per 2-worker
trial on 2 cores: docs/benchmarks.md). Here the Tune trial process owns N ``DDPWorker``
actors placed in the bundles of its own placement group. Tune reuses that process for the
next trial of the same size (``reuse_actors``) and the workers come with it, so a trial
costs one new ``torch.distributed`` group. The workers end with the process that owns them.

Every report is a round trip: each rank hands its metrics to the trial and waits; the trial
forwards the mean over ranks to Tune, then tells every rank to go on or to stop. All ranks
stop at the same report, so no rank is left inside a collective; a rank that fails or dies
takes the whole group with it (its peers may be stuck in one).
"""

from __future__ import annotations

import math
import numbers
import os
import pickle
import queue
import traceback
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import ray
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from raysweep.engine.rank import free_port

STOP_GRACE_S = 20.0  # a stopped loop unwinds from its report; longer means it is stuck: end the group
GROUP_TIMEOUT = timedelta(minutes=30)  # torch.distributed's default for a collective


class TrialStopped(BaseException):
    """The scheduler stopped the trial: raised in the loop at its report.

    A ``BaseException``, so a loop's ``except Exception`` does not swallow it.
    """


class RankReports(RuntimeError):
    """Ranks of one trial reported a different number of times."""


def mean_over_ranks(metrics: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One report from every rank's: numeric metrics averaged, the rest from rank 0."""
    keys = [sorted(m) for m in metrics]
    if any(k != keys[0] for k in keys):
        detail = "; ".join(f"rank {r}: {', '.join(k)}" for r, k in enumerate(keys))
        raise ValueError(f"ranks reported different metric names in the same report ({detail})")
    merged = dict(metrics[0])
    for key in merged:
        if all(isinstance(m[key], numbers.Real) and not isinstance(m[key], bool) for m in metrics):
            merged[key] = math.fsum(float(m[key]) for m in metrics) / len(metrics)
    return merged


class RankLink:
    """The worker side of the round trip, handed to ``raysweep.trial`` as the "gang" backend."""

    def __init__(self, rank: int, world_size: int, device: str, checkpoint_dir: str | None,
                 outbox: queue.Queue, inbox: queue.Queue):  # fmt: skip
        self.rank, self.world_size, self.device, self.checkpoint_dir = rank, world_size, device, checkpoint_dir
        self.outbox, self.inbox = outbox, inbox

    def report(self, metrics: dict[str, Any], checkpoint: str | os.PathLike | None) -> None:
        self.outbox.put(("report", metrics, os.fspath(checkpoint) if checkpoint else None))
        if not self.inbox.get():
            raise TrialStopped


@ray.remote(max_concurrency=4)  # run() holds one thread; next_report() and resume() need others
class DDPWorker:
    """One warm DDP rank: torch imported once, a new process group per trial."""

    def __init__(self) -> None:
        import torch  # noqa: F401  (the import is most of a cold worker's start-up)

        self._outbox: queue.Queue = queue.Queue()  # reports, then "done" or "error", to the trial
        self._inbox: queue.Queue = queue.Queue()  # go on (True) or stop (False), per report
        self._device = "cpu"

    def node(self) -> tuple[str, int]:
        """This worker's node address and a free port on it (rank 0's become the group's master)."""
        return ray.util.get_node_ip_address(), free_port()

    def gpu_ids(self) -> list[str]:
        return [str(g) for g in ray.get_gpu_ids()]

    def share_gpus(self, gpus: list[str], mine: str) -> None:
        """See every GPU of the group (NCCL finds peer links) and use its own, as Ray Train does."""
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        self._device = f"cuda:{gpus.index(mine)}"

    def run(self, fn: Callable[..., None], args: Any, rank: int, world_size: int, master: tuple[str, int],
            group_backend: str | None, checkpoint_dir: str | None) -> None:  # fmt: skip
        """Run ``fn(args, link, master)`` as ``rank``; its end (or error) is the last report."""
        import torch.distributed as dist

        link = RankLink(rank, world_size, self._device, checkpoint_dir, self._outbox, self._inbox)
        try:
            if group_backend:
                dist.init_process_group(
                    group_backend, init_method=f"tcp://{master[0]}:{master[1]}", rank=rank,
                    world_size=world_size, timeout=GROUP_TIMEOUT,
                )  # fmt: skip
            fn(args, link, master)
            link.outbox.put(("done",))
        except TrialStopped:
            pass
        except BaseException as e:  # noqa: BLE001  (handed to the trial, which raises it)
            link.outbox.put(("error", _portable(e), traceback.format_exc()))
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()

    def next_report(self) -> tuple:
        return self._outbox.get()

    def resume(self, go: bool) -> None:
        self._inbox.put(go)


def _portable(e: BaseException) -> BaseException:
    """The exception itself if it survives pickling (its type and message reach the trial)."""
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(e).__name__}: {e}")


# The warm group of this Tune trial process, and the placement group it lives in.
_warm: dict[str, Any] = {"group": None, "workers": []}


def workers_for(size: int, cpus: float, gpu: bool) -> list[Any]:
    """This trial process's ``size`` workers: the warm ones, or new ones in its bundles 1..size."""
    pg = ray.util.get_current_placement_group()
    if _warm["group"] == (pg.id if pg else None, size):
        return _warm["workers"]
    discard()
    workers = [
        DDPWorker.options(
            num_cpus=cpus, num_gpus=1 if gpu else 0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i + 1) if pg else None,
        ).remote()
        for i in range(size)
    ]  # fmt: skip
    if gpu:  # rank r gets the r-th GPU of the group: a script's cuda:LOCAL_RANK is its own
        owned = sorted(zip(ray.get([w.gpu_ids.remote() for w in workers]), workers), key=lambda p: int(p[0][0]))
        every = [ids[0] for ids, _ in owned]
        workers = [w for _, w in owned]
        ray.get([w.share_gpus.remote(every, ids[0]) for ids, w in owned])
    _warm.update(group=(pg.id if pg else None, size), workers=workers)
    return workers


def discard() -> None:
    """End the warm workers (after a failure their state is unknown)."""
    for worker in _warm["workers"]:
        ray.kill(worker)
    _warm.update(group=None, workers=[])


def run(
    workers: list[Any],
    fn: Callable[..., None],
    args: Any,
    group_backend: str | None,
    checkpoint_dir: str | None,
    on_report: Callable[[list[dict[str, Any]], str | None], None],
) -> None:
    """Run one trial on ``workers``; ``on_report(metrics per rank, checkpoint dir)`` per report."""
    master = ray.get(workers[0].node.remote())
    size = len(workers)
    runs = [w.run.remote(fn, args, r, size, master, group_backend, checkpoint_dir) for r, w in enumerate(workers)]
    stopping = False
    try:
        reports = 0
        while True:
            items = _next_reports(workers)
            kinds = [item[0] for item in items]
            if set(kinds) == {"done"}:
                return
            if "done" in kinds:
                ended = ", ".join(str(r) for r, k in enumerate(kinds) if k == "done")
                raise RankReports(
                    f"rank(s) {ended} of {size} ended after {reports} report(s) while the others reported again; "
                    "every rank must report the same number of times"
                )
            try:
                on_report([item[1] for item in items], next((item[2] for item in items if item[2]), None))
            except BaseException:  # stopped by the scheduler, or a report Tune refused
                stopping = True
                _stop(workers, runs)
                raise
            reports += 1
            for w in workers:
                w.resume.remote(True)
    except BaseException:
        if not stopping:  # a rank failed or died: its peers may be stuck in a collective
            discard()
        raise


def _next_reports(workers: list[Any]) -> list[tuple]:
    """Every rank's next report, end or error; the first error (or death) is raised at once,
    not after its peers report: they may be waiting for the failed rank inside a collective."""
    pending = {w.next_report.remote(): rank for rank, w in enumerate(workers)}
    items: list[tuple] = [()] * len(workers)
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        rank = pending.pop(ready[0])
        items[rank] = ray.get(ready[0])  # raises if the rank's process died
        if items[rank][0] == "error":
            _, error, trace = items[rank]
            error.add_note(f"on rank {rank} of {len(workers)}; the rank's traceback:\n{trace}")
            raise error
    return items


def _stop(workers: list[Any], runs: list[Any]) -> None:
    """Every rank waits at this report: tell them to stop there; end the group if one does not."""
    for w in workers:
        w.resume.remote(False)
    done, _ = ray.wait(runs, num_returns=len(runs), timeout=STOP_GRACE_S)
    try:
        ray.get(done)
    except ray.exceptions.RayError:
        done = []
    if len(done) < len(runs):
        discard()
