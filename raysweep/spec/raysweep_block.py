"""raysweep's own keys of a sweep file (its ``raysweep:`` block, and W&B's ``run_cap``,
``project``, ``entity``): the trial's size, the resources, budget, searcher and W&B blocks, and
the scalar settings, each checked with its default. ``parse.py`` puts them in the ``SweepSpec``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from raysweep.spec.checks import (
    boolean,
    choice,
    gpu_share,
    int_at_least,
    parse_block,
    positive,
    text,
)
from raysweep.spec.model import (
    DDP_WORKERS,
    PROCESS_GROUP_TIMEOUT_S,
    SAMPLERS,
    SIZE,
    USE_GPU,
    WANDB_MODES,
    WORKER_START_TIMEOUT_S,
    Budget,
    CheckpointPolicy,
    Resources,
    Searcher,
    WandbSettings,
    world_sizes,
)
from raysweep.spec.param import Param
from raysweep.spec.parameters_block import check_size_param
from raysweep.words import Runner


def check_packing(resources: Resources, size_param: Param | None, num_gpus: int | None, problems: list[str]) -> None:
    """A GPU share below 1 packs 1-worker trials; a DDP rank needs a GPU of its own (NCCL)."""
    if resources.gpus_per_worker >= 1:
        return
    sizes = world_sizes(size_param, num_gpus)
    if max(sizes) > 1:
        problems.append(
            f"raysweep.resources.gpus_per_worker: {resources.gpus_per_worker:g} packs 1-worker trials onto one GPU, "
            f"but this sweep has trials with num_gpus up to {max(sizes)}: each DDP rank "
            "needs a GPU of its own (NCCL refuses two ranks on one device)"
        )


def parse_size(params: list[Param], own: dict, problems: list[str]) -> tuple[Param | None, int | None, bool]:
    """A trial's size: the ``num_gpus`` parameter or ``raysweep.num_gpus`` (one of them), and
    whether the parameter's values are known good (whole numbers >= 1)."""
    size_param = next((p for p in params if p.name == SIZE), None)
    sizes_known = True
    if size_param is not None:
        before = len(problems)
        check_size_param(size_param, problems)
        sizes_known = len(problems) == before
    num_gpus = int_at_least(own[SIZE], 1, f"raysweep.{SIZE}", problems) if SIZE in own else None
    if num_gpus is not None and size_param is not None:
        problems.append(
            f"raysweep.{SIZE}: the file also sweeps parameters.{SIZE}; size trials with one of them "
            "(the parameter reaches the script, raysweep's key does not)"
        )
    return size_param, num_gpus, sizes_known


def parse_checkpoints(own: dict, problems: list[str]) -> CheckpointPolicy:
    """``raysweep.checkpoints``: ``keep_best_trials`` a whole number >= 0 or ``all``; ``keep_per_trial`` >= 1."""
    if "checkpoints" not in own:
        return CheckpointPolicy()

    def best(value: Any, where: str, found: list[str]) -> int | None:
        if value == "all" or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
            return value
        found.append(f"{where}: must be an integer >= 0 or all, got {value!r}")
        return None

    policy = parse_block(
        own["checkpoints"],
        "raysweep.checkpoints",
        CheckpointPolicy,
        {"keep_best_trials": best, "keep_per_trial": lambda v, w, pr: int_at_least(v, 1, w, pr)},
        problems,
    )
    return replace(policy, keep_best_trials=None) if policy.keep_best_trials == "all" else policy


def parse_blocks(doc: dict, own: dict, problems: list[str]) -> tuple[Resources, Budget, Searcher, WandbSettings]:
    """``raysweep.resources``, ``raysweep.searcher`` and ``raysweep.wandb`` (with W&B's own
    ``project`` and ``entity`` as the defaults)."""
    resources = Resources()
    if "resources" in own:
        resources = parse_block(
            own["resources"],
            "raysweep.resources",
            Resources,
            {
                "cpus_per_worker": positive,
                "gpus_per_worker": gpu_share,
                "memory_per_worker_gb": positive,
                "network_interface": text,
                "use_gpu": lambda v, w, pr: choice(v, USE_GPU, w, pr),
            },
            problems,
        )
    budget = Budget()
    if "budget" in own:
        budget = parse_block(
            own["budget"], "raysweep.budget", Budget, {"gpu_hours": positive, "epoch_seconds": positive}, problems
        )
    searcher = Searcher()
    if "searcher" in own:
        searcher = parse_block(
            own["searcher"],
            "raysweep.searcher",
            Searcher,
            {
                "sampler": lambda v, w, pr: choice(v, SAMPLERS, w, pr),
                "n_startup_trials": lambda v, w, pr: int_at_least(v, 0, w, pr),
                "constant_liar": boolean,
                "skip_duplicates": boolean,
            },
            problems,
        )
    wandb = WandbSettings(project=doc.get("project"), entity=doc.get("entity"))
    if isinstance(own.get("wandb"), str):  # the mode alone, as --wandb takes it: `wandb: disabled`
        wandb = replace(wandb, mode=choice(own["wandb"], WANDB_MODES, "raysweep.wandb", problems))
    elif "wandb" in own:
        block = parse_block(
            own["wandb"],
            "raysweep.wandb",
            WandbSettings,
            {"project": text, "entity": text, "group": text, "mode": lambda v, w, pr: choice(v, WANDB_MODES, w, pr)},
            problems,
        )
        wandb = replace(block, project=block.project or wandb.project, entity=block.entity or wandb.entity)
    return resources, budget, searcher, wandb


def parse_settings(doc: dict, own: dict, problems: list[str]) -> dict[str, Any]:
    """``run_cap`` and raysweep's scalar settings, each checked, with its default."""

    def optional(key: str, check: Callable, *args: Any) -> Any:
        return check(own[key], *args, f"raysweep.{key}", problems) if key in own else None

    settings = {
        "run_cap": int_at_least(doc["run_cap"], 1, "run_cap", problems) if "run_cap" in doc else None,
        "max_concurrent": optional("max_concurrent", int_at_least, 1),
        "max_failures": optional("max_failures", int_at_least, 0) or 0,
        "max_preemptions": _or(optional("max_preemptions", int_at_least, 0), 10),
        "max_initial_failures": optional("max_initial_failures", int_at_least, 0),
        "seed": optional("seed", int_at_least, 0),
        "report_timeout_s": optional("report_timeout_s", positive),
        "process_group_timeout_s": optional("process_group_timeout_s", positive) or PROCESS_GROUP_TIMEOUT_S,
        "worker_start_timeout_s": optional("worker_start_timeout_s", positive) or WORKER_START_TIMEOUT_S,
        "reuse_actors": optional("reuse_actors", boolean) is not False,
        "ddp_workers": _runner(optional("ddp_workers", choice, DDP_WORKERS)),
    }
    if settings["max_initial_failures"] is None:
        settings["max_initial_failures"] = 5
    optional("strict", boolean)
    for key in ("name", "description", "project", "entity"):
        if key in doc:
            text(doc[key], key, problems)
    return settings


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _runner(chosen: Any) -> Runner:
    """``ddp_workers`` as its runner's word: warm unless a valid other one is chosen (an invalid
    one is already a problem)."""
    return Runner(chosen) if chosen in DDP_WORKERS else Runner.WARM
