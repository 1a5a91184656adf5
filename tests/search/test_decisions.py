"""The pure decisions, fed by hand with no cluster: schedulers and stoppers, rank means (the way
syne-tune tests its schedulers). Admission and placement: test_placement.py; the pool's
lending: test_pool_lending.py."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from ray.tune.schedulers import TrialScheduler

from raysweep.driver.monitor import SweepMonitor
from raysweep.search.schedulers import RecordingASHA, RecordingHyperBand
from raysweep.search.stoppers import InitialFailureStopper, TargetStopper
from raysweep.spec import Metric, parse_spec
from raysweep.trial.metrics import mean_over_ranks

CONTINUE, STOP = TrialScheduler.CONTINUE, TrialScheduler.STOP


@dataclass(eq=False)
class Trial:
    """What a scheduler reads of a Tune trial."""

    trial_id: str
    status: str = "RUNNING"
    config: dict = field(default_factory=dict)
    evaluated_params: dict = field(default_factory=dict)


def feed(scheduler, trials: dict[str, Trial], stream: list[tuple[str, int, float]]) -> list[str]:
    """Each (trial, iteration, loss) as a Tune result; the scheduler's decisions, in order."""
    return [scheduler.on_trial_result(None, trials[t], {"training_iteration": i, "loss": v}) for t, i, v in stream]


# --- schedulers and stoppers -----------------------------------------------------------------


def test_asha_stops_the_worse_trial_at_its_rung_and_only_that_stop_is_recorded():
    asha = RecordingASHA(
        time_attr="training_iteration", metric="loss", mode="min", grace_period=1, max_t=4, reduction_factor=2
    )
    trials = {t: Trial(t) for t in "abc"}
    for t in trials.values():
        asha.on_trial_add(None, t)
    decisions = feed(asha, trials, [("a", 1, 1.0), ("b", 1, 5.0), ("a", 2, 0.5), ("a", 3, 0.4), ("a", 4, 0.3)])
    assert decisions == [CONTINUE, STOP, CONTINUE, CONTINUE, STOP]  # a's last STOP: it reached max_t
    assert asha.stopped == {"b"}  # a ran its course: show says "done", not "stopped"


def test_hyperband_ending_a_trial_at_max_t_is_not_an_early_stop():
    hb = RecordingHyperBand(time_attr="training_iteration", metric="loss", mode="min", max_t=9, reduction_factor=3)
    trials = {t: Trial(t) for t in "abc"}
    for t in trials.values():
        hb.on_trial_add(None, t)
    last = {}
    for i in range(1, 10):
        last |= {
            t: hb.on_trial_result(None, trials[t], {"training_iteration": i, "loss": base / i})
            for t, base in (("a", 1.0), ("b", 2.0), ("c", 3.0))
        }
    assert STOP in last.values()  # a bracket that is not full ends its trials at max_t
    assert hb.stopped == set()


def test_target_stopper_ends_the_sweep_once_a_trial_reaches_the_target_either_way():
    low = TargetStopper(Metric("loss", "minimize", 0.5))
    assert [low("t", {"loss": v}) for v in (0.9, math.nan, 0.7)] == [False] * 3 and not low.stop_all()
    low("t", {"loss": 0.5})
    assert low.stop_all()
    high = TargetStopper(Metric("acc", "maximize", 0.9))
    high("t", {"acc": math.inf})
    high("t", {"acc": True})
    assert not high.stop_all()  # inf and bools never count
    high("t", {"acc": 0.95})
    assert high.stop_all()


def test_initial_failure_stopper_needs_the_first_n_to_end_all_failed(tmp_path: Path):
    spec = parse_spec({"method": "random", "train_loop": "m:f", "parameters": {"x": {"values": [1]}}})
    monitor = SweepMonitor(spec, tmp_path, budget=10, quiet=True)
    stopper = InitialFailureStopper(lambda: monitor.initial_failures(3))
    monitor.ended += ["failed", "failed"]
    assert not stopper.stop_all()
    monitor.ended.append("failed")
    assert stopper.stop_all()
    monitor.ended[1] = "done"
    assert not stopper.stop_all()  # one of the first three finished: the loop works
    assert not InitialFailureStopper(lambda: monitor.initial_failures(0)).stop_all()  # 0 turns the rule off


def test_tunes_pickled_stopper_is_the_stoppers_of_the_driver_that_loads_it(tmp_path: Path):
    """Tune pickles its stopper with the experiment's state, and a resume puts it back over the one
    it was given: the first driver's, its budget fired already (a resume never stopped for its
    budget). Unpickled, the sweep's stoppers are the loading driver's."""
    from ray import cloudpickle

    from raysweep.driver.budget import BudgetStopper, Ledger
    from raysweep.driver.estimates import Estimates
    from raysweep.search.stoppers import SweepStoppers

    spec = parse_spec({"method": "random", "train_loop": "m:f", "parameters": {"x": {"values": [1]}}})
    first = BudgetStopper(Ledger(Estimates(spec, {}), 1.0, False))
    first.fired = True
    saved = cloudpickle.dumps(SweepStoppers(first))
    resumed = BudgetStopper(Ledger(Estimates(spec, {}), 2.0, False))
    mine = SweepStoppers(resumed)
    assert cloudpickle.loads(saved) is mine
    # a stopper pickled by a version before: it shares this driver's state, unfired
    legacy = cloudpickle.loads(cloudpickle.dumps(first))
    assert not legacy.fired and legacy.ledger is resumed.ledger
    resumed.fired = True
    assert legacy.fired


# --- rank means --------------------------------------------------------------------------------


def test_the_report_tune_sees_is_the_mean_over_ranks_of_numbers_only():
    merged = mean_over_ranks(
        [{"loss": 1.0, "n": 3, "ok": True, "tag": "r0"}, {"loss": 2.0, "n": 4, "ok": False, "tag": "r1"}]
    )
    assert merged == {"loss": 1.5, "n": 3.5, "ok": True, "tag": "r0"}  # bools and text: rank 0's
    with pytest.raises(ValueError, match="rank 0: loss; rank 1: acc"):
        mean_over_ranks([{"loss": 1.0}, {"acc": 1.0}])
