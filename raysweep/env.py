"""Every environment variable raysweep reads or sets, in one table (docs/environment.md is made
from it: ``markdown_table``; a test holds the two together and fails when a module names a
variable the table lacks), and the one helper that sets and unsets them for a while (a warm
worker runs other trials after this one)."""

from __future__ import annotations

import contextlib
import os
from collections import namedtuple
from collections.abc import Iterator

# One variable of the table; ``use``: "read" (a user's or a test's switch), "set" (raysweep sets it
# for Ray, torch or W&B) or "script" (a program: script gets it). A named tuple, not a dataclass:
# every process of a program: script loads this module as it starts (``program_hook``), and
# importing dataclasses there cost 13-17 ms.
Variable = namedtuple("Variable", "name use what")


# raysweep's own switches
FAKE_GPUS = "RAYSWEEP_FAKE_GPUS"
GPU_DEVICE_FILES = "RAYSWEEP_GPU_DEVICE_FILES"
ONE_WORKER_TORCHTRAINER = "RAYSWEEP_ONE_WORKER_TORCHTRAINER"
BIN = "RAYSWEEP_BIN"
BACKFILL = "RAYSWEEP_BACKFILL"
START_AHEAD = "RAYSWEEP_START_AHEAD"
WARM_IMPORTS = "RAYSWEEP_WARM_IMPORTS"
CACHE_DIR = "RAYSWEEP_CACHE_DIR"
# what raysweep tells a program: script it starts
METRICS_FILE = "RAYSWEEP_METRICS_FILE"
METRIC = "RAYSWEEP_METRIC"
CHECKPOINT_DIR = "RAYSWEEP_CHECKPOINT_DIR"
# Ray's, Tune's, torch's and W&B's that raysweep reads or sets
RAY_ADDRESS = "RAY_ADDRESS"
RAY_AUTH_MODE = "RAY_AUTH_MODE"
CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
PENDING_TRIALS = "TUNE_MAX_PENDING_TRIALS_PG"
TRAIN_POLL = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"
TRAIN_START_TIMEOUT = "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S"
WORKER_NICENESS = "RAY_worker_niceness"
PG_RETRY_MIN = "RAY_gcs_create_placement_group_retry_min_interval_ms"
PG_RETRY_MAX = "RAY_gcs_create_placement_group_retry_max_interval_ms"
RESOURCE_REPORT = "RAY_raylet_report_resources_period_milliseconds"
PYTHONPATH = "PYTHONPATH"
WANDB_API_KEY = "WANDB_API_KEY"
WANDB_DIR = "WANDB_DIR"
WANDB_SILENT = "WANDB_SILENT"
LOCAL_RANK = "LOCAL_RANK"
# the rest of Ray's, Tune's, torchrun's and W&B's, each named as itself
WANDB_PROJECT = "WANDB_PROJECT"
WANDB_ENTITY = "WANDB_ENTITY"
GLOO_SOCKET_IFNAME = "GLOO_SOCKET_IFNAME"
NCCL_SOCKET_IFNAME = "NCCL_SOCKET_IFNAME"
TUNE_DISABLE_AUTO_CALLBACK_LOGGERS = "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"
TUNE_DISABLE_STRICT_METRIC_CHECKING = "TUNE_DISABLE_STRICT_METRIC_CHECKING"
TUNE_FUNCTION_THREAD_TIMEOUT_S = "TUNE_FUNCTION_THREAD_TIMEOUT_S"
RAY_AIR_NEW_OUTPUT = "RAY_AIR_NEW_OUTPUT"
RAY_TRAIN_V2_ENABLED = "RAY_TRAIN_V2_ENABLED"
RANK = "RANK"
WORLD_SIZE = "WORLD_SIZE"
LOCAL_WORLD_SIZE = "LOCAL_WORLD_SIZE"
GROUP_RANK = "GROUP_RANK"
NODE_RANK = "NODE_RANK"
GROUP_WORLD_SIZE = "GROUP_WORLD_SIZE"
MASTER_ADDR = "MASTER_ADDR"
MASTER_PORT = "MASTER_PORT"
PYTHONUNBUFFERED = "PYTHONUNBUFFERED"
WANDB_SWEEP_PARAM_PATH = "WANDB_SWEEP_PARAM_PATH"
WANDB_SWEEP_ID = "WANDB_SWEEP_ID"
WANDB_RUN_ID = "WANDB_RUN_ID"
WANDB_RUN_GROUP = "WANDB_RUN_GROUP"
WANDB_RESUME = "WANDB_RESUME"
WANDB_MODE = "WANDB_MODE"

VARIABLES = (
    Variable(FAKE_GPUS, "read", "an embedded Ray advertises N GPUs that do not exist (GPU placement tested on CPUs)"),
    Variable(GPU_DEVICE_FILES, "read", "a glob of NVIDIA's device files, for tests of a GPU a rank cannot use"),
    Variable(
        ONE_WORKER_TORCHTRAINER, "read", "1: a 1-worker trial under ddp_workers: torchtrainer is a TorchTrainer run too"
    ),
    Variable(BACKFILL, "read", "0: no reservations and backfill; trials start as Tune stages them (bench.admission)"),
    Variable(
        START_AHEAD,
        "read",
        "0: under backfill, a warm trial runs in Tune's placement group of its shape and the reserved trial "
        "starts only once its slots are free (default: it places its own slots and starts ahead of them, "
        "trial/slots.py; bench.admission, docs/budgets-and-admission.md)",
    ),
    Variable(
        WARM_IMPORTS,
        "read",
        "modules a warm worker imports before its first trial, comma-separated (default torch._dynamo; empty: none)",
    ),
    Variable(
        CACHE_DIR,
        "read",
        "where the local copies of run dirs on a URI --storage go (default: ~/.cache/raysweep)",
    ),
    Variable(BIN, "read", "the virtualenv a `raysweep slurm` batch script runs (default: the one that wrote it)"),
    Variable(RAY_ADDRESS, "read", "the Ray cluster to join when --address is not given (`ray job submit` sets it)"),
    Variable(
        RAY_AUTH_MODE, "read", "token: what `--address` needs to join a cluster with token authentication (clusters.md)"
    ),
    Variable(
        WANDB_DIR,
        "read",
        "where W&B-style functions and scripts write their runs (default, and what a script gets: the working directory)",
    ),
    Variable(WANDB_API_KEY, "read", "with a key, W&B is online unless told otherwise"),
    Variable(WANDB_PROJECT, "read", "kept as it was around creating a W&B sweep, which sets it"),
    Variable(WANDB_ENTITY, "read", "kept as it was around creating a W&B sweep, which sets it"),
    Variable(METRICS_FILE, "script", "a program: script's reports go to this file, which its trial reads live"),
    Variable(METRIC, "script", "the sweep's metric.name, in a program: script"),
    Variable(
        CHECKPOINT_DIR,
        "script",
        "the trial checkpoint directory: what rank 0 wrote there is kept with its next report and put back "
        "before a restarted trial's script starts",
    ),
    Variable(CUDA_VISIBLE_DEVICES, "set", "a rank's GPUs (a warm worker: its one GPU; --gpus: the embedded Ray's)"),
    Variable(GLOO_SOCKET_IFNAME, "set", "raysweep.resources.network_interface, on every rank and script"),
    Variable(NCCL_SOCKET_IFNAME, "set", "raysweep.resources.network_interface, on every rank and script"),
    Variable(WANDB_SILENT, "set", "the driver's own W&B runs print nothing (unless set)"),
    Variable(TUNE_DISABLE_AUTO_CALLBACK_LOGGERS, "set", "no CSV and TensorBoard copies of results"),
    Variable(TUNE_DISABLE_STRICT_METRIC_CHECKING, "set", "a W&B-style trial that never logged the metric ends done"),
    Variable(
        PENDING_TRIALS,
        "set",
        "1 for sweeps whose trials span nodes or with a budget; the admission's queue under backfill",
    ),
    Variable(
        TUNE_FUNCTION_THREAD_TIMEOUT_S, "set", "30 s for a stopped trial's thread to end at its report (unless set)"
    ),
    Variable(RAY_AIR_NEW_OUTPUT, "set", "0: Tune's console tables off, the monitor prints instead (unless set)"),
    Variable(RAY_TRAIN_V2_ENABLED, "set", "1: Ray Train V2 (unless set)"),
    Variable(TRAIN_POLL, "set", "0.1 s: Ray Train polls its workers often (unless set)"),
    Variable(
        TRAIN_START_TIMEOUT,
        "set",
        "in a TorchTrainer trial's process: what is left of its `worker_start_timeout_s`, Ray Train's bound on "
        "starting its worker group (its controller then gives up and removes the group)",
    ),
    Variable(
        WORKER_NICENESS,
        "set",
        "0: the sweep's Ray workers, and so its trials, run at nice 0, as torchrun's (Ray: 15; unless set)",
    ),
    Variable(
        PG_RETRY_MIN,
        "set",
        "10 ms, and the next 50 ms: the GCS of a Ray raysweep starts (embedded, `raysweep slurm`) retries a "
        "waiting placement group soon after a trial's slots free (Ray: up to 1 s; unless set)",
    ),
    Variable(PG_RETRY_MAX, "set", "50 ms (the same)"),
    Variable(
        RESOURCE_REPORT,
        "set",
        "20 ms: each raylet of a Ray raysweep starts tells the GCS soon that a trial's slots are free, and the "
        "next trial gets them ~55 ms sooner (Ray: 100 ms; unless set)",
    ),
    Variable(PYTHONPATH, "set", "every Ray worker's, with the driver's working directory first (where loops live)"),
    # what a program: script gets, as under torchrun and wandb agent (docs/train-loops.md)
    Variable(RANK, "script", "the script's rank, as torchrun sets it"),
    Variable(LOCAL_RANK, "script", "its rank on its node (also read by `raysweep.ddp` outside a trial)"),
    Variable(WORLD_SIZE, "script", "the trial's ranks"),
    Variable(LOCAL_WORLD_SIZE, "script", "the trial's ranks on this node"),
    Variable(GROUP_RANK, "script", "this node's index among the trial's nodes"),
    Variable(NODE_RANK, "script", "the same, as multi-node launchers name it"),
    Variable(GROUP_WORLD_SIZE, "script", "the trial's nodes"),
    Variable(MASTER_ADDR, "script", "rank 0's address, for init_process_group"),
    Variable(MASTER_PORT, "script", "a free port of rank 0's node, for init_process_group"),
    Variable(PYTHONUNBUFFERED, "script", "1: the script's lines reach the console as printed"),
    Variable(WANDB_SWEEP_PARAM_PATH, "script", "the file of the trial's values, which wandb.init reads"),
    Variable(WANDB_SWEEP_ID, "script", "the W&B sweep the run joins (only a sweep W&B created)"),
    Variable(WANDB_RUN_ID, "script", "rank 0's run is the trial's: its id"),
    Variable(WANDB_RUN_GROUP, "script", "the sweep's group: every rank's run joins it"),
    Variable(WANDB_RESUME, "script", "allow: a restarted trial continues its W&B run"),
    Variable(WANDB_MODE, "script", "offline, online or disabled, as the sweep runs"),
)


def markdown_table() -> str:
    """docs/environment.md's table: one row per variable, in the table's order."""
    rows = ["| variable | read or set | what |", "|---|---|---|"]
    rows += [f"| `{v.name}` | {v.use} | {v.what} |" for v in VARIABLES]
    return "\n".join(rows)


def warm_imports() -> tuple[str, ...]:
    """``WARM_IMPORTS``' modules: by default ``torch._dynamo``, which the first optimizer a loop
    builds imports (about 2 s of a CPU); the driver reads it and hands it to every warm worker."""
    value = os.environ.get(WARM_IMPORTS, "torch._dynamo")
    return tuple(m.strip() for m in value.split(",") if m.strip())


def set_env(values: dict[str, str | None]) -> None:
    """Set each variable to its value, or unset it where the value is None."""
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@contextlib.contextmanager
def env_set(values: dict[str, str | None]) -> Iterator[None]:
    """``values`` set (None: unset) for a while, then put back as they were."""
    before = {key: os.environ.get(key) for key in values}
    set_env(values)
    try:
        yield
    finally:
        set_env(before)
