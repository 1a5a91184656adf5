"""What a sweep is told before its first trial: a size that can never be placed or a budget below
one trial is refused (``UserError``), the plan made, and the banner printed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from raysweep import wandb_sweep
from raysweep.driver.trainable import kinds
from raysweep.errors import UserError
from raysweep.placement import Capacity, concurrency_limit, never_placed
from raysweep.runs.run_settings import RunSettings
from raysweep.search.plan import Plan, cheapest_trial_hours, plan
from raysweep.spec import SweepSpec
from raysweep.words import Runner


def check_feasible(sizes: set[int], capacity: Capacity) -> None:
    """Refuse a sweep none of whose trials can ever be placed; name the sizes that never will."""
    never = never_placed(sizes, capacity)
    if never and len(never) == len(sizes):
        raise UserError(f"{never[min(never)]} (every trial of this sweep asks at least num_gpus={min(sizes)})")
    if never:
        print(f"note: trials with num_gpus in {sorted(never)} will fail at once: {never[min(never)]}")
    if capacity.grows:
        late = sorted(s for s in sizes if s > capacity.largest_node)
        if late:
            print(
                f"note: trials with num_gpus in {late} do not fit the cluster as it is now ({capacity.describe()}), "
                f"but {capacity.grows}: they wait for nodes"
            )


def admit(
    spec: SweepSpec, settings: RunSettings, capacity: Capacity, restore: bool
) -> tuple[RunSettings, int | None, Plan]:
    """Refuse what can never run and plan the sweep; returns the settings with the plan, how many
    trials may run at once, and the plan."""
    check_feasible(spec.world_sizes, capacity)
    limit = concurrency_limit(capacity, min(max(spec.world_sizes), capacity.largest_node), settings.max_concurrent)
    planned = plan(spec, settings.segment_budget or settings.budget, spec.budget.epoch_seconds, capacity.use_gpu)
    check_budget_fits(spec, settings, restore)
    return replace(settings, plan=planned), limit, planned


def print_banner(
    spec: SweepSpec,
    settings: RunSettings,
    run_dir: Path,
    capacity: Capacity,
    trial_runners: dict[int, Runner],
    *,
    dashboard: str | None,
    limit: int | None,
    on_wandb: wandb_sweep.WandbSweep | None,
) -> None:
    if not settings.quiet:
        url = dashboard if not settings.address else None
        seed = f"seed {spec.seed}" + (
            f", drawn for it (--seed {spec.seed} repeats its draws)" if settings.seed_drawn else ""
        )
        print(f"sweep {settings.name}: {settings.budget} trials, {spec.method} search, {seed}, run dir {run_dir}")
        print(f"cluster: {capacity.describe()}" + (f"; Ray dashboard {url}" if url else ""))
    if on_wandb:
        print(f"W&B sweep: {on_wandb.url}")
    if not settings.quiet:
        if not capacity.use_gpu:
            print("no GPUs: each trial's num_gpus becomes that many CPU workers, DDP over gloo")
        if spec.defines_by_run:
            sizes = ", ".join(map(str, sorted(spec.world_sizes)))
            print(
                f"trial sizes {sizes}: from {len(spec.sampled_sizes)} draws of {spec.engine.search_space}() "
                "(the space is a function: admission, budgets and the plan can only sample its sizes)"
            )
        if not capacity.managed_slots:
            print(f"note: the cluster's nodes don't advertise raysweep_slot; running at most {limit} trials at once")
    if any(kind.needs_dashboard for kind in kinds(trial_runners)) and not dashboard:
        print(
            "warning: this Ray cluster runs no dashboard. Ray Train frees the workers of a 2+-worker trial "
            "that the scheduler stops through the dashboard's State API; without it their CPUs/GPUs stay "
            "reserved. Start the cluster with its dashboard (the default of `ray start`)."
        )


def check_budget_fits(spec: SweepSpec, settings: RunSettings, restore: bool) -> None:
    """A budget below the cheapest trial's cost (as the spec's epoch_seconds estimate says) is the
    user's mistake, said before any trial runs."""
    hours, epoch_s = settings.budget_gpu_hours, spec.budget.epoch_seconds
    cheapest = cheapest_trial_hours(spec, epoch_s) if hours and epoch_s and not restore else None
    if cheapest is not None and cheapest > hours:
        raise UserError(
            f"budget {hours:g} GPU-hours is below one trial's cost: the cheapest trial (num_gpus="
            f"{min(spec.world_sizes)}, to its first rung at {epoch_s:g} s a report) costs {cheapest:.4g}"
        )
