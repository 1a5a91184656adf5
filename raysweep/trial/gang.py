"""A trial's DDP ranks on warm workers: one new process group per trial, every report a round trip.

The workers are the sweep's (``pool.py``): started once per node, lent to each trial, so a trial
costs one new ``torch.distributed`` group instead of a Ray Train controller plus N worker
processes that each import torch (docs/benchmarks.md).

Every report is a round trip: each rank hands its metrics to the trial and waits; the trial
forwards the mean over ranks to Tune, then tells every rank to go on or to stop. All ranks
stop at the same report, so no rank is left inside a collective; a rank that fails or dies
breaks the whole lease (its peers may be stuck in one), and the pool ends those workers.
"""

from __future__ import annotations

import importlib
import os
import pickle
import queue
import threading
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import ray

from raysweep.trial import devices
from raysweep.trial.rank import free_port, mean_over_ranks
from raysweep.trial.watchdog import ended_early_text

if TYPE_CHECKING:
    from raysweep.trial.pool import Lease

STOP_GRACE_S = 20.0  # a stopped loop unwinds from its report; longer means it is stuck: end the group
GROUP_TIMEOUT = timedelta(minutes=30)  # torch.distributed's default for a collective


class TrialStopped(BaseException):
    """The scheduler stopped the trial: raised in the loop at its report.

    A ``BaseException``, so a loop's ``except Exception`` does not swallow it.
    """


class RankReports(RuntimeError):
    """Ranks of one trial reported a different number of times."""


class RankLink:
    """The worker side of the round trip (the loop's warm backend reports through it)."""

    def __init__(
        self,
        rank: int,
        world_size: int,
        device: str,
        gpus: list[str] | None,
        checkpoint_dir: str | None,
        outbox: queue.Queue,
        inbox: queue.Queue,
    ):
        self.rank, self.world_size, self.device, self.checkpoint_dir = rank, world_size, device, checkpoint_dir
        self.gpus = gpus  # the group's GPUs, as Ray names them (a script's CUDA_VISIBLE_DEVICES)
        self.outbox, self.inbox = outbox, inbox

    def report(self, metrics: dict[str, Any], checkpoint: str | os.PathLike | None) -> None:
        self.outbox.put(("report", metrics, os.fspath(checkpoint) if checkpoint else None))
        if not self.inbox.get():
            raise TrialStopped


@ray.remote(max_concurrency=4)  # run() holds one thread; next_report() and resume() need others
class DDPWorker:
    """One warm DDP rank: torch imported once, a new process group per trial.

    It holds no resources (the borrowing trial's placement group does). Its first GPU trial pins
    it to that trial's GPU for its life (``devices.pin``): one CUDA context per worker, and the
    pool lends it only to trials of that GPU.
    """

    def __init__(self) -> None:
        import torch  # noqa: F401  (the import is most of a cold worker's start-up)

        # The first optimizer a loop builds imports torch._dynamo (seconds): import it now,
        # while the worker waits for its first trial (a loop that needs it first waits for it).
        threading.Thread(target=importlib.import_module, args=("torch._dynamo",), daemon=True).start()
        self._outbox: queue.Queue = queue.Queue()  # reports, then "done" or "error", to the trial
        self._inbox: queue.Queue = queue.Queue()  # go on (True) or stop (False), per report
        self._gpu: str | None = None  # the GPU this worker serves, from its first GPU trial on

    def node(self) -> tuple[str, int]:
        """This worker's node address and a free port on it (rank 0's become the group's master)."""
        return ray.util.get_node_ip_address(), free_port()

    def run(
        self,
        fn: Callable[..., None],
        args: Any,
        rank: int,
        world_size: int,
        master: tuple[str, int],
        group_backend: str | None,
        checkpoint_dir: str | None,
        gpus: list[str] | None,
        threads: int,
    ) -> None:
        """Run ``fn(args, link, master)`` as ``rank``; its end (or error) is the last report."""
        import torch
        import torch.distributed as dist

        try:  # everything, device choice included: an error must reach the trial, never leave it waiting
            gpu = gpus[rank] if gpus else None
            link = RankLink(
                rank, world_size, _use_device(gpu, threads, self._gpu), gpus, checkpoint_dir, self._outbox, self._inbox
            )
            self._gpu = gpu or self._gpu
            if group_backend == "nccl" and not torch.cuda.is_available():
                group_backend = "gloo"  # GPUs Ray advertises that CUDA cannot see (placement tests)
            if group_backend:
                dist.init_process_group(
                    group_backend,
                    init_method=f"tcp://{master[0]}:{master[1]}",
                    rank=rank,
                    world_size=world_size,
                    timeout=GROUP_TIMEOUT,
                )
            fn(args, link, master)
            self._outbox.put(("done",))
        except TrialStopped:
            pass
        except BaseException as e:  # noqa: BLE001  (handed to the trial, which raises it)
            self._outbox.put(("error", _portable(e), traceback.format_exc()))
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
            if torch.cuda.is_initialized():
                torch.cuda.empty_cache()  # the next trial may be another process's on this GPU

    def ping(self) -> bool:
        """The pool's health check of an idle worker (an actor that died fails this at once)."""
        return True

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


def _use_device(gpu: str | None, threads: int, pinned: str | None) -> str:
    """This rank's device for one trial: the GPU Ray named, as this worker's only CUDA device, or
    the CPU with the trial's threads per worker."""
    import torch

    if gpu is None:
        torch.set_num_threads(threads)
        return "cpu"
    device = devices.pin(gpu, pinned)
    devices.check_usable(device)
    return device


def run(
    lease: Lease,
    fn: Callable[..., None],
    args: Any,
    group_backend: str | None,
    checkpoint_dir: str | None,
    gpus: list[str] | None,
    threads: int,
    on_report: Callable[[dict[str, Any], str | None], None],
) -> None:
    """Run one trial on the lease's workers (rank r on the r-th, with ``gpus[r]`` if any);
    ``on_report(mean over ranks, checkpoint dir)`` per report."""
    workers, size = lease.workers, len(lease.workers)
    stopping = False
    try:
        master = ray.get(workers[0].node.remote())  # raises if the worker died while it waited
        runs = [
            w.run.remote(fn, args, r, size, master, group_backend, checkpoint_dir, gpus, threads)
            for r, w in enumerate(workers)
        ]
        reports = 0
        while True:
            items = _next_reports(workers, runs)
            kinds = [item[0] for item in items]
            if set(kinds) == {"done"}:
                ray.get(runs)  # each rank's teardown (destroy_process_group) ends before the workers go back
                return
            if "done" in kinds:
                raise RankReports(ended_early_text([r for r, k in enumerate(kinds) if k == "done"], size, reports))
            try:
                on_report(
                    mean_over_ranks([item[1] for item in items]), next((item[2] for item in items if item[2]), None)
                )
            except BaseException:  # stopped by the scheduler, or a report Tune refused
                stopping = True
                _stop(lease, runs)
                raise
            reports += 1
            for w in workers:
                w.resume.remote(True)
    except BaseException:
        if not stopping:  # a rank failed or died: its peers may be stuck in a collective
            lease.broken = True
        raise


def _next_reports(workers: list[Any], runs: list[Any]) -> list[tuple]:
    """Every rank's next report, end or error; the first error (or death) is raised at once,
    not after its peers report: they may be waiting for the failed rank inside a collective.
    A rank's ``run`` task that fails outside its own handler (it could not start) raises here too."""
    pending = {w.next_report.remote(): rank for rank, w in enumerate(workers)}
    watched = {ref: rank for rank, ref in enumerate(runs)}
    items: list[tuple] = [()] * len(workers)
    while pending:
        ready, _ = ray.wait(list(pending) + list(watched), num_returns=1)
        if ready[0] in watched:
            del watched[ready[0]]
            ray.get(ready[0])  # raises the rank's error; a run that ended has put its last item already
            continue
        rank = pending.pop(ready[0])
        items[rank] = ray.get(ready[0])  # raises if the rank's process died
        if items[rank][0] == "error":
            _, error, trace = items[rank]
            error.add_note(f"on rank {rank} of {len(workers)}; the rank's traceback:\n{trace}")
            raise error
    return items


def _stop(lease: Lease, runs: list[Any]) -> None:
    """Every rank waits at this report: tell them to stop there; break the lease if one does not."""
    for w in lease.workers:
        w.resume.remote(False)
    done, _ = ray.wait(runs, num_returns=len(runs), timeout=STOP_GRACE_S)
    try:
        ray.get(done)
    except ray.exceptions.RayError:
        done = []
    if len(done) < len(runs):
        lease.broken = True
