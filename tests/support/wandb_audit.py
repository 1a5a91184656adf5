"""Audit sweep files against W&B's engine: ``python tests/support/wandb_audit.py DIR...``.

For every ``*.yaml``/``*.yml`` under the dirs: W&B's verdicts (its service's and its local
controller's) beside raysweep's (default and --strict), the documented difference (docs/differences-from-wandb.md) that explains any
disagreement, and for grid files whether the points (names, values, types, order) and what the
script receives agree.
Prints one line per file and a count; exits 1 on any disagreement. The oracle is the one the
tests use (tests/support/wandb_oracle.py in .venv-wandb).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS), str(TESTS / "search")]  # conftest, and the oracle test's checks
from conftest import ROOT, WandbOracle  # noqa: E402
from test_wandb_oracle import differences_in, ours_accepts, wandb_verdict  # noqa: E402

from raysweep.spec import grid_points, parse_spec  # noqa: E402
from raysweep.spec.reading import read_yaml  # noqa: E402
from raysweep.spec.space import wandb_config  # noqa: E402


def audit(path: Path, oracle: WandbOracle) -> tuple[bool, str]:
    """One file through test_wandb_oracle's checks: W&B's service ("cloud", raysweep's default)
    and local controller ("verdict", raysweep's --strict), then its grid."""
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        return True, "not YAML"
    if not isinstance(raw, dict) or "parameters" not in raw:
        return True, "not a sweep file"
    wandb_part = json.loads(json.dumps({k: v for k, v in raw.items() if k != "raysweep"}, default=str))
    ours_doc = read_yaml(path)
    said = []
    for op, strict in (("cloud", False), ("verdict", True)):
        theirs = wandb_verdict(oracle, op, wandb_part)
        ok, problems = ours_accepts(ours_doc, strict)
        if ok != theirs["ok"]:
            found = differences_in(raw, ours_doc, strict)
            if not found:
                return (
                    False,
                    f"{op}: W&B {theirs['ok']} ({'; '.join(theirs['errors'])}), raysweep {ok} ({'; '.join(problems)})",
                )
            said.append(f"{op}: differs as docs/differences-from-wandb.md says ({', '.join(found)})")
        else:
            said.append(f"{op}: both {'run' if ok else 'refuse'}")
    if ours_accepts(ours_doc)[0] and ours_doc.get("method") == "grid":
        spec = parse_spec(ours_doc)
        same_input = json.loads(json.dumps({k: v for k, v in ours_doc.items() if k != "raysweep"}))
        answer = oracle.ask("grid", config=same_input, limit=500)
        points = grid_points(spec, len(answer["points"]))
        same = [json.dumps(p, sort_keys=True) for p in points] == [
            json.dumps(p, sort_keys=True) for p in answer["points"]
        ]
        shaped = [json.dumps(wandb_config(spec, p), sort_keys=True) for p in points]
        if not same or shaped != [json.dumps(c, sort_keys=True) for c in answer["configs"]]:
            return False, "grid points differ"
        said.append(f"grid of {len(points)} points agrees")
    return True, "; ".join(said)


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
