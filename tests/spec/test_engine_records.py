"""The engines as records (``spec/engines.py``): every engine the checks accept has one, every
engine whose optimizer searches has its builder in ``search/wandb_optimizer.BUILDERS``, and what
each warns of and the summary names comes from its record."""

from __future__ import annotations

import pytest

from raysweep.search.wandb_optimizer import BUILDERS
from raysweep.spec import parse_spec
from raysweep.spec.engine import ENGINES
from raysweep.spec.engines import ENGINE_KINDS
from raysweep.spec.summary import summary_text


def test_every_engine_has_a_record_and_every_searching_one_a_builder():
    assert set(ENGINES) == set(ENGINE_KINDS)
    assert {name for name, kind in ENGINE_KINDS.items() if kind.searches} == set(BUILDERS)


# W&B 0.31's scheduler: "optimizer config is not supported by the wandb engine", "search_space config is
# not supported by the Ax engine"
USES = {"optuna": {"optimizer", "search_space"}, "ax": {"optimizer"}, "wandb": set()}


@pytest.mark.parametrize("kind", list(ENGINE_KINDS))
def test_a_key_the_engine_does_not_use_is_dropped_with_its_warning(tmp_path, kind):
    (tmp_path / "s.py").write_text("def opt(info):\n    pass\n\ndef space(trial):\n    return {}\n")
    block = {"engine": kind, "source": "s.py", "optimizer": "opt", "search_space": "space"}
    method = "custom" if ENGINE_KINDS[kind].searches else "random"
    doc = {"method": method, "metric": {"name": "m"}, "parameters": {"x": {"values": [1, 2]}}, "program": "t.py"}
    doc["scheduler"] = block
    spec = parse_spec(doc, base_dir=tmp_path)
    for key in ("optimizer", "search_space"):
        assert (getattr(spec.engine, key) is not None) is (key in USES[kind])
        assert any(f"scheduler.{key}" in n for n in spec.notes) is (key not in USES[kind])
    assert spec.defines_by_run is (kind == "optuna")  # an Optuna trial's suggest_* calls


@pytest.mark.parametrize("kind", [k for k, r in ENGINE_KINDS.items() if r.searches])
def test_the_summary_names_the_engines_default_optimizer(kind):
    doc = {"method": "custom", "metric": {"name": "m"}, "parameters": {"x": {"values": [1, 2]}}, "program": "t.py"}
    spec = parse_spec(doc | {"scheduler": {"engine": kind}})
    assert f"engine {kind}: {ENGINE_KINDS[kind].default_optimizer})" in summary_text(spec)
