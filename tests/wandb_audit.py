"""Audit sweep files against W&B's engine: ``python tests/wandb_audit.py DIR...``.

For every ``*.yaml``/``*.yml`` under the dirs: W&B's verdict, raysweep's verdict, and for grid
files whether the points (names, values, types, order) and what the script receives agree.
Prints one line per file and a count; exits 1 on any disagreement. The oracle is the one the
tests use (tests/wandb_oracle.py in .venv-wandb).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import ROOT, WandbOracle  # noqa: E402

from raysweep.errors import SpecError  # noqa: E402
from raysweep.spec import grid_points, parse_spec  # noqa: E402
from raysweep.spec.space import wandb_config  # noqa: E402


def audit(path: Path, oracle: WandbOracle) -> tuple[bool, str]:
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        return True, "not YAML"
    if not isinstance(doc, dict) or "parameters" not in doc or "method" not in doc:
        return True, "not a sweep file"
    wandb_part = {k: v for k, v in doc.items() if k != "raysweep"}
    theirs = oracle.ask("verdict", config=json.loads(json.dumps(wandb_part, default=str)))
    ours = dict(doc)
    if "program" not in ours and "command" not in ours and "raysweep" not in ours:
        ours["program"] = "train.py"  # a Python-API sweep moved to a file: it names its script
    try:
        spec = parse_spec(ours)
        ok, why = True, ""
    except SpecError as e:
        ok, why = False, "; ".join(e.problems)
    if ok != theirs["ok"]:
        return False, f"verdict: W&B {theirs['ok']} ({'; '.join(theirs['errors'])}), raysweep {ok} ({why})"
    if ok and spec.method == "grid":
        answer = oracle.ask("grid", config=json.loads(json.dumps(wandb_part)), limit=500)
        points = grid_points(spec, len(answer["points"]))
        same = [json.dumps(p, sort_keys=True) for p in points] == [json.dumps(p, sort_keys=True) for p in answer["points"]]
        shaped = [json.dumps(wandb_config(spec, p), sort_keys=True) for p in points]
        if not same or shaped != [json.dumps(c, sort_keys=True) for c in answer["configs"]]:
            return False, "grid points differ"
        return True, f"both accept; grid of {len(points)} points agrees"
    return True, f"both {'accept' if ok else 'refuse'}" + (f" ({why})" if why else "")


def main(dirs: list[str]) -> int:
    oracle = WandbOracle(ROOT / ".venv-wandb" / "bin" / "python")
    files = sorted(p for d in dirs for p in Path(d).rglob("*") if p.suffix in (".yaml", ".yml"))
    bad = counted = 0
    for path in files:
        ok, what = audit(path, oracle)
        if what in ("not YAML", "not a sweep file"):
            continue
        counted += 1
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {path}: {what}")
    print(f"{counted} sweep files, {bad} disagreement(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
