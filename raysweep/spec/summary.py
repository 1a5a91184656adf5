"""How ``raysweep validate`` shows a spec: a short human summary, or one JSON object."""

from __future__ import annotations

import json
from typing import Any

from raysweep.spec.model import SweepSpec


def summary_json(spec: SweepSpec, count: int | None = None) -> dict[str, Any]:
    """The public ``validate --json`` schema (documented in docs/sweep-file.md)."""
    sched = spec.scheduler
    return {
        "method": spec.method,
        # `metric`: the one metric (None for none or several); `metrics`: several; `objectives`: every one
        "metric": {"name": one.name, "goal": one.goal} if (one := spec.objectives.single) else None,
        **({"metrics": [{"name": m.name, "goal": m.goal} for m in spec.objectives]} if spec.objectives.several else {}),
        "objectives": [{"name": m.name, "goal": m.goal} for m in spec.objectives],
        **({"engine": {k: v for k, v in spec.engine.__dict__.items() if v is not None}} if spec.engine else {}),
        "parameters": {p.name: p.to_json() for p in spec.parameters},
        "grid_size": spec.grid_size,
        "trial_budget": spec.trial_budget(count),
        "scheduler": None
        if sched is None
        else {
            "type": sched.type,
            "grace_period": sched.grace_period,
            "max_t": sched.max_t,
            "reduction_factor": sched.reduction_factor,
            "rungs": sched.rungs,
        }
        | ({"strict": sched.strict} if not sched.kind.in_raysweep_block else {}),
        **({"grow": spec.grow.to_json()} if spec.grow else {}),
    }


def _describe(fields: dict[str, Any]) -> str:
    dist = fields.pop("distribution")
    if dist == "constant":
        return f"= {json.dumps(fields['value'])}"
    return f"{dist}(" + ", ".join(f"{k}={json.dumps(v)}" for k, v in fields.items()) + ")"


def _searcher(spec: SweepSpec) -> str:
    if spec.engine is not None and spec.method == "custom":
        default = spec.engine.record.default_optimizer
        optimizer = f"{spec.engine.optimizer}() in {spec.engine.source}" if spec.engine.optimizer else default
        return f" (engine {spec.engine.kind}: {optimizer})"
    if spec.search_method.learns:
        return f" (Optuna {'a Gaussian process' if spec.searcher.sampler == 'gp' else 'TPE'})"
    return ""


def _goals(spec: SweepSpec) -> str:
    if spec.objectives.several:
        return f"metrics   {spec.objectives.describe()} (the Pareto front)"
    return f"metric    {spec.objectives.describe()}"


def summary_text(spec: SweepSpec, count: int | None = None) -> str:
    data = summary_json(spec, count)
    lines = [
        f"sweep     {spec.name or '(unnamed)'}" + (f" — {spec.description.strip()}" if spec.description else ""),
        f"runs      {spec.train_loop or (f'a {spec.function}-style Python function' if spec.function else spec.program)}",
        f"method    {spec.method}" + _searcher(spec),
        _goals(spec),
        "parameters"
        + (f" (and those of {spec.engine.search_space}() in {spec.engine.source})" if spec.defines_by_run else ""),
    ]
    width = max((len(n) for n in data["parameters"]), default=0)
    lines += [f"  {name:<{width}}  {_describe(dict(f))}" for name, f in data["parameters"].items()]
    if data["grid_size"] is not None:
        lines.append(f"grid size {data['grid_size']}")
    budget = data["trial_budget"]
    lines.append(f"trials    {budget if budget is not None else 'unbounded: give run_cap or --count'}")
    sched = data["scheduler"]
    if sched:
        lines.append(
            f"scheduler {sched['type']}: grace_period={sched['grace_period']}, max_t={sched['max_t']}, "
            f"reduction_factor={sched['reduction_factor']}, rungs at iterations {sched['rungs']}"
        )
    else:
        lines.append("scheduler fifo (no early stopping)")
    if spec.grow is not None:
        sizes = " -> ".join(map(str, spec.grow.sizes))
        lines.append(
            f"grow      {sizes} workers, one size more at each promotion; each rank takes {spec.grow.batch} / workers"
        )
        if spec.grow.fill:
            lines.append(
                "          idle slots in the tail: a trial past its first rung takes twice its size, gives it back"
            )
    return "\n".join(lines)
