"""W&B's new sweep format (``spec/engine.py``): one test per rule of W&B's schema (wandb/sweeps
#135-#138), each with a file refused (or warned about, where W&B's service runs it) and a file
accepted."""

from __future__ import annotations

import pytest
from conftest import ROOT

from raysweep.errors import SpecError
from raysweep.spec import parse_spec

SPACE = ROOT / "tests" / "support" / "specs" / "conditional"
LOOP = {"train_loop": "train_loops.smoke:train"}
TWO = [{"name": "loss"}, {"name": "cost_hours", "goal": "minimize"}]
X = {"x": {"min": 0.0, "max": 1.0}}


def spec(strict: bool = False, **doc):
    return parse_spec({"raysweep": LOOP} | doc, base_dir=SPACE, strict=strict)


def refused(match: str, **doc) -> None:
    with pytest.raises(SpecError, match=match):
        spec(**doc)


def test_metrics_needs_method_custom():
    refused(
        r"metrics: several objectives need method: custom \(got method: bayes\)",
        method="bayes",
        metrics=TWO,
        parameters=X,
    )
    accepted = spec(method="custom", metrics=TWO, parameters=X, scheduler={"engine": "optuna"})
    assert [m.name for m in accepted.objectives] == ["loss", "cost_hours"] and accepted.metric is None


def test_metric_and_metrics_exclude_each_other():
    refused(
        "metric and metrics: cannot both be set",
        method="custom",
        metric={"name": "loss"},
        metrics=TWO,
        parameters=X,
        scheduler={"engine": "optuna"},
    )


def test_metrics_of_one_is_wandbs_warning_and_that_one_is_the_metric():
    doc = {"method": "custom", "metrics": [{"name": "loss"}], "parameters": X, "scheduler": {"engine": "optuna"}}
    one = spec(**doc)
    assert one.metric.name == "loss" and one.objectives == ()
    assert any("at least 2 metrics" in n for n in one.notes)
    refused("at least 2 metrics", strict=True, **doc)


def test_each_metric_of_metrics_is_checked_where_it_sits():
    refused(
        r"metrics.1.goal: must be minimize or maximize, got 'maximise' \(did you mean 'maximize'\?\)",
        strict=True,
        method="custom",
        metrics=[{"name": "a"}, {"name": "b", "goal": "maximise"}],
        parameters=X,
        scheduler={"engine": "optuna"},
    )


def test_method_custom_needs_an_engine_that_searches():
    refused(
        r"method: custom needs scheduler: \{engine: optuna\}", method="custom", metric={"name": "loss"}, parameters=X
    )
    refused(
        "engine wandb keeps grid, random and bayes",
        method="custom",
        metric={"name": "loss"},
        parameters=X,
        scheduler={"engine": "wandb"},
    )
    assert (
        spec(method="custom", metric={"name": "loss"}, parameters=X, scheduler={"engine": "optuna"}).engine.kind
        == "optuna"
    )


def test_engine_wandb_keeps_wandbs_methods():
    kept = spec(method="bayes", metric={"name": "loss"}, parameters=X, scheduler={"engine": "wandb"})
    assert kept.engine.kind == "wandb" and kept.method == "bayes"


def test_an_unknown_engine_is_named_with_a_guess():
    refused(
        r"scheduler.engine: must be one of optuna, ax, wandb, got 'optana' \(did you mean 'optuna'\?\)",
        method="custom",
        metric={"name": "loss"},
        parameters=X,
        scheduler={"engine": "optana"},
    )


@pytest.mark.parametrize("key", ["optimizer", "search_space"])
def test_optimizer_or_search_space_needs_source(key):
    refused(
        f"scheduler.{key}: needs scheduler.source",
        method="custom",
        metric={"name": "loss"},
        parameters=X,
        scheduler={"engine": "optuna", key: "space"},
    )
    given = spec(
        method="custom",
        metric={"name": "loss"},
        parameters=X,
        scheduler={"engine": "optuna", "source": "space.py", key: "space"},
    )
    assert given.engine.source == str(SPACE / "space.py")  # relative to the sweep file


def test_source_must_be_a_python_file_beside_the_sweep():
    refused(
        r"scheduler.source: 'nowhere.py' is not a file",
        method="custom",
        metric={"name": "loss"},
        parameters=X,
        scheduler={"engine": "optuna", "source": "nowhere.py", "search_space": "space"},
    )


def test_scheduler_and_early_terminate_exclude_each_other_and_the_scheduler_wins():
    doc = {
        "method": "custom",
        "metric": {"name": "loss"},
        "parameters": X,
        "scheduler": {"engine": "optuna"},
        "early_terminate": {"type": "hyperband", "min_iter": 1},
    }
    ran = spec(**doc)
    assert ran.scheduler is None and any("early_terminate: cannot be used beside scheduler" in n for n in ran.notes)
    refused("early_terminate: cannot be used beside scheduler", strict=True, **doc)


def test_parameters_are_required_unless_the_scheduler_defines_the_space():
    refused(
        "parameters: required, unless scheduler.search_space defines the space",
        method="custom",
        metric={"name": "loss"},
        scheduler={"engine": "optuna"},
    )
    by_run = spec(
        method="custom",
        metric={"name": "loss"},
        scheduler={"engine": "optuna", "source": "space.py", "search_space": "space"},
    )
    assert by_run.defines_by_run and by_run.parameters == ()


def test_several_objectives_refuse_early_stopping_with_a_sentence():
    refused(
        r"raysweep.scheduler: early stopping compares trials on one metric, and this sweep has several objectives",
        method="custom",
        metrics=TWO,
        parameters=X,
        scheduler={"engine": "optuna"},
        raysweep=LOOP | {"scheduler": {"type": "asha", "max_t": 9}},
    )


def test_a_run_dir_keeps_the_new_format():
    from raysweep.spec.model import SweepSpec

    s = spec(
        method="custom", metrics=TWO, scheduler={"engine": "optuna", "source": "space.py", "search_space": "space"}
    )
    again = SweepSpec.from_json(s.to_json())
    assert again == s and again.engine.search_space == "space"


def test_engine_optuna_searches_with_method_custom_else_wandbs_service_runs_the_method():
    doc = {"method": "random", "parameters": X, "scheduler": {"engine": "optuna"}}
    ran = spec(**doc)
    assert ran.engine is None and ran.method == "random"
    assert any("scheduler.engine optuna: searches with method: custom, got method: random" in n for n in ran.notes)
    refused("searches with method: custom", strict=True, **doc)
