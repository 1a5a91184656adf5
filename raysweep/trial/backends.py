"""Where a train loop runs, behind one small interface: its context, its reports, its checkpoint.

A loop calls ``raysweep.report`` and friends the same way everywhere; the rank's entry point
(``rank.py``) installs the backend of the place it runs in before it calls the loop:

* ``local``: plain Python, no Ray (``run_local``, for debugging and unit tests);
* ``in_process``: the Tune trial's own process, for a 1-worker trial;
* ``warm``: a rank on the sweep's warm DDP workers (``warm_rank.py``), each report a round trip;
* ``torchtrainer``: a worker of a Ray Train ``TorchTrainer`` (``ddp_workers: torchtrainer``);
* ``program``: a ``program:`` script raysweep launched (its environment says so).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is heavy: imported only where a device is needed
    import torch

    from raysweep.placement import RankPlace
    from raysweep.trial.warm_rank import RankLink

from raysweep.env import LOCAL_RANK, METRIC, METRICS_FILE, RANK, WORLD_SIZE
from raysweep.trial.wandb_log import item


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

    @property
    def preemption(self) -> Any:
        """A node of the trial drains (``trial/preemption.py``: its ``deadline`` and ``seconds_left``),
        else None: a loop that checkpoints every few epochs saves one at its next report, where the
        trial leaves the node and goes on from it (asked of Ray at most every 0.5 s)."""
        from raysweep.trial import preemption

        return preemption.notice()


class Backend:
    """One place a loop can run. ``metric`` is the spec's metric.name: every report carries it.

    What differs between runners for a loop's model and data is a method here, so ``ddp.py``
    never asks which runner it is under (as Ray Train's ``TorchConfig.backend_cls`` chooses).
    """

    name = ""
    group_from_torch = True  # ddp.setup reads rank and world size from a torch.distributed group

    def prepare_model(self, model: Any, wrap: Any) -> Any:
        """The model ready to train: ``wrap`` is raysweep's own (to the device, DDP with 2+ ranks)."""
        return wrap(model)

    def prepare_loader(self, loader: Any) -> Any:
        """The rank's loader, its shard already chosen by raysweep's sampler."""
        return loader

    def __init__(self, trial_dir: str | None = None, metric: str | None = None, watchdog: Any = None):
        self.trial_dir = trial_dir or os.getcwd()
        self.metric = metric
        self.watchdog = watchdog  # a ReportWatchdog while the loop runs with report_timeout_s

    def context(self) -> TrialContext:
        import torch

        return TrialContext(0, 0, 1, torch.device("cuda:0" if torch.cuda.is_available() else "cpu"), self.trial_dir)

    def report(self, metrics: dict[str, Any], checkpoint: str | None) -> None:
        raise NotImplementedError

    def checkpoint(self) -> Any:
        """The trial's latest checkpoint (a ``ray.train.Checkpoint``), or None on a fresh start."""
        return None

    def share(self, value: Any) -> Any:
        """Rank 0's ``value`` on every rank (a collective: every rank calls it); a world of one keeps its own."""
        return value


class LocalBackend(Backend):
    name = "local"

    def __init__(self, checkpoint_dir: str | None = None):
        super().__init__()
        self.reports: list[dict[str, Any]] = []
        self.checkpoint_dir = checkpoint_dir

    def report(self, metrics: dict[str, Any], checkpoint: str | None) -> None:
        self.reports.append(metrics)
        if checkpoint:
            self.checkpoint_dir = tempfile.mkdtemp(prefix="raysweep_ckpt_")
            shutil.copytree(checkpoint, self.checkpoint_dir, dirs_exist_ok=True)

    def checkpoint(self) -> Any:
        return _checkpoint_at(self.checkpoint_dir)


class TuneBackend(Backend):
    def context(self) -> TrialContext:
        import ray
        import torch

        from raysweep.trial import devices

        return TrialContext(0, 0, 1, torch.device(devices.assigned(ray.get_gpu_ids())), self.trial_dir)

    def report(self, metrics: dict[str, Any], checkpoint: str | None) -> None:
        from ray import tune

        tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(checkpoint) if checkpoint else None)
        if checkpoint:
            from raysweep.trial import preemption

            preemption.after_checkpoint()

    def checkpoint(self) -> Any:
        from ray import tune

        return tune.get_checkpoint()


class WarmBackend(Backend):
    def __init__(self, link: RankLink, trial_dir: str | None = None, metric: str | None = None, watchdog: Any = None):
        super().__init__(trial_dir, metric, watchdog)
        self.link = link

    def context(self) -> TrialContext:
        import torch

        link = self.link
        return TrialContext(
            link.rank, link.place.local_rank, link.world_size, torch.device(link.device), self.trial_dir
        )

    def report(self, metrics: dict[str, Any], checkpoint: str | None) -> None:
        self.link.report(metrics, checkpoint)

    def share(self, value: Any) -> Any:
        return self.link.share(value)

    def checkpoint(self) -> Any:
        return self.link.checkpoint  # on the storage: ``as_directory`` reads it from this rank's node


class TrainBackend(Backend):
    group_from_torch = False  # Ray Train's context has the ranks

    def prepare_model(self, model: Any, wrap: Any) -> Any:
        import ray.train.torch

        return ray.train.torch.prepare_model(model)

    def prepare_loader(self, loader: Any) -> Any:
        import ray.train.torch

        # The shard is already ours; Ray only moves batches to the worker's device.
        return ray.train.torch.prepare_data_loader(loader, add_dist_sampler=False)

    def __init__(
        self,
        trial_dir: str | None = None,
        metric: str | None = None,
        restored: str | None = None,
        place: RankPlace | None = None,
        stopping: Callable[[], bool] | None = None,
    ):
        super().__init__(trial_dir, metric)
        self.restored = restored  # the Ray Train checkpoint Tune restored the trial from (TrialJob.restored_checkpoint)
        self.place = place  # found by node id (rank.on_train_worker); None: Ray Train's local rank
        self.stopping = stopping  # asked on rank 0 after each report: Tune stopped the trial

    def context(self) -> TrialContext:
        import ray.train
        import torch

        from raysweep.trial import devices

        ctx = ray.train.get_context()  # Ray Train shows a node's workers all their GPUs: each takes its own
        device = torch.device(devices.assigned(ray.get_gpu_ids()))
        local_rank = self.place.local_rank if self.place else ctx.get_local_rank()
        return TrialContext(ctx.get_world_rank(), local_rank, ctx.get_world_size(), device, self.trial_dir)

    def report(self, metrics: dict[str, Any], checkpoint: str | None) -> None:
        import ray.train

        from raysweep.trial import preemption

        ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(checkpoint) if checkpoint else None)
        if (
            self.stopping is not None
        ):  # every rank stops at the same report, as warm ranks do: none left in a collective
            rank = ray.train.get_context().get_world_rank()
            # stopped by Tune, or leaving a draining node at this checkpoint (the trial's process
            # ends the trial there: no rank trains an epoch past it)
            if self.share(
                self.stopping() or bool(checkpoint and preemption.leaves_at_checkpoint()) if rank == 0 else None
            ):
                from raysweep.trial.warm_rank import TrialStopped

                raise TrialStopped

    def share(self, value: Any) -> Any:
        from ray.train.collective import broadcast_from_rank_zero

        return broadcast_from_rank_zero(value)

    def checkpoint(self) -> Any:
        """This run's latest checkpoint after its worker group restarted, else the one the trial was restored from."""
        import ray.train

        latest = ray.train.get_checkpoint()
        if latest is None and self.restored is not None:
            return ray.train.Checkpoint(self.restored)
        return latest


class ProgramBackend(Backend):
    """A script raysweep launched: reports go to the file the trial reads live (``program.py``)."""

    name = "program"

    def __init__(self) -> None:
        path = os.environ[METRICS_FILE]
        super().__init__(
            os.path.dirname(os.path.dirname(path)), os.environ.get(METRIC) or None
        )  # <trial>/metrics/<file>
        self.path = path

    def context(self) -> TrialContext:
        import torch

        local_rank = int(os.environ.get(LOCAL_RANK, 0))  # the torchrun variables raysweep set for this worker
        device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
        return TrialContext(
            int(os.environ.get(RANK, 0)), local_rank, int(os.environ.get(WORLD_SIZE, 1)), device, self.trial_dir
        )

    def report(self, metrics: dict[str, Any], checkpoint: str | None) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps({"source": "report", "metrics": plain_numbers(metrics)}) + "\n")


def _checkpoint_at(directory: str | None) -> Any:
    if directory is None:
        return None
    from ray.train import Checkpoint

    return Checkpoint.from_directory(directory)


def plain_numbers(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-safe metrics: NumPy and 0-d torch scalars become Python numbers, NaN stays NaN."""
    out = {}
    for key, value in metrics.items():
        value = item(value)
        if isinstance(value, (bool, int, float, str)) or value is None:
            out[key] = value
    return out
