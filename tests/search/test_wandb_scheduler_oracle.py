"""W&B's released sweep scheduler (wandb 0.31) as the oracle of the new format: for each rule, the
same file's verdict from W&B's own code (``tests/support/wandb_scheduler.py``: its optimizer built
and asked at start; PyPI ``sweeps`` for its schema's warnings and its own engine) and raysweep's.

* W&B runs it (``wandb sweep`` creates the sweep; its scheduler, or its own engine, proposes a first
  run) exactly when ``raysweep validate`` accepts it;
* W&B warns (its schema's violations, its scheduler's warnings) when raysweep warns, except that
  raysweep also warns of an engine sweep with no metric, which W&B's scheduler runs blind, silently;
* W&B's local controller (``--strict``) accepts it when it has no violation and W&B runs it.

The table these tests print (``-s``) is the one in docs/differences-from-wandb.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from wandb_scheduler import at_start, engine_of

from raysweep.errors import SpecError, UserError
from raysweep.search.wandb_optimizer import checked, first_configs
from raysweep.spec import parse_spec
from raysweep.spec.reading import read_yaml

SCHEDULER = ROOT / "tests" / "support" / "specs" / "scheduler"
SOURCE = "objectives.py"
X = {"x": {"min": 0.0, "max": 1.0}}
LOSS = {"name": "loss", "goal": "minimize"}
TWO = [LOSS, {"name": "accuracy", "goal": "maximize"}]


SEARCHES_BLIND = (
    "warning: the sweep has no metric: W&B's optimizer is told no result of any trial (W&B's scheduler fails each "
    "tell), so it searches blind; trials are shown in creation order"
)


def doc(**keys) -> dict:
    return {"program": "train.py"} | keys


# Each rule of the release, as a file W&B warns about and runs, or refuses.
RULES = {
    "metric and metrics": doc(method="custom", metric=LOSS, metrics=TWO, parameters=X, scheduler={"engine": "optuna"}),
    "metrics, method random": doc(method="random", metrics=TWO, parameters=X),
    "metrics, method bayes": doc(method="bayes", metrics=TWO, parameters=X),
    "engine optuna, method bayes": doc(method="bayes", metric=LOSS, parameters=X, scheduler={"engine": "optuna"}),
    "engine optuna, no method": doc(metric=LOSS, parameters=X, scheduler={"engine": "optuna"}),
    "engine ax, method random": doc(method="random", metric=LOSS, parameters=X, scheduler={"engine": "ax"}),
    "no parameters, engine optuna": doc(method="custom", metric=LOSS, scheduler={"engine": "optuna"}),
    "no parameters, method random": doc(method="random", metric=LOSS),
    "engine wandb, optimizer and search_space": doc(
        method="random",
        metric=LOSS,
        parameters=X,
        scheduler={"engine": "wandb", "source": SOURCE, "optimizer": "study", "search_space": "conditional"},
    ),
    "engine wandb, method custom": doc(method="custom", metric=LOSS, parameters=X, scheduler={"engine": "wandb"}),
    "engine ax, search_space": doc(
        method="custom", metric=LOSS, parameters=X, scheduler={"engine": "ax", "source": SOURCE, "search_space": "x"}
    ),
    "method custom, no scheduler": doc(method="custom", metric=LOSS, parameters=X),
    "early_terminate beside scheduler": doc(
        method="custom",
        metric=LOSS,
        parameters=X,
        scheduler={"engine": "optuna"},
        early_terminate={"type": "hyperband", "min_iter": 1},
    ),
    "controller local beside scheduler": doc(
        method="custom", metric=LOSS, parameters=X, scheduler={"engine": "optuna"}, controller={"type": "local"}
    ),
    "metrics of one": doc(method="custom", metrics=[LOSS], parameters=X, scheduler={"engine": "optuna"}),
    "no metric, engine optuna": doc(method="custom", parameters=X, scheduler={"engine": "optuna"}),
    "no metric, engine ax": doc(method="custom", parameters=X, scheduler={"engine": "ax"}),
    "optuna, nested parameters": doc(
        method="custom", metric=LOSS, parameters={"opt": {"parameters": X}}, scheduler={"engine": "optuna"}
    ),
    "optuna, a normal distribution": doc(
        method="custom",
        metric=LOSS,
        parameters={"x": {"distribution": "normal", "mu": 0.0, "sigma": 1.0}},
        scheduler={"engine": "optuna"},
    ),
    "ax, q_log_uniform_values with q 2": doc(
        method="custom",
        metric=LOSS,
        parameters={"x": {"distribution": "q_log_uniform_values", "min": 1, "max": 64, "q": 2}},
        scheduler={"engine": "ax"},
    ),
    "ax, values of two types": doc(
        method="custom", metric=LOSS, parameters={"x": {"values": [1, "a"]}}, scheduler={"engine": "ax"}
    ),
}
# The user's functions in tests/support/specs/conditional/space.py, each as W&B's scheduler takes or refuses it.
CONDITIONAL = ROOT / "tests" / "support" / "specs" / "conditional"
FUNCTIONS = {
    "search_space returns a dict": ("search_space", "space", LOSS),
    "search_space returns None": ("search_space", "suggests_only", LOSS),
    "optimizer returns a Study": ("optimizer", "study", TWO[:1] + [{"name": "b"}]),
    "optimizer returns a Study and a terminator": ("optimizer", "study_and_terminator", LOSS),
    "optimizer returns a sampler": ("optimizer", "a_sampler", LOSS),
    "optimizer takes no SweepInfo": ("optimizer", "no_arguments", LOSS),
    "directions disagree with the goals": ("optimizer", "maximizing", LOSS),
}


def function_doc(key: str, name: str, metric) -> dict:
    goals = {"metrics": metric} if isinstance(metric, list) else {"metric": metric}
    return doc(method="custom", parameters=X, scheduler={"engine": "optuna", "source": "space.py", key: name}, **goals)


def wandb_says(oracle, file: dict, base_dir: Path) -> dict:
    """W&B's verdict: its schema's violations (what ``wandb sweep`` warns about), whether it runs
    (its scheduler starts for engines optuna and ax; else its own engine proposes a first run),
    its scheduler's warnings, and whether its local controller takes it."""
    plain = json.loads(json.dumps(file))
    violations = oracle.ask("violations", config=plain)["violations"]
    if engine_of(file) in ("optuna", "ax"):
        start = at_start(file, base_dir)
    else:
        start = oracle.ask("cloud", config=plain) | {"warnings": []}
        if engine_of(file) == "wandb":  # W&B's wandb engine warns of the keys it does not use
            scheduler = file["scheduler"]
            start["warnings"] = [
                f"{k} config is not supported by the wandb engine."
                for k in scheduler
                if k in ("optimizer", "search_space")
            ]
    local = isinstance(file.get("controller"), dict) and file["controller"].get("type") == "local"
    runs = start["ok"] and not (local and violations)  # `wandb sweep` runs the local controller's check first
    return {
        "runs": runs,
        "warns": bool(violations or start["warnings"]),
        "strict": start["ok"] and not violations,
        "why": (violations + start["warnings"] + start["errors"])[:3],
    }


def raysweep_says(file: dict, base_dir: Path) -> dict:
    def verdict(strict: bool) -> tuple[bool, list[str]]:
        try:
            spec, said = checked(parse_spec(file, base_dir=base_dir, strict=strict))
        except (SpecError, UserError) as e:
            return False, getattr(e, "problems", None) or [str(e)]
        return True, [n for n in spec.notes if n.startswith("warning")] + list(said)

    runs, said = verdict(strict=False)
    strict, _ = verdict(strict=True)
    return {"runs": runs, "warns": runs and bool(said), "strict": strict, "why": said[:3]}


CASES = {name: (file, SCHEDULER) for name, file in RULES.items()} | {
    name: (function_doc(*args), CONDITIONAL) for name, args in FUNCTIONS.items()
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_rule_gets_wandbs_verdict(wandb_oracle, name):
    file, base_dir = CASES[name]
    theirs, ours = wandb_says(wandb_oracle, file, base_dir), raysweep_says(file, base_dir)
    print(f"| {name} | {_word(theirs)} | {_word(ours)} |")
    for key in ("runs", "strict"):
        assert ours[key] == theirs[key], (key, theirs["why"], ours["why"])
    if theirs["warns"] and theirs["runs"]:  # raysweep says W&B's warnings (and, of a sweep with no metric, one more)
        assert ours["warns"], (theirs["why"], ours["why"])
    if ours["warns"] and not theirs["warns"]:
        assert ours["why"] == [SEARCHES_BLIND], ours["why"]


def _word(said: dict) -> str:
    if not said["runs"]:
        return "refused"
    return ("runs, warns" if said["warns"] else "runs") + ("" if said["strict"] else "; strict refuses")


EXAMPLES = sorted(SCHEDULER.glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_example_runs_as_wandbs_scheduler_runs_it(wandb_oracle, path):
    """The new-format files (W&B's documented examples, written here: each engine, with and without
    the user's optimizer, several objectives, a conditional space): the same verdict, and for a
    seeded optimizer of the user's, the same first configurations as W&B's scheduler proposes."""
    as_wandb_reads = yaml.safe_load(path.read_text())
    theirs, ours = wandb_says(wandb_oracle, as_wandb_reads, SCHEDULER), raysweep_says(read_yaml(path), SCHEDULER)
    assert theirs["runs"] and ours == ours | {"runs": True, "warns": theirs["warns"]}, (theirs, ours)
    scheduler = as_wandb_reads.get("scheduler", {})
    if scheduler.get("engine") == "optuna" and scheduler.get("optimizer") == "study":  # seeded by the user
        spec = parse_spec(read_yaml(path), base_dir=SCHEDULER)
        assert first_configs(spec, 1) == [at_start(as_wandb_reads, SCHEDULER)["config"]]
