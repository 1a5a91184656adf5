"""The cells of the pairwise matrix (tests/end_to_end/test_matrix*.py): a covering array of every
pair of the features' values, the combinations that cannot exist left out by rule (``RULES``),
and each cell's sweep file.

The array is covertable's (PyPI ``covertable``: a greedy covering array that keeps its
constraints, forward-checked, so every pair the rules allow is covered; allpairspy's filter left
2 to 7 pairs out here). Its ``salt`` orders the search: of 60 salts, ``SALT`` gives the cheapest
array by ``cost`` (``cheapest`` finds it again): 22 cells, a third cheaper than the median.
tests/end_to_end/test_matrix_refused.py checks that every allowed pair is in a cell.

The combinations W&B refuses are not cells: test_matrix_refused.py holds them, each refused with
W&B's sentence.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from pathlib import Path

from covertable import make

HERE = Path(__file__).resolve().parent
FEATURES = {
    "entry": ["loop", "function", "wandb_function", "program"],
    "method": ["grid", "random", "bayes", "optuna", "ax"],
    "space": ["classic", "nested", "conditional"],
    "objectives": ["none", "one", "several"],
    "ending": ["finished", "ctrl_c", "kill", "warm_start"],
    "runner": ["warm", "torchtrainer"],
    "early_terminate": ["none", "hyperband"],
    "num_gpus": [1, 2],
    "wandb": ["offline", "disabled"],
}
# W&B refuses these (tests/search/test_wandb_scheduler_oracle.py has its verdicts): no cell of them
REFUSED = (
    ("space", "nested", "method", "optuna"),  # W&B's optuna engine converts no nested parameters
    ("space", "nested", "method", "ax"),
    ("objectives", "none", "method", "bayes"),  # W&B's bayes needs metric:
    ("objectives", "several", "method", "bayes"),
    ("objectives", "none", "method", "ax"),  # W&B's Ax engine needs a metric
)


@dataclass(frozen=True)
class Cell:
    entry: str
    method: str
    space: str
    objectives: str
    ending: str
    runner: str
    early_terminate: str
    num_gpus: int
    wandb: str

    @property
    def id(self) -> str:
        return "-".join(str(v) for v in asdict(self).values())

    def doc(self) -> dict:
        """The cell's sweep, in W&B's format with raysweep's block."""
        doc: dict = {"name": "m", "run_cap": 2}
        if self.method in ("optuna", "ax"):
            doc |= {"method": "custom", "scheduler": {"engine": self.method}}
        else:
            doc["method"] = self.method
        if self.space == "conditional":
            doc["scheduler"] |= {"source": str(HERE / "space.py"), "search_space": f"sizes_{self.num_gpus}"}
        else:
            x = {"values": [0.2, 0.4, 0.6]} if self.method == "grid" else {"min": 0.0, "max": 1.0}
            fixed = {"epochs": {"value": 2}, "sleep": {"value": 0.5}, "num_gpus": {"value": self.num_gpus}}
            doc["parameters"] = fixed | ({"opt": {"parameters": {"x": x}}} if self.space == "nested" else {"x": x})
        if self.objectives == "one":
            doc["metric"] = {"name": "loss", "goal": "minimize"}
        elif self.objectives == "several":
            doc["metrics"] = [{"name": "loss", "goal": "minimize"}, {"name": "cost_hours", "goal": "minimize"}]
        if self.early_terminate == "hyperband":
            doc["early_terminate"] = {"type": "hyperband", "min_iter": 1, "eta": 2}
        own: dict = {"ddp_workers": self.runner, "max_concurrent": 1, "seed": 0}
        if self.entry == "loop":
            own["train_loop"] = "tests.support.matrix.entries:train"
        elif self.entry == "program":
            doc["program"] = str(HERE / "program.py")
        return doc | {"raysweep": own}


def cost(row: list) -> float:
    """A cell's seconds, roughly, on 2 cores: a driver's start, its two trials (a 2-worker
    TorchTrainer's start, a script's or W&B-style function's wandb on each rank), twice over for an
    interrupted sweep resumed or a sweep warm-started from an earlier one."""
    c = dict(zip(FEATURES, row, strict=True))
    trial = 2.0 + (9.0 if c["runner"] == "torchtrainer" and c["num_gpus"] == 2 else 0.0)
    trial += 3.0 * c["num_gpus"] if c["entry"] in ("program", "wandb_function") else 0.0
    return 6.0 + 2 * trial + (6.0 + trial if c["ending"] != "finished" else 0.0)


def _never(a: str, va: object, b: str, vb: object) -> dict:
    return {
        "operator": "or",
        "conditions": [{"operator": "ne", "left": a, "value": va}, {"operator": "ne", "left": b, "value": vb}],
    }


# The rules, as covertable's constraints: W&B's refusals; a define-by-run space is engine optuna's;
# a 1-worker trial under torchtrainer runs in the Tune trial's own process (``trainable.runners``),
# so the runner's pairs are its 2-worker TorchTrainer runs'.
RULES = [_never(*r) for r in REFUSED] + [
    _never("runner", "torchtrainer", "num_gpus", 1),
    {
        "operator": "or",
        "conditions": [
            {"operator": "ne", "left": "space", "value": "conditional"},
            {"operator": "eq", "left": "method", "value": "optuna"},
        ],
    },
]


def runs(row: list) -> bool:
    """A combination that can exist, and that W&B runs (``RULES`` as a test of a whole row)."""
    c = dict(zip(FEATURES, row, strict=False))
    if c.get("space") == "conditional" and c.get("method") != "optuna":
        return False
    if c.get("runner") == "torchtrainer" and c.get("num_gpus") == 1:
        return False
    return not any(c.get(a) == va and c.get(b) == vb for a, va, b, vb in REFUSED)


def array(salt: int) -> list[list]:
    """covertable's array for ``salt``: a row per cell, the features' values in their order."""
    return [[row[name] for name in FEATURES] for row in make(FEATURES, constraints=RULES, salt=str(salt))]


def cheapest(salts: int = 60) -> int:
    """The salt of the cheapest array of ``salts`` (3 s for 60)."""
    return min(range(salts), key=lambda salt: sum(cost(row) for row in array(salt)))


def pairs(rows: list[list]) -> set[tuple]:
    """The pairs of feature values ``rows`` hold."""
    out = set()
    for row in rows:
        named = list(zip(FEATURES, row, strict=True))
        out |= set(itertools.combinations(named, 2))
    return out


SALT = 48
CELLS = [Cell(*row) for row in array(SALT)]
