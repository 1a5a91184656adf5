"""``python -m bench.curves``: every configuration of the stages sweep, each epoch's accuracy.

Part 3's sweep (search_spaces/stages.yaml at part 3's sizes: 3000 training and 500 validation
sums, the loop's own seed) with no early stopping, so that every configuration reports every
epoch: what ``bench.simulate`` replays, a configuration's recorded value at each rung, whatever
order its admission and scheduler run trials in. One run of the grid; ``--quick``: 4 of the
configurations, 2 epochs.

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.curves [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from bench.common import REPO, write_result
from raysweep.runs.files import TRIALS_FILE, read_trials

EPOCHS = {"full": 6, "quick": 2}
METRIC = "exact_accuracy"


def curves_doc(quick: bool) -> dict[str, Any]:
    """The stages sweep, every trial to its last epoch, two at a time, W&B off."""
    doc = yaml.safe_load((REPO / "search_spaces" / "stages.yaml").read_text())
    doc.pop("early_terminate")
    own = doc["raysweep"]
    own["base_config"].update(
        {"epochs": EPOCHS["quick" if quick else "full"], "train_size": 3000, "val_size": 500, "checkpoint_every": 0}
    )
    own["max_concurrent"] = 2
    own.pop("wandb", None)
    if quick:
        doc["run_cap"] = 4
    return doc


def read_curves(run_dir: Path) -> list[dict[str, Any]]:
    """Each trial's configuration, and per epoch its accuracy and its seconds (Tune's result.json)."""
    out = []
    for row in read_trials(run_dir / TRIALS_FILE):
        results = Path(row["trial_dir"]) / "result.json"
        reports = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
        out.append(
            {
                "config": {k: v for k, v in row["config"].items() if k != "num_gpus"},
                METRIC: [r[METRIC] for r in reports],
                "epoch_s": [round(r["time_this_iter_s"], 3) for r in reports],
            }
        )
    return sorted(out, key=lambda c: json.dumps(c["config"], sort_keys=True))


def main() -> None:
    p = argparse.ArgumentParser(description="the stages sweep's per-epoch accuracies, every configuration")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="raysweep_curves_") as d:
        spec = Path(d) / "curves.yaml"
        spec.write_text(yaml.safe_dump(curves_doc(args.quick)))
        storage = Path(d) / "runs"
        cmd = [sys.executable, "-m", "raysweep", "run", str(spec), "--storage", str(storage), "--wandb", "disabled"]
        subprocess.run(cmd + ["--name", "curves", "--quiet"], check=True, cwd=REPO)
        curves = read_curves(storage / "curves")
    out = {"metric": METRIC, "epochs": EPOCHS["quick" if args.quick else "full"], "configurations": curves}
    print(write_result("stages_curves", out, args.quick))


if __name__ == "__main__":
    main()
