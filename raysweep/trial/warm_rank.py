"""The rank side of a trial on warm workers: ``DDPWorker``, one warm rank (torch imported once, a
new process group per trial), and ``RankLink``, through which the loop's warm backend reports.
The trial side, which starts the ranks and forwards their reports, is ``gang.py``."""

from __future__ import annotations

import importlib
import os
import pickle
import queue
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import ray

from raysweep.env import GLOO_SOCKET_IFNAME, set_env
from raysweep.placement import RankPlace
from raysweep.trial import devices, preemption
from raysweep.trial.cpu_threads import RankThreads, ThreadCount
from raysweep.trial.ports import free_port
from raysweep.trial.program import end_running_scripts

GROUP_TIMEOUT = timedelta(minutes=30)  # torch.distributed's default for a collective


@dataclass(frozen=True, kw_only=True)
class RankCall:
    """What every warm rank of one trial runs: ``fn(args, link, master)``, in a process group of
    ``group_backend`` (None: no group) that waits ``group_timeout_s`` at most, with the
    trial's restored ``checkpoint`` (a ``ray.train.Checkpoint`` on the storage, which each rank reads
    from its own node); rank 0 on another node than ``trial_node`` stages its checkpoints under
    ``stage_at`` (``staging.py``); rank r at ``places[r]`` (its node, its local rank, its GPU
    when ``use_gpu``, else the CPU with ``threads`` threads to start with: the pool's count,
    ``cpu_threads.py``), with ``env`` set while it runs."""

    fn: Callable[..., None]
    args: Any
    group_backend: str | None
    checkpoint: Any
    places: list[RankPlace]
    use_gpu: bool
    threads: ThreadCount | None
    group_timeout_s: float = GROUP_TIMEOUT.total_seconds()
    env: dict[str, str] = field(default_factory=dict)
    trial_node: str = ""
    stage_at: str | None = None


@dataclass(frozen=True)
class RankMessage:
    """What a warm rank tells its trial (``gang.py``), in order: reports (or values it shares
    with every rank), then ``done`` or ``error`` last."""

    kind: str  # REPORT, SHARE, DONE or ERROR
    metrics: dict[str, Any] | None = None  # REPORT
    checkpoint: Any = None  # REPORT: a directory on the trial's node, or a checkpoint staged on the storage
    value: Any = None  # SHARE: what rank 0 shares with the others (theirs: None)
    error: BaseException | None = None  # ERROR, with its traceback
    trace: str = ""


REPORT, SHARE, DONE, ERROR = "report", "share", "done", "error"


class TrialStopped(BaseException):
    """The scheduler stopped the trial: raised in the loop at its report.

    A ``BaseException``, so a loop's ``except Exception`` does not swallow it.
    """


class RankLink:
    """The worker side of the round trip (the loop's warm backend reports through it)."""

    def __init__(
        self,
        rank: int,
        world_size: int,
        place: RankPlace,
        device: str,
        checkpoint: Any,
        outbox: queue.Queue,
        inbox: queue.Queue,
        threads: RankThreads,
        stage_at: str | None = None,
    ):
        self.rank, self.world_size, self.place, self.device = rank, world_size, place, device
        self.checkpoint = checkpoint
        self.stage_at = stage_at  # set where this rank is on another node than its trial's process
        self.outbox, self.inbox = outbox, inbox
        self.threads = threads

    @property
    def gpus(self) -> list[str] | None:
        """The trial's GPUs on this rank's node, as Ray names them (a script's CUDA_VISIBLE_DEVICES)."""
        return list(self.place.node_gpus) or None

    def report(self, metrics: dict[str, Any], checkpoint: str | os.PathLike | None) -> None:
        handed = os.fspath(checkpoint) if checkpoint else None
        if handed is not None and self.stage_at is not None:
            from raysweep.trial.staging import stage

            handed = stage(handed, self.stage_at)
        self.outbox.put(RankMessage(REPORT, metrics=metrics, checkpoint=handed))
        if not self.inbox.get():
            raise TrialStopped
        self.threads.apply(grow=True)  # the node's share, as the pool last told it

    def share(self, value: Any) -> Any:
        """Rank 0's ``value``, on every rank (a collective through the trial: every rank calls it
        as often as the others, and each call waits for all)."""
        self.outbox.put(RankMessage(SHARE, value=value if self.rank == 0 else None))
        answer = self.inbox.get()
        if answer is False:
            raise TrialStopped
        return answer[0]


def _import_all(modules: tuple[str, ...]) -> None:
    for module in modules:
        importlib.import_module(module)


# run() holds one thread; next_message() and answer() need others. run() has a thread of its own,
# the same for every trial: CUDA state that is per thread (a cuBLAS handle and its workspace, held
# in the caching allocator) then exists once per worker, not once per thread that ran a trial.
@ray.remote(max_concurrency=4, concurrency_groups={"rank": 1})
class DDPWorker:
    """One warm DDP rank: torch imported once, a new process group per trial.

    It holds no resources (the borrowing trial's placement group does). Its first GPU trial pins
    it to that trial's GPU for its life (``devices.pin``): one CUDA context per worker, and the
    pool lends it only to trials of that GPU.
    """

    def __init__(self, imports: tuple[str, ...] = ()) -> None:
        import torch  # noqa: F401  (the import is most of a cold worker's start-up)
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        # ``imports`` (env.WARM_IMPORTS; torch._dynamo by default, which the first optimizer a loop
        # builds imports: seconds) are imported now, while the worker waits for its first trial
        # (a loop that needs one first waits for it).
        threading.Thread(target=_import_all, args=(imports,), daemon=True).start()
        self._outbox: queue.Queue = queue.Queue()  # RankMessages to the trial
        self._inbox: queue.Queue = queue.Queue()  # the trial's answers: go on or stop, or a shared value
        self._gpu: str | None = None  # the GPU this worker serves, from its first GPU trial on
        self._store: Any = None  # as rank 0: the trial's process-group store, bound by node()
        self._threads = RankThreads()  # a CPU rank's threads, as the pool tells them (cpu_threads.py)
        register_optimizer_step_pre_hook(self._threads.on_optimizer_step)

    def node(self, store_timeout_s: float | None = None) -> tuple[str, int]:
        """This worker's node address and a port on it; rank 0's become the group's master.

        With ``store_timeout_s`` (rank 0 of a trial whose ranks form a process group), the port is
        that of the group's store, bound here on a port the OS picks and kept until the trial's
        ranks end. A free port looked up now and bound later can be taken in between: a trial
        failed so (EADDRINUSE) under the test suite's load."""
        address = ray.util.get_node_ip_address()
        if store_timeout_s is None:
            return address, free_port()  # a script's MASTER_PORT: the script binds it
        import torch.distributed as dist

        self._store = dist.TCPStore(
            address, 0, None, True, timeout=timedelta(seconds=store_timeout_s), wait_for_workers=False
        )
        return address, self._store.port

    @ray.method(concurrency_group="rank")
    def run(self, call: RankCall, rank: int, world_size: int, master: tuple[str, int]) -> None:
        """Run ``call`` as ``rank``; its end (or error) is the last message."""
        import torch
        import torch.distributed as dist

        before = {key: os.environ.get(key) for key in call.env}  # put back when the trial ends
        try:  # everything, device choice included: an error must reach the trial, never leave it waiting
            place = call.places[rank]
            gpu = place.gpu if call.use_gpu else None
            self._threads.begin(None if gpu else call.threads)
            link = RankLink(
                rank,
                world_size,
                place,
                _use_device(gpu, self._gpu),
                call.checkpoint,
                self._outbox,
                self._inbox,
                self._threads,
                stage_at=call.stage_at if ray.get_runtime_context().get_node_id() != call.trial_node else None,
            )
            self._gpu = gpu or self._gpu
            os.environ.update(call.env)
            preemption.watch([p.node_id for p in call.places])  # what get_context().preemption reads here
            group_backend = call.group_backend
            if group_backend == "nccl" and not torch.cuda.is_available():
                group_backend = "gloo"  # GPUs Ray advertises that CUDA cannot see (placement tests)
            if group_backend:
                _join_group(group_backend, call, rank, world_size, master, self._store if rank == 0 else None)
            call.fn(call.args, link, master)
            self._outbox.put(RankMessage(DONE))
        except TrialStopped:
            pass
        except BaseException as e:  # noqa: BLE001  (handed to the trial, which raises it)
            self._outbox.put(RankMessage(ERROR, error=_portable(e), trace=traceback.format_exc()))
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
            self._store = None
            self._threads.end()
            if torch.cuda.is_initialized():
                torch.cuda.empty_cache()  # the next trial may be another process's on this GPU
            set_env(before)

    def end_scripts(self) -> None:
        """End the ``program:`` script this worker runs, if any, before the pool ends the worker
        (its trial may be gone, and the rank left waiting for it)."""
        end_running_scripts()

    def use_threads(self, told: ThreadCount) -> None:
        """The pool's word: this rank's share of its node changed (another trial started or ended
        beside it). The rank's thread takes it at its next optimizer step or report."""
        self._threads.set(told)

    def ping(self) -> bool:
        """The pool's health check of an idle worker (an actor that died fails this at once)."""
        return True

    def next_message(self) -> RankMessage:
        return self._outbox.get()

    def answer(self, value: Any) -> None:
        """Go on (True) or stop (False) after a report; ``(value,)`` after a share (False: stop)."""
        self._inbox.put(value)


def _join_group(backend: str, call: RankCall, rank: int, world_size: int, master: tuple[str, int], store: Any) -> None:
    """The trial's process group, its store rank 0's (``store``, bound by ``DDPWorker.node``); a
    set-up that times out says which nodes and where they met."""
    import torch.distributed as dist

    timeout = timedelta(seconds=call.group_timeout_s)
    try:
        if store is None:
            store = dist.TCPStore(master[0], master[1], world_size, False, timeout=timeout)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=timeout)
    except Exception as e:  # noqa: BLE001  (a store timeout, a refused connection: the sentence says what to check)
        nodes = ", ".join(dict.fromkeys(p.address for p in call.places))
        interface = call.env.get(GLOO_SOCKET_IFNAME)
        raise RuntimeError(
            f"the trial's {backend} process group was not set up within {call.group_timeout_s:g} s "
            f"(raysweep.process_group_timeout_s): rank {rank} of {world_size} on {call.places[rank].address} "
            f"could not meet its ranks on node(s) {nodes} at {master[0]}:{master[1]} ({type(e).__name__}: {e}). "
            "Check that the nodes reach each other on that address, and raysweep.resources.network_interface "
            f"({interface or 'not set'})"
        ) from e


def _portable(e: BaseException) -> BaseException:
    """The exception itself if it survives pickling (its type and message reach the trial)."""
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(e).__name__}: {e}")


def _use_device(gpu: str | None, pinned: str | None) -> str:
    """This rank's device for one trial: the GPU Ray named, as this worker's only CUDA device, or
    the CPU (its threads: ``RankThreads.begin``)."""
    if gpu is None:
        return "cpu"
    device = devices.pin(gpu, pinned)
    devices.check_usable(device)
    return device
