"""What the report's figures share: a value's label, the parameters that vary, the mark of a stopped trial."""

from __future__ import annotations

import json
from typing import Any

from raysweep.runs.record import SweepRecord
from raysweep.runs.sweep_results import RankedTrial
from raysweep.spec import SweepSpec

STOP_MARK = "stopped by the scheduler"


def label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def varying_params(sweep: SweepRecord, trials: list[RankedTrial]) -> list[str]:
    """The swept parameters that take more than one value among ``trials``, in spec order."""
    names = [p.name for p in sweep.spec.parameters]
    names += [k for t in trials for k in t.config if k not in names]
    return [n for n in dict.fromkeys(names) if len({label(t.config.get(n)) for t in trials}) > 1]


def choice_labels(spec: SweepSpec, name: str, values: list[Any]) -> list[str]:
    """A categorical parameter's values as labels: in the spec's order, then any others seen."""
    declared = [label(v) for v in (spec.param(name).values or ())] if spec.param(name) is not None else []
    seen = {label(v) for v in values}
    return [c for c in declared if c in seen] + sorted(seen - set(declared))
