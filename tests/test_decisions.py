"""The pure decisions, fed by hand with no cluster: schedulers and stoppers, a trial's bundle,
concurrency limits, rank means, GPU ids per rank (the way syne-tune tests its schedulers)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from ray.tune.schedulers import TrialScheduler

from raysweep.driver.monitor import SweepMonitor
from raysweep.placement import SLOT, Capacity, concurrency_limit, rank_gpus, slots_for, trial_bundle, workers_on
from raysweep.search.schedulers import RecordingASHA, RecordingHyperBand
from raysweep.search.stoppers import InitialFailureStopper, TargetStopper
from raysweep.spec import parse_spec
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
    low = TargetStopper("loss", "minimize", 0.5)
    assert [low("t", {"loss": v}) for v in (0.9, math.nan, 0.7)] == [False] * 3 and not low.stop_all()
    low("t", {"loss": 0.5})
    assert low.stop_all()
    high = TargetStopper("acc", "maximize", 0.9)
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


# --- admission and placement -----------------------------------------------------------------


def cpu(*slots: int, managed: bool = True) -> Capacity:
    return Capacity(
        slots,
        use_gpu=False,
        cpus_per_worker=1.0,
        managed_slots=managed,
        node_ids=tuple(f"n{i}" for i in range(len(slots))),
    )


def test_a_warm_trial_holds_its_workers_cpus_and_slots_in_one_bundle():
    assert trial_bundle(2, cpu(2, 4)) == [{"CPU": 2.0, SLOT: 2}]
    # TorchTrainer: 2+ workers hold only their slots (its own actors ask for the CPUs); 1 runs in the trial
    assert trial_bundle(2, cpu(2, 4), warm=False) == [{SLOT: 2}]
    assert trial_bundle(1, cpu(2, 4), warm=False) == [{"CPU": 1.0, SLOT: 1}]
    assert trial_bundle(5, cpu(2, 4)) == [{"memory": 1}]  # never fits: a token, so it starts and explains
    assert trial_bundle(2, cpu(2, managed=False)) == [{"CPU": 2.0}]


def test_gpu_bundles_hold_gpus_and_a_packed_trial_holds_its_share_of_a_slot():
    gpus = Capacity((4,), use_gpu=True, cpus_per_worker=2.0, managed_slots=True, node_ids=("n0",))
    assert trial_bundle(2, gpus) == [{"CPU": 4.0, "GPU": 2.0, SLOT: 2.0}]
    packed = Capacity(
        (16,), use_gpu=True, cpus_per_worker=0.5, managed_slots=True, node_ids=("n0",), gpus_per_worker=0.25
    )
    assert trial_bundle(1, packed) == [{"CPU": 0.5, "GPU": 0.25, SLOT: 0.25}]
    assert workers_on(0.75, 0.25) == 3 and workers_on(4, 0.1) == 40  # float sums keep whole workers
    assert slots_for({"CPU": 7, "GPU": 2}, use_gpu=False, cpus_per_worker=2) == 3
    assert slots_for({"CPU": 7, "GPU": 2}, use_gpu=True, cpus_per_worker=2, gpus_per_worker=0.5) == 4


def test_concurrency_limit_only_caps_clusters_without_slots():
    assert concurrency_limit(cpu(2, 2), 2, None) is None  # slots do the admission
    assert concurrency_limit(cpu(2, 2), 2, 3) == 3
    assert concurrency_limit(cpu(2, 3, managed=False), 2, None) == 2  # one 2-worker trial per node
    assert concurrency_limit(cpu(2, 3, managed=False), 2, 1) == 1
    assert concurrency_limit(cpu(1, managed=False), 2, None) == 1  # never 0: the trial explains itself


def test_each_rank_gets_its_gpu_in_ray_order_and_packed_ranks_share_one():
    assert rank_gpus(["3", "1"], 2) == ["1", "3"]
    assert rank_gpus(["10", "2"], 2) == ["2", "10"]  # numeric order, not string order
    assert rank_gpus(["0", "1", "2", "3"], 2) == ["0", "2"]  # gpus_per_worker 2: the first of each share
    assert rank_gpus(["5"], 1) == ["5"] and rank_gpus([], 2) == []


# --- rank means --------------------------------------------------------------------------------


def test_the_report_tune_sees_is_the_mean_over_ranks_of_numbers_only():
    merged = mean_over_ranks(
        [{"loss": 1.0, "n": 3, "ok": True, "tag": "r0"}, {"loss": 2.0, "n": 4, "ok": False, "tag": "r1"}]
    )
    assert merged == {"loss": 1.5, "n": 3.5, "ok": True, "tag": "r0"}  # bools and text: rank 0's
    with pytest.raises(ValueError, match="rank 0: loss; rank 1: acc"):
        mean_over_ranks([{"loss": 1.0}, {"acc": 1.0}])
