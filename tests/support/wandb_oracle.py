"""W&B's own sweep engine (PyPI ``sweeps``) answering questions over stdin/stdout, one JSON per line.

It runs in ``.venv-wandb`` (``make test`` creates it): ``sweeps`` pins numpy<2, which raysweep's
torch and Ray do not. The tests start it once (``tests/conftest.py: wandb_oracle``) and ask:

* ``{"op": "verdict", "config": {...}}`` -> ``{"ok": bool, "errors": [...]}``: what ``wandb sweep``
  says of the file (schema, min/max and probability checks; grid's rules): W&B's local
  controller refuses what it flags (raysweep's ``--strict``).
* ``{"op": "cloud", "config": {...}}`` -> ``{"ok": bool, "errors": [...]}``: whether W&B's service
  runs the file (its engine proposes a run without validating): raysweep's default.
* ``{"op": "violations", "config": {...}}`` -> ``{"violations": [...]}``: what ``wandb sweep`` warns
  about (W&B's schema, #135-#138), and W&B's local controller refuses.
* ``{"op": "grid", "config": {...}, "limit": N}`` -> ``{"points": [flat configs, in order],
  "configs": [each run's config as the agent hands it over, nested blocks as mappings]}``.
* ``{"op": "grid_size", "config": {...}}`` -> ``{"size": N}``: the grid's size, not enumerated.
* ``{"op": "sample", "config": {...}, "n": N, "seed": S}`` -> ``{"points": [...], "types": [...]}``.
* ``{"op": "hyperband", "config": {...}, "runs": [{"name", "state", "history": [values]}]}``
  -> ``{"stop": [names]}``.
* ``{"op": "next_run", "config": {...}, "runs": [{"name", "state", "config": {name: value},
  "history": [{metrics}]}], "seed": S}`` -> ``{"point": {name: value}}`` (null when the sweep
  is done): what W&B's server proposes next (bench part 3's system (c), a ``wandb agent``).
"""

from __future__ import annotations

import json
import random
import sys
import warnings

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
from sweeps import (  # noqa: E402
    RunState,
    SweepConfig,
    SweepRun,
    next_run,
    schema_violations_from_proposed_config,
    stop_runs,
)
from sweeps.grid_search import yaml_hash  # noqa: E402
from sweeps.params import HyperParameter, HyperParameterSet  # noqa: E402


def _flat(config: dict, prefix: str = "") -> dict:
    """A run's config ({name: {"value": v}}, nested for nested parameters) as dotted names."""
    out = {}
    for key, entry in config.items():
        value = entry["value"]
        if isinstance(value, dict) and key in _NESTED:
            out |= _flat({k: {"value": v} for k, v in value.items()}, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


_NESTED: set[str] = set()


def _nested_names(parameters: dict) -> set[str]:
    names = set()
    for key, entry in parameters.items():
        if isinstance(entry, dict) and "parameters" in entry:
            names.add(key)
            names |= _nested_names(entry["parameters"])
    return names


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def verdict(config: dict) -> dict:
    try:
        filled = SweepConfig(config)
        if filled["method"] == "grid":  # grid's own rules are checked when it proposes a run
            next_run(filled, [])
    except Exception as e:  # noqa: BLE001  (any refusal is the verdict)
        return {"ok": False, "errors": [str(e).splitlines()[0] if str(e) else type(e).__name__]}
    return {"ok": True, "errors": []}


def cloud(config: dict) -> dict:
    """What W&B's service does with the file: its engine proposes a first run without validating
    (``next_run``'s default), as for every sweep ``wandb sweep`` creates; a file it cannot run
    raises there. Only this call's exceptions are the engine's answer; any other is the oracle's own."""
    try:
        next_run(config, [], validate=False)
    except Exception as e:  # noqa: BLE001  (the engine refuses the file: its answer, not a crash)
        return {"ok": False, "errors": [f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"]}
    return {"ok": True, "errors": []}


# grid and sample take the file as W&B's server hands it to the engine: unfilled (SweepConfig's
# filling drops nested parameter blocks).


def grid(config: dict, limit: int) -> dict:
    runs: list = []
    while len(runs) < limit:
        run = next_run(config, runs)
        if run is None:
            break
        runs.append(run)
    return {
        "points": [_plain(_flat(r.config)) for r in runs],
        "configs": [_plain({k: v["value"] for k, v in r.config.items()}) for r in runs],
    }


def grid_size(config: dict) -> dict:
    """How many runs W&B's grid has, counted as its engine builds the grid (grid_search.py:
    int_uniform as range(min, max + 1), q_uniform as numpy.arange(min, max, q), equal values
    one point by their yaml_hash), without enumerating it."""
    size = 1
    for p in HyperParameterSet.from_config(config["parameters"]):
        if p.type == HyperParameter.INT_UNIFORM:
            size *= p.config["max"] - p.config["min"] + 1
        elif p.type == HyperParameter.Q_UNIFORM:
            size *= len(np.arange(p.config["min"], p.config["max"], p.config["q"]))
        elif p.type == HyperParameter.CATEGORICAL:
            size *= len({yaml_hash(v) for v in p.config["values"]})
    return {"size": size}


def sample(config: dict, n: int, seed: int) -> dict:
    random.seed(seed)
    np.random.seed(seed)
    params = HyperParameterSet.from_config(config["parameters"])
    points, types = [], []
    for _ in range(n):
        row, kinds = {}, {}
        for p in params:
            value = p.sample()
            name = p.name.replace(HyperParameterSet.NESTING_DELIMITER, ".")
            row[name] = _plain(value)
            kinds[name] = type(_plain(value)).__name__
        points.append(row)
        types.append(kinds)
    return {"points": points, "types": types}


def hyperband(config: dict, runs: list[dict]) -> dict:
    metric = config["metric"]["name"]
    sweep_runs = [
        SweepRun(name=r["name"], state=RunState(r["state"]), history=[{metric: v} for v in r["history"]]) for r in runs
    ]
    return {"stop": sorted(r.name for r in stop_runs(config, sweep_runs))}


def propose(config: dict, runs: list[dict], seed: int | None) -> dict:
    if seed is not None:  # W&B's random and bayes draw from numpy's and Python's global generators
        random.seed(seed)
        np.random.seed(seed)
    sweep_runs = [
        SweepRun(
            name=r["name"],
            state=RunState(r["state"]),
            config={k: {"value": v} for k, v in r["config"].items()},
            history=r.get("history", []),
            summary_metrics=(r.get("history") or [{}])[-1],
        )
        for r in runs
    ]
    run = next_run(config, sweep_runs)
    return {"point": None if run is None else _plain({k: v["value"] for k, v in run.config.items()})}


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        _NESTED.clear()
        _NESTED.update(_nested_names(request.get("config", {}).get("parameters", {}) or {}))
        try:
            op = request["op"]
            if op == "verdict":
                answer = verdict(request["config"])
            elif op == "cloud":
                answer = cloud(request["config"])
            elif op == "violations":
                answer = {"violations": schema_violations_from_proposed_config(request["config"])}
            elif op == "grid_size":
                answer = grid_size(request["config"])
            elif op == "grid":
                answer = grid(request["config"], request.get("limit", 10**6))
            elif op == "sample":
                answer = sample(request["config"], request["n"], request.get("seed", 0))
            elif op == "hyperband":
                answer = hyperband(request["config"], request["runs"])
            elif op == "next_run":
                answer = propose(request["config"], request["runs"], request.get("seed"))
            else:
                answer = {"error": f"unknown op {op!r}"}
        except Exception as e:  # noqa: BLE001
            answer = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
