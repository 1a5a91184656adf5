"""The matrix's combinations that W&B refuses (``tests/support/matrix/cells.py: REFUSED``): each one,
as a cell's file, refused by ``raysweep validate`` (exit 2, one paragraph, no traceback) with the
reason W&B's own code gives (its sweep scheduler at start for engines optuna and ax; its engine,
asked for a first run, for bayes)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT, cli_env
from wandb_scheduler import at_start, engine_of

from tests.support.matrix.cells import CELLS, FEATURES, REFUSED, Cell, pairs, runs

DEFAULT = {name: values[0] for name, values in FEATURES.items()} | {"method": "random", "objectives": "one"}


@pytest.mark.parametrize("pair", REFUSED, ids=[f"{a}={va}, {b}={vb}" for a, va, b, vb in REFUSED])
def test_what_wandb_refuses_is_refused_with_its_reason(tmp_path, wandb_oracle, pair):
    a, va, b, vb = pair
    doc = Cell(**(DEFAULT | {a: va, b: vb})).doc()
    spec = tmp_path / "refused.yaml"
    spec.write_text(yaml.safe_dump(doc))
    ours = subprocess.run(
        [sys.executable, "-m", "raysweep", "validate", str(spec)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=cli_env(),
    )
    assert ours.returncode == 2 and "Traceback" not in ours.stderr, ours.stderr
    plain = json.loads(json.dumps({k: v for k, v in doc.items() if k != "raysweep"}))
    said = " ".join(ours.stderr.split())
    if engine_of(plain) in ("optuna", "ax"):
        theirs = at_start(plain, ROOT)
        reason = theirs["errors"][0].split(":")[0]  # W&B's sentence up to the value it quotes
        assert not theirs["ok"] and reason and reason in said, (theirs["errors"], said)
    else:
        theirs = wandb_oracle.ask("cloud", config=plain)
        assert not theirs["ok"] and "metric" in theirs["errors"][0]
        assert "metric: required for method bayes" in said and "Bayesian search requires" in said, said


def test_the_cells_hold_every_pair_the_rules_allow_and_nothing_they_forbid():
    """A covering array: every pair of two features' values that some allowed combination holds is
    in a cell; no cell breaks a rule."""
    allowed = [list(row) for row in itertools.product(*FEATURES.values()) if runs(list(row))]
    cells = [[getattr(c, name) for name in FEATURES] for c in CELLS]
    assert all(runs(c) for c in cells)
    assert pairs(allowed) - pairs(cells) == set()
