"""``raysweep.grow`` read from a sweep file: what a growing sweep needs, each refusal one sentence
naming the key (``spec/grow_block.py``)."""

from __future__ import annotations

import pytest
from conftest import raysweep, write_spec

from raysweep.spec import SweepSpec
from raysweep.spec.parse import SpecError, parse_spec

ASHA = {"type": "asha", "grace_period": 1, "max_t": 4, "reduction_factor": 2}


def doc(grow=None, parameters=None, **own) -> dict:
    return {
        "method": "random",
        "metric": {"name": "acc", "goal": "maximize"},
        "parameters": parameters or {"lr": {"values": [0.1, 0.01]}, "batch_size": {"values": [64, 128]}},
        "raysweep": {
            "train_loop": "train_loops.smoke:train",
            "scheduler": ASHA,
            "grow": grow or {"sizes": [1, 2, 4], "batch": "batch_size"},
        }
        | own,
    }


def test_a_growing_sweep_starts_at_the_first_size_and_can_take_each_and_is_recorded():
    spec = parse_spec(doc())
    assert spec.world_size({"lr": 0.1}) == 1 and spec.world_sizes == {1, 2, 4}
    assert spec.world_size({"num_gpus": 4}) == 4  # a trial that grew: its size is in its config
    assert SweepSpec.from_json(spec.to_json()).grow == spec.grow
    assert spec.grow.fill  # the tail is filled unless the file says fill: false


def test_the_global_batch_may_come_from_base_config_at_a_nested_key():
    spec = parse_spec(
        doc(parameters={"lr": {"values": [0.1]}}, grow={"sizes": [1, 2], "batch": "data.batch"})
        | {
            "raysweep": doc()["raysweep"]
            | {"grow": {"sizes": [1, 2], "batch": "data.batch"}, "base_config": {"data": {"batch": 256}}}
        }
    )
    assert spec.grow.batch == "data.batch"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"grow": {"sizes": [2], "batch": "batch_size"}}, r"raysweep.grow.sizes: must be a list of two or more"),
        ({"grow": {"sizes": [1, 4, 2], "batch": "batch_size"}}, r"must grow, each size larger"),
        ({"grow": {"sizes": [1, 2]}}, r"raysweep.grow.batch: missing"),
        (
            {"grow": {"sizes": [1, 2], "batch": "batch_size", "lr": 1}},
            r"raysweep.grow.lr: unknown key; valid keys: sizes, batch, fill",
        ),
        (
            {"grow": {"sizes": [1, 2], "batch": "batch_size", "fill": "no"}},
            r"raysweep.grow.fill: must be true or false",
        ),
        ({"grow": {"sizes": [1, 3], "batch": "batch_size"}}, r"= 64 does not divide among 3 ranks"),
        (
            {"grow": {"sizes": [1, 2], "batch": "nowhere"}},
            r"'nowhere' has no value in parameters or raysweep.base_config",
        ),
        ({"scheduler": None}, r"a trial grows at the rungs where it is promoted, and this sweep has no early stopping"),
        ({"num_gpus": 2}, r"raysweep.grow: the sizes are each trial's; remove raysweep.num_gpus"),
        ({"train_loop": None, "program": "train.py"}, r"a program: script has no checkpoint"),
    ],
)
def test_what_growing_needs_is_refused_by_name(change, says):
    document = doc()
    own = document["raysweep"] | change
    if "program" in own:
        document["program"] = own.pop("program")
    document["raysweep"] = {k: v for k, v in own.items() if v is not None}
    with pytest.raises(SpecError, match=says):
        parse_spec(document)


def test_a_searched_global_batch_must_be_values_and_num_gpus_is_not_searched():
    searched = doc(parameters={"batch_size": {"min": 16, "max": 256}})
    with pytest.raises(SpecError, match=r"'batch_size' is searched as int_uniform; give it values"):
        parse_spec(searched)
    sized = doc(parameters={"batch_size": {"value": 64}, "num_gpus": {"values": [1, 2]}})
    with pytest.raises(SpecError, match=r"remove parameters.num_gpus"):
        parse_spec(sized)


def test_validate_refuses_a_bad_grow_block_with_exit_2_and_no_traceback(tmp_path):
    path = write_spec(tmp_path / "g.yaml", **doc(grow={"sizes": [1, 3], "batch": "batch_size"}))
    out = raysweep("validate", str(path))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "raysweep.grow.batch: 'batch_size' = 64 does not divide among 3 ranks" in out.stdout + out.stderr


def test_the_plan_charges_each_report_at_the_size_its_trial_has_then():
    """Rungs 1, 2, 4: report 1 at 1 worker, report 2 at 2 (promoted at 1), reports 3 and 4 at 4."""
    from raysweep.search.plan import plan

    planned = plan(parse_spec(doc()), 20, 10.0)
    reach = dict(planned.rungs)
    total = 1 + reach[2] + 2 * reach[4]
    assert planned.grows and planned.sizes == pytest.approx(
        {1: 1 / total, 2: reach[2] / total, 4: 2 * reach[4] / total}
    )
    assert planned.worker_reports == pytest.approx(20 * (1 + 2 * reach[2] + 8 * reach[4]))
