"""What a train loop sees of its trial: rank, device, where metrics and checkpoints go.

A loop calls the same three functions however it runs: on every rank of its trial's warm
DDP workers (``engine/gang.py``), on every worker of a Ray Train ``TorchTrainer`` or in the Tune
trial's own process (1 worker) under ``ddp_workers: torchtrainer``, inside a
``program:`` script that raysweep launched (the environment says so), or in plain Python
with no Ray at all (``run_local``, for debugging and unit tests). The engine picks the
backend before it calls the loop; the loop never needs to know which one it got.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is heavy: imported only where a device is needed
    import torch

# Set by raysweep in the environment of a program: script; its reports go to this file.
METRICS_FILE_ENV = "RAYSWEEP_METRICS_FILE"
METRIC_ENV = "RAYSWEEP_METRIC"
BACKENDS = ("local", "tune", "gang", "train", "program")

# "local" (no Ray), "tune" (1 worker, in the Tune trial process), "gang" (a rank on a warm DDP worker),
# "train" (a TorchTrainer worker) or "program" (a script launched by raysweep)
_backend = "program" if os.environ.get(METRICS_FILE_ENV) else "local"
_trial_dir: str | None = None
_metric: str | None = os.environ.get(METRIC_ENV) or None  # the spec's metric.name: every report carries it
_watchdog: Any = None  # a ReportWatchdog while the engine runs a loop with report_timeout_s
_link: Any = None  # under "gang": this rank's engine.gang.RankLink (rank, device, report round trip)
_local_reports: list[dict[str, Any]] = []
_local_checkpoint: str | None = None


@dataclass(frozen=True)
class TrialContext:
    """Where this process stands in its trial's worker group."""

    rank: int
    local_rank: int
    world_size: int
    device: "torch.device"
    trial_dir: str

    @property
    def is_main(self) -> bool:
        """Only the main rank writes files and logs; every rank still calls ``report``."""
        return self.rank == 0


def set_backend(
    backend: str, trial_dir: str | None = None, metric: str | None = None, watchdog: Any = None, link: Any = None
) -> None:
    """Called by the engine before it runs a loop; loops never call it."""
    global _backend, _trial_dir, _metric, _watchdog, _link
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if (backend == "gang") != (link is not None):
        raise ValueError("the gang backend, and only it, needs its rank's link")
    _backend, _trial_dir, _metric, _watchdog, _link = backend, trial_dir, metric, watchdog, link


def backend() -> str:
    """Which runner called the loop: "local", "tune" (1 worker), "gang", "train" (TorchTrainer) or "program"."""
    return _backend


def get_context() -> TrialContext:
    """Rank, world size and device of the calling process."""
    import torch

    if _backend == "train":
        import ray.train
        import ray.train.torch

        ctx = ray.train.get_context()
        return TrialContext(
            rank=ctx.get_world_rank(),
            local_rank=ctx.get_local_rank(),
            world_size=ctx.get_world_size(),
            device=ray.train.torch.get_device(),
            trial_dir=_trial_dir or os.getcwd(),
        )
    if _backend == "gang":  # every worker of a group runs on the trial's node
        return TrialContext(_link.rank, _link.rank, _link.world_size, torch.device(_link.device), _trial_dir or os.getcwd())
    if _backend == "tune":
        import ray

        # Ray sets CUDA_VISIBLE_DEVICES to the trial's GPU, so it is always cuda:0 here.
        device = torch.device("cuda:0" if ray.get_gpu_ids() and torch.cuda.is_available() else "cpu")
        return TrialContext(0, 0, 1, device, _trial_dir or os.getcwd())
    if _backend == "program":  # the torchrun variables raysweep set for this worker
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
        trial_dir = os.path.dirname(os.path.dirname(os.environ[METRICS_FILE_ENV]))  # <trial>/metrics/<file>
        return TrialContext(int(os.environ.get("RANK", 0)), local_rank, int(os.environ.get("WORLD_SIZE", 1)), device, trial_dir)
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    return TrialContext(0, 0, 1, device, _trial_dir or os.getcwd())


def report(metrics: Mapping[str, Any], checkpoint: str | os.PathLike | None = None) -> None:
    """Report one iteration's metrics (every rank, the same number of times).

    Args:
        metrics: Numbers (Python or NumPy scalars, not tensors). With several workers the
            scheduler sees the mean over ranks of every numeric metric.
        checkpoint: A directory holding this iteration's checkpoint, usually passed by the
            main rank only. Its contents are copied into the trial's storage before this
            returns, so a temporary directory is fine.
    """
    metrics = dict(metrics)
    check_metric(metrics, _metric)
    if _backend == "train":
        import ray.train

        ckpt = ray.train.Checkpoint.from_directory(os.fspath(checkpoint)) if checkpoint else None
        ray.train.report(metrics, checkpoint=ckpt)
    elif _backend == "tune":
        import ray.tune

        ckpt = ray.tune.Checkpoint.from_directory(os.fspath(checkpoint)) if checkpoint else None
        ray.tune.report(metrics, checkpoint=ckpt)
    elif _backend == "gang":
        _link.report(metrics, checkpoint)
    elif _backend == "program":
        with open(os.environ[METRICS_FILE_ENV], "a") as f:  # read live by the trial (engine/program.py)
            f.write(json.dumps({"source": "report", "metrics": _plain_numbers(metrics)}) + "\n")
    else:
        global _local_checkpoint
        _local_reports.append(metrics)
        if checkpoint:
            _local_checkpoint = tempfile.mkdtemp(prefix="raysweep_ckpt_")
            shutil.copytree(checkpoint, _local_checkpoint, dirs_exist_ok=True)
    if _watchdog is not None:
        _watchdog.beat()


class MetricError(ValueError):
    """A report the sweep cannot use: its metric is missing or not a finite number."""


def check_metric(metrics: Mapping[str, Any], metric: str | None) -> None:
    """The spec's metric must be in every report and finite.

    A missing metric would leave the scheduler blind (it never prunes, the searcher learns
    nothing); NaN or inf would rank a diverged trial. Either fails the trial with this
    sentence, and the searcher records the trial as failed.
    """
    if metric is None:
        return
    if metric not in metrics:
        raise MetricError(
            f"the sweep's metric {metric!r} (metric.name in the spec) is missing from this report; "
            f"it reported: {', '.join(sorted(metrics)) or 'nothing'}"
        )
    value = metrics[metric]
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise MetricError(f"the sweep's metric {metric!r} must be a number, got {value!r} ({type(value).__name__})")
    if not math.isfinite(value):
        raise MetricError(
            f"the sweep's metric {metric!r} is {value} (the trial diverged); the trial is failed so that "
            "the searcher records it as failed instead of ranking it"
        )


def _plain_numbers(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-safe metrics: NumPy and 0-d torch scalars become Python numbers, NaN stays NaN."""
    out = {}
    for key, value in metrics.items():
        if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
            value = value.item()
        if isinstance(value, (bool, int, float, str)) or value is None:
            out[key] = value
    return out


def get_checkpoint() -> Any:
    """The trial's latest checkpoint (a ``ray.train.Checkpoint``), or None on a fresh start.

    Use ``with get_checkpoint().as_directory() as d:`` to read it.
    """
    if _backend == "train":
        import ray.train

        return ray.train.get_checkpoint()
    if _backend == "tune":
        import ray.tune

        return ray.tune.get_checkpoint()
    if _backend == "gang":
        from ray.train import Checkpoint

        return Checkpoint.from_directory(_link.checkpoint_dir) if _link.checkpoint_dir else None
    if _local_checkpoint is None:
        return None
    from ray.train import Checkpoint

    return Checkpoint.from_directory(_local_checkpoint)


def run_local(train_fn: Callable[[dict], Any], config: dict, resume: bool = False) -> list[dict[str, Any]]:
    """Run a loop in this process with no Ray and return what it reported.

    With ``resume=True`` the loop sees the last checkpoint reported by an earlier
    ``run_local`` call in this process, as a restarted trial would.
    """
    global _local_checkpoint
    set_backend("local")
    _local_reports.clear()
    if not resume:
        _local_checkpoint = None
    train_fn(config)
    return list(_local_reports)
