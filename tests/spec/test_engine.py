"""W&B's new format as wandb 0.31 released it (``spec/engine.py``): each rule, with the file W&B
warns about and runs (raysweep runs it with the warning; ``--strict`` refuses it) or refuses. W&B's
own verdicts on the same files are checked in tests/search/test_wandb_scheduler_oracle.py."""

from __future__ import annotations

import pytest
from conftest import ROOT

from raysweep.errors import SpecError
from raysweep.spec import parse_spec
from raysweep.spec.model import SweepSpec

SPACE = ROOT / "tests" / "support" / "specs" / "conditional"
LOOP = {"train_loop": "train_loops.smoke:train"}
TWO = [{"name": "loss"}, {"name": "cost_hours", "goal": "minimize"}]
X = {"x": {"min": 0.0, "max": 1.0}}
OPTUNA = {"engine": "optuna"}


def spec(strict: bool = False, **doc):
    return parse_spec({"raysweep": LOOP} | doc, base_dir=SPACE, strict=strict)


def refused(match: str, **doc) -> None:
    with pytest.raises(SpecError, match=match):
        spec(**doc)


def warned(match: str, **doc) -> SweepSpec:
    """Run with W&B's warning, and refused under --strict, as W&B's local controller refuses it."""
    ran = spec(**doc)
    assert any(match in note for note in ran.notes), ran.notes
    refused(match, strict=True, **doc)
    return ran


def test_metrics_without_method_custom_runs_the_method_on_them_where_wandbs_service_can():
    ran = warned("metrics: W&B's schema wants method: custom", method="random", metrics=TWO, parameters=X)
    assert ran.method == "random" and ran.objectives.names == ("loss", "cost_hours")
    # bayes without `metric:` is W&B's engine's own refusal ("Bayesian search requires metric")
    refused(r"metric: required for method bayes", method="bayes", metrics=TWO, parameters=X)


def test_metric_beside_metrics_runs_on_what_searches_reads():
    both = {"metric": {"name": "acc", "goal": "maximize"}, "metrics": TWO, "parameters": X}
    engine = warned("metric and metrics: cannot both be set", method="custom", scheduler=OPTUNA, **both)
    assert engine.objectives.names == ("loss", "cost_hours")  # W&B's optimizer reads metrics
    classic = warned("metric and metrics: cannot both be set", method="bayes", **both)
    assert classic.objectives.names == ("acc",) and classic.objectives.single.goal == "maximize"


def test_metrics_of_one_is_wandbs_warning_and_that_one_objective_is_the_sweeps():
    one = warned("at least 2 metrics", method="custom", metrics=[{"name": "loss"}], parameters=X, scheduler=OPTUNA)
    assert one.objectives.single.name == "loss"


def test_each_metric_of_metrics_is_checked_where_it_sits():
    refused(
        r"metrics.1.goal: must be minimize or maximize, got 'maximise' \(did you mean 'maximize'\?\)",
        strict=True,
        method="custom",
        metrics=[{"name": "a"}, {"name": "b", "goal": "maximise"}],
        parameters=X,
        scheduler=OPTUNA,
    )


def test_an_engine_that_searches_runs_whatever_the_method_says():
    for method in ("random", "bayes", None):
        doc = {"parameters": X, "metric": {"name": "loss"}, "scheduler": OPTUNA} | (
            {"method": method} if method else {}
        )
        ran = warned("scheduler.engine optuna: W&B's schema wants method: custom", **doc)
        assert ran.method == "custom" and ran.engine.kind == "optuna"


def test_method_custom_needs_an_engine_that_searches():
    refused(r"method: custom needs scheduler: \{engine: optuna\}", method="custom", metric={"name": "l"}, parameters=X)
    refused("engine wandb keeps grid, random and bayes", method="custom", parameters=X, scheduler={"engine": "wandb"})


def test_engine_wandb_keeps_wandbs_methods_and_ignores_optuna_keys_with_wandbs_warning():
    kept = spec(
        method="bayes",
        metric={"name": "loss"},
        parameters=X,
        scheduler={"engine": "wandb", "source": "space.py", "optimizer": "study"},
    )
    assert kept.engine.kind == "wandb" and kept.method == "bayes" and kept.engine.optimizer is None
    assert any("scheduler.optimizer: engine wandb does not use it" in n for n in kept.notes)


def test_ax_searches_parameters_and_ignores_a_search_space_with_wandbs_warning():
    ax = spec(
        method="custom",
        metric={"name": "loss"},
        parameters=X,
        scheduler={"engine": "ax", "source": "space.py", "search_space": "space"},
    )
    assert not ax.defines_by_run and any("engine ax searches parameters:" in n for n in ax.notes)


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
    refused(f"scheduler.{key}: needs scheduler.source", method="custom", parameters=X, scheduler=OPTUNA | {key: "f"})
    given = spec(method="custom", parameters=X, scheduler=OPTUNA | {"source": "space.py", key: "space"})
    assert given.engine.source == str(SPACE / "space.py")  # relative to the sweep file


def test_source_must_be_a_python_file_beside_the_sweep():
    refused(
        r"scheduler.source: 'nowhere.py' is not a file",
        method="custom",
        parameters=X,
        scheduler=OPTUNA | {"source": "nowhere.py", "search_space": "space"},
    )


def test_scheduler_and_early_terminate_exclude_each_other_and_the_scheduler_wins():
    doc = {
        "method": "custom",
        "metric": {"name": "loss"},
        "parameters": X,
        "scheduler": OPTUNA,
        "early_terminate": {"type": "hyperband", "min_iter": 1},
    }
    assert warned("early_terminate: cannot be used beside scheduler", **doc).scheduler is None


def test_a_local_controller_beside_a_scheduler_is_refused_as_wandbs_local_controller_refuses_it():
    refused(
        "controller: type local cannot be used together with scheduler",
        method="custom",
        parameters=X,
        scheduler=OPTUNA,
        controller={"type": "local"},
    )


def test_without_parameters_an_engine_searches_an_empty_space_and_wandbs_engine_cannot():
    empty = warned("parameters: W&B's schema requires it", method="custom", metric={"name": "l"}, scheduler=OPTUNA)
    assert empty.parameters == ()
    refused("parameters: required, unless scheduler.search_space defines the space", method="random")
    by_run = spec(method="custom", scheduler=OPTUNA | {"source": "space.py", "search_space": "space"})
    assert by_run.defines_by_run and by_run.parameters == ()


def test_early_stopping_needs_one_metric():
    refused(
        r"raysweep.scheduler: early stopping compares trials on one metric, and this sweep has several objectives",
        method="custom",
        metrics=TWO,
        parameters=X,
        scheduler=OPTUNA,
        raysweep=LOOP | {"scheduler": {"type": "asha", "max_t": 9}},
    )
    refused(
        r"raysweep.scheduler: .* this sweep has none",
        method="random",
        parameters=X,
        raysweep=LOOP | {"scheduler": {"type": "asha", "max_t": 9}},
    )
    # W&B's hyperband without a metric: its service runs the sweep and stops no run
    ran = spec(method="random", parameters=X, early_terminate={"type": "hyperband", "min_iter": 1})
    assert ran.scheduler is None and any("W&B's hyperband compares runs on metric.name" in n for n in ran.notes)


def test_an_engine_without_a_metric_runs_blind_with_a_warning():
    ran = spec(method="custom", parameters=X, scheduler=OPTUNA)
    assert ran.objectives == () and any("the sweep has no metric" in n for n in ran.notes)


def test_a_run_dir_keeps_the_new_format_and_one_from_before_objectives_is_read():
    s = spec(method="custom", metrics=TWO, scheduler=OPTUNA | {"source": "space.py", "search_space": "space"})
    again = SweepSpec.from_json(s.to_json())
    assert again == s and again.engine.search_space == "space" and again.objectives.several
    old = spec(method="random", metric={"name": "loss", "goal": "maximize"}, parameters=X).to_json()
    old |= {"metric": {"name": "loss", "goal": "maximize", "target": None}}  # as run dirs before objectives hold it
    del old["objectives"]
    assert SweepSpec.from_json(old).objectives.single.goal == "maximize"
    no_metric = spec(method="grid", parameters={"a": {"values": [1, 2]}}).to_json() | {"metric": None}
    del no_metric["objectives"]
    assert SweepSpec.from_json(no_metric).objectives == ()


def test_engine_ax_without_ax_installed_names_the_extra(tmp_path):
    """``validate`` on an engine-ax file where Ax is missing: one sentence naming ``raysweep[ax]``
    (it said "No module named 'ax'"). Ax is hidden from a fresh interpreter."""
    import subprocess
    import sys

    import yaml

    path = tmp_path / "ax.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "method": "custom",
                "scheduler": {"engine": "ax"},
                "metric": {"name": "loss", "goal": "minimize"},
                "parameters": {"lr": {"min": 0.001, "max": 0.1}},
                "raysweep": {"train_loop": "train_loops.smoke:train"},
            }
        )
    )
    code = (
        "import sys\nsys.modules['ax'] = None\n"  # an import of ax now fails as where it is not installed
        "from raysweep.cli import main\nsys.exit(main(['validate', sys.argv[1]]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "pip install 'raysweep[ax]'" in out.stderr and "Traceback" not in out.stderr, out.stderr
