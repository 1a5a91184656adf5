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
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import ray

from raysweep.trial import devices
from raysweep.trial.ports import free_port

GROUP_TIMEOUT = timedelta(minutes=30)  # torch.distributed's default for a collective


@dataclass(frozen=True)
class RankCall:
    """What every warm rank of one trial runs: ``fn(args, link, master)``, in a process group of
    ``group_backend`` (None: no group), with the checkpoint in ``checkpoint_dir``; rank r on
    ``gpus[r]``, or on the CPU with ``threads`` threads when ``gpus`` is None."""

    fn: Callable[..., None]
    args: Any
    group_backend: str | None
    checkpoint_dir: str | None
    gpus: list[str] | None
    threads: int


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


# run() holds one thread; next_report() and resume() need others. run() has a thread of its own,
# the same for every trial: CUDA state that is per thread (a cuBLAS handle and its workspace, held
# in the caching allocator) then exists once per worker, not once per thread that ran a trial.
@ray.remote(max_concurrency=4, concurrency_groups={"rank": 1})
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

    @ray.method(concurrency_group="rank")
    def run(self, call: RankCall, rank: int, world_size: int, master: tuple[str, int]) -> None:
        """Run ``call`` as ``rank``; its end (or error) is the last report."""
        import torch
        import torch.distributed as dist

        try:  # everything, device choice included: an error must reach the trial, never leave it waiting
            gpu = call.gpus[rank] if call.gpus else None
            link = RankLink(
                rank,
                world_size,
                _use_device(gpu, call.threads, self._gpu),
                call.gpus,
                call.checkpoint_dir,
                self._outbox,
                self._inbox,
            )
            self._gpu = gpu or self._gpu
            group_backend = call.group_backend
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
            call.fn(call.args, link, master)
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
