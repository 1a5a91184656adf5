"""How raysweep reads and shows a value, one copy of each: the spec's checks, the driver's
progress line, ``show``, the report and the run dir's JSON all use these."""

from __future__ import annotations

import json
import math
import numbers
import re
from typing import Any

import numpy as np

HOUR = 3600.0  # seconds: GPU-hours (worker-hours on CPUs) are a trial's workers x its seconds / HOUR


def finite_number(value: Any) -> bool:
    """A real number a metric or bound can be (not a bool, NaN or inf)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def plain(value: Any) -> Any:
    """NumPy scalars (Tune's samplers return them) as Python numbers, so configs stay JSON."""
    return value.item() if isinstance(value, np.generic) else value


def json_default(value: Any) -> Any:
    """JSON for what Tune's results hold besides plain values: NumPy scalars and arrays."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, numbers.Number):
        return float(value)
    return str(value)


def short(value: Any) -> str:
    """A value in a table cell or a one-line config: floats to 4 significant digits."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (str, int)):
        return str(value)
    return json.dumps(value, default=str)


def short_config(config: dict[str, Any]) -> str:
    """A trial's config on one line: ``lr=0.001, num_gpus=2``."""
    return ", ".join(f"{k}={short(v)}" for k, v in config.items())


def clock(seconds: float) -> str:
    """``mm:ss`` (``h:mm:ss`` past an hour), as the progress line counts."""
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def duration(seconds: float) -> str:
    """``3m 07s`` (``1h 02m 03s``), as the report says how long a sweep ran."""
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h}h {m:02d}m {s:02d}s" if h else f"{m}m {s:02d}s"


def safe_name(text: str) -> str:
    """A name as a directory or a SLURM job may carry it: letters, digits, '.', '_' and '-'."""
    return re.sub(r"[^\w.-]+", "-", text).strip("-")
