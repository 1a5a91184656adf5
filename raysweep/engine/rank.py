"""What runs on each rank of a trial: the train loop (with its hang watchdog) or the program.

Kept free of Tune: a warm DDP worker unpickles these entry points, and importing
``trainable.py`` there (ray.tune, ray.train) would add more than a second to its start.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from raysweep import trial
from raysweep.engine import watchdog
from raysweep.engine.program import run_program

if TYPE_CHECKING:
    from raysweep.engine.gang import RankLink


def import_loop(path: str) -> Callable[[dict], Any]:
    """Resolve ``module:function``; only such imports are ever run as train loops."""
    module_name, _, func_name = path.partition(":")
    if os.getcwd() not in sys.path:  # loops live in the project the sweep is run from
        sys.path.insert(0, os.getcwd())
    try:
        loop = getattr(importlib.import_module(module_name), func_name)
    except Exception as e:  # a module that raises on import, or has a syntax error, is the user's too
        raise ImportError(f"train_loop {path!r} could not be imported: {type(e).__name__}: {e}") from e
    if not callable(loop):
        raise ImportError(f"train_loop {path!r} is a {type(loop).__name__}, not a function taking the trial's config")
    return loop


def run_loop(loop_args: dict[str, Any], backend: str, rank: int, world_size: int, link: Any = None) -> None:
    """Run the train loop as one rank, with the hang watchdog when the spec sets a timeout."""
    guard = None
    if loop_args["report_timeout_s"]:
        guard = watchdog.ReportWatchdog(loop_args["report_timeout_s"], loop_args["trial_dir"], rank, world_size)
        guard.start()
    trial.set_backend(backend, loop_args["trial_dir"], loop_args["metric"], watchdog=guard, link=link)
    try:
        import_loop(loop_args["train_loop"])(loop_args["config"])
    finally:
        if guard is not None:
            guard.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def train_worker(loop_args: dict[str, Any]) -> None:
    """Entry point on every TorchTrainer worker."""
    import ray.train

    ctx = ray.train.get_context()
    run_loop(loop_args, "train", ctx.get_world_rank(), ctx.get_world_size())


def gang_loop(loop_args: dict[str, Any], link: RankLink, master: tuple[str, int]) -> None:
    """Entry point on every warm worker."""
    run_loop(loop_args, "gang", link.rank, link.world_size, link=link)


def gang_program(job: dict[str, Any], link: RankLink, master: tuple[str, int]) -> None:
    """Entry point on every warm worker of a ``program:`` trial (the script makes its own group)."""
    trial.set_backend("gang", job["trial_dir"], job["metric"], link=link)
    if link.gpus:  # the script sees its group's GPUs, its own at cuda:LOCAL_RANK, as under torchrun
        job = dict(job) | {"visible_devices": ",".join(link.gpus)}
    run_program(job, link.rank, link.rank, link.world_size, master, trial.report)


def program_worker(job: dict[str, Any]) -> None:
    """Entry point on every TorchTrainer worker of a ``program:`` trial."""
    import ray.train
    from ray.train.collective import broadcast_from_rank_zero

    ctx = ray.train.get_context()
    rank = ctx.get_world_rank()
    # The script's own process group needs a port of its own (Ray Train's group holds one),
    # and a restarted worker group a fresh metrics file: rank 0 picks both.
    mine = (ray.util.get_node_ip_address(), free_port(), uuid.uuid4().hex[:8]) if rank == 0 else None
    addr, port, attempt = broadcast_from_rank_zero(mine)
    trial.set_backend("train", job["trial_dir"], job["metric"])
    run_program(job | {"attempt": attempt}, rank, ctx.get_local_rank(), ctx.get_world_size(), (addr, port), trial.report)
