"""``raysweep.grow``: trials that grow when promoted (``growth.py``), checked where the file is read.

    raysweep:
      grow:
        sizes: [1, 2, 4, 8]   # a trial starts at the first, and takes the next at each promotion
        batch: batch_size     # the config key of the global batch: each rank gets global / world
        fill: true            # default: past its first rung a trial takes idle slots while nothing waits

A trial goes on from its checkpoint at the new size, so the sweep needs what that takes: a scheduler
that promotes at rungs (ASHA, or W&B's hyperband), an entry point that checkpoints through raysweep
(a ``train_loop`` or a function; a ``program:`` script has no such contract), a global batch every
size divides, and no ``num_gpus`` of its own (the sizes are the trial's).
"""

from __future__ import annotations

from typing import Any

from raysweep.config_keys import get_path
from raysweep.growth import Growth
from raysweep.spec.checks import boolean, int_at_least, mapping, text, unknown_keys
from raysweep.spec.model import SIZE, Scheduler
from raysweep.spec.param import Param

KEYS = ("sizes", "batch", "fill")


def parse_grow(
    own: dict,
    params: list[Param],
    base_config: dict,
    scheduler: Scheduler | None,
    runs_program: bool,
    num_gpus: int | None,
    problems: list[str],
) -> Growth | None:
    """The sweep's ``Growth`` from its ``raysweep:`` block (``own``), or None: none asked, or every
    problem in ``problems``."""
    if "grow" not in own:
        return None
    block = own["grow"]
    if mapping(block, "raysweep.grow", problems) is None:
        return None
    before = len(problems)
    unknown_keys(block, KEYS, "raysweep.grow", problems)
    sizes = _sizes(block.get("sizes"), problems)
    batch = text(block["batch"], "raysweep.grow.batch", problems) if "batch" in block else None
    fill = boolean(block.get("fill", True), "raysweep.grow.fill", problems)
    if batch is None and "batch" not in block:
        problems.append(
            "raysweep.grow.batch: missing; name the config key of the trial's global batch (e.g. batch: batch_size): "
            "each rank gets global / world, so a trial that grows keeps its batch and its learning rate"
        )
    if scheduler is None or not scheduler.kind.promotes:
        got = "no early stopping" if scheduler is None else f"raysweep.scheduler type {scheduler.type}"
        problems.append(
            f"raysweep.grow: a trial grows at the rungs where it is promoted, and this sweep has {got}; use "
            "early_terminate (W&B's hyperband) or raysweep.scheduler type asha"
        )
    if runs_program:
        problems.append(
            "raysweep.grow: a program: script has no checkpoint raysweep can hand to the larger gang; "
            "grow a train_loop or a function that reports its checkpoints through raysweep"
        )
    if num_gpus is not None or any(p.name == SIZE for p in params):
        where = f"parameters.{SIZE}" if num_gpus is None else f"raysweep.{SIZE}"
        problems.append(f"raysweep.grow: the sizes are each trial's; remove {where}")
    if sizes and batch:
        _check_batch(batch, sizes, params, base_config, problems)
    return Growth(sizes, batch, bool(fill)) if len(problems) == before else None


def _sizes(value: Any, problems: list[str]) -> tuple[int, ...]:
    where = "raysweep.grow.sizes"
    if not isinstance(value, list) or len(value) < 2:
        problems.append(f"{where}: must be a list of two or more sizes, e.g. [1, 2, 4, 8], got {value!r}")
        return ()
    sizes = [int_at_least(v, 1, f"{where}[{i}]", problems) for i, v in enumerate(value)]
    if None in sizes:
        return ()
    if sizes != sorted(set(sizes)):
        problems.append(f"{where}: must grow, each size larger than the one before, got {value!r}")
        return ()
    return tuple(sizes)


def _check_batch(
    batch: str, sizes: tuple[int, ...], params: list[Param], base_config: dict, problems: list[str]
) -> None:
    """The global batch must have values raysweep knows, each of which every size divides."""
    where = f"raysweep.grow.batch: {batch!r}"
    param = next((p for p in params if p.name == batch), None)
    if param is not None:
        if param.distribution not in ("constant", "categorical"):
            problems.append(
                f"{where} is searched as {param.distribution}; give it values (or a value) that every size in "
                f"{list(sizes)} divides, so each rank's share is whole"
            )
            return
        values = list(param.grid_values())
    else:
        found = get_path(base_config, batch)
        if found is None:
            problems.append(
                f"{where} has no value in parameters or raysweep.base_config; set the global batch there, "
                "where raysweep can split it among the ranks"
            )
            return
        values = [found]
    for value in values:
        bad = [s for s in sizes if not isinstance(value, int) or isinstance(value, bool) or value % s]
        if bad:
            problems.append(
                f"{where} = {value!r} does not divide among {bad[0]} ranks; the global batch must be a whole "
                f"number every size in {list(sizes)} divides"
            )
            return
