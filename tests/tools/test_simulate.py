"""``bench.simulate``: raysweep's admission, scheduler and growth on a simulated clock. Traces
whose answers are known by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.simulate import SCHEDULER, Setup, Simulation, passed_over, replay, sim_spec
from raysweep.spec.model import Budget

FLAT = [{"exact_accuracy": [0.5] * 6, "epoch_s": [1.0] * 6}]  # every trial alike: ASHA stops none


def simulate(sizes: list[int], queue_len: int, policy: str = "searched", nodes: int = 1, gpus: int = 2, **setup):
    """A trace on ``nodes`` x ``gpus``: epochs of 10 s on 1 GPU, perfect scaling, no start-up;
    estimates from 10 s a report before any trial reported (``raysweep.budget.epoch_seconds``)."""
    spec = sim_spec()
    spec = type(spec)(**{**spec.__dict__, "budget": Budget(epoch_seconds=10.0)})
    run = Simulation(
        Setup(nodes, gpus, len(sizes), policy, "raysweep", efficiency=1.0, epoch_s=10.0, start_s=0.0, **setup),
        FLAT,
        spec=spec,
        sizes=sizes,
        queue_len=queue_len,
    )
    return run, run.run()


def test_a_reservation_and_a_trial_backfilled_beside_it():
    """3 slots. t0 and t1 (1 GPU each) start at 0; at their first report (10 s) the search makes t2
    (2 GPUs) and t3 (1 GPU). t2 cannot start and reserves two slots for 60 s, when t0 and t1 end;
    t3 would end at 70, after that, but lands on the slot the reservation leaves: it starts at 10,
    backfilled. t2 starts at 60 and runs 6 epochs of 5 s. t2 waited 50 s after t3, made after
    it, started: 5 small-trial lengths (10 s)."""
    run, figures = simulate([1, 1, 2, 1], queue_len=2, gpus=3)
    assert run.log == [
        (0.0, "start", "t00000"),
        (0.0, "start", "t00001"),
        (10.0, "start", "t00003"),
        (60.0, "end", "t00000"),
        (60.0, "end", "t00001"),
        (60.0, "start", "t00002"),
        (70.0, "end", "t00003"),
        (90.0, "end", "t00002"),
    ]
    assert figures["slots_busy"] == round(240 / (3 * 90), 3)
    assert figures["longest_passed_over_small_trials"] == 5.0


def test_the_trials_waiting_at_the_start_run_largest_first():
    """2 slots, t0 (1 GPU) and t1 (2 GPUs) waiting at once: t1 first (``backfill.largest_first``),
    then t0 and t2 side by side; every slot busy throughout."""
    run, figures = simulate([1, 2, 1], queue_len=2)
    assert run.log == [
        (0.0, "start", "t00001"),
        (30.0, "end", "t00001"),
        (30.0, "start", "t00000"),
        (30.0, "start", "t00002"),
        (90.0, "end", "t00000"),
        (90.0, "end", "t00002"),
    ]
    assert figures["slots_busy"] == 1.0


def test_tunes_default_starts_whatever_fits_in_the_order_made():
    """Tune's default on 2 slots: t0 and t2 (1 GPU) start at 0, t1 (2 GPUs) is passed over until
    both slots are free at once (60 s), and t3, made after it, waits for it."""
    spec = sim_spec()
    spec = type(spec)(**{**spec.__dict__, "budget": Budget(epoch_seconds=10.0)})
    setup = Setup(1, 2, 4, "searched", "tune", efficiency=1.0, epoch_s=10.0, start_s=0.0)
    run = Simulation(setup, FLAT, spec=spec, sizes=[1, 2, 1, 1], queue_len=4)
    run.run()
    starts = [(t, trial) for t, kind, trial in run.log if kind == "start"]
    assert starts == [(0.0, "t00000"), (0.0, "t00002"), (60.0, "t00001"), (90.0, "t00003")]


def test_a_promoted_trial_grows_at_each_rung_and_its_segments_are_charged_at_their_sizes():
    """One trial alone on 8 GPUs, growth 1 -> 2 -> 4 -> 8 at the rungs (epochs 1, 2 and 4):
    epoch 1 at 1 GPU (10 s), 2 at 2 (5 s), 3-4 at 4 (2.5 s each), 5-6 at 8 (1.25 s each)."""
    run, figures = simulate([1], queue_len=1, policy="growth", gpus=8)
    assert SCHEDULER.rungs == [1, 2, 4]
    assert [kind for _, kind, _ in run.log] == ["start", "grow", "grow", "grow", "end"]
    trial = run.trials["t00000"]
    assert trial.segments == [(1, 0.0), (2, 10.0), (4, 15.0), (8, 20.0)] and trial.end == 22.5
    assert figures["gpu_hours"] == round((10 + 2 * 5 + 4 * 5 + 8 * 2.5) / 3600, 1)
    assert run.rows["t00000"].sizes == [[1, 0.0, 0, 0.0], [2, 10.0, 1, 10.0], [4, 15.0, 2, 15.0], [8, 20.0, 4, 20.0]]


def test_a_promoted_trial_with_no_room_goes_on_at_its_size():
    """Two 1-GPU trials on 2 GPUs: neither has room to grow, so both run all 6 epochs at 1 GPU."""
    run, _ = simulate([1, 1], queue_len=2, policy="growth", gpus=2)
    assert "grow" not in [kind for _, kind, _ in run.log]
    assert all(t.end == 60.0 for t in run.trials.values())


def test_passed_over_is_the_wait_after_a_later_trial_started():
    class T:
        def __init__(self, made, start):
            self.made, self.start, self.trial_id, self.first_size = made, start, f"{made}", 1 + made % 2

    assert passed_over([T(0, 50.0), T(1, 10.0), T(2, 20.0)]) == pytest.approx(40.0)
    assert passed_over([T(0, 0.0), T(1, 10.0)]) == 0.0
    # only trials larger than 1 GPU count (the one made second is): t0 waited 40 s, but it is small
    assert passed_over([T(0, 50.0), T(1, 10.0), T(2, 20.0)], larger_than=1) == 0.0
    assert passed_over([T(0, 5.0), T(1, 30.0), T(2, 20.0)], larger_than=1) == pytest.approx(10.0)


TIMELINE = Path(__file__).parents[1] / "support" / "admission_two_nodes_timeline.json"  # bench.admission, 2026-12-06


@pytest.mark.parametrize("mode, admission", [("backfill_start_ahead", "raysweep"), ("tune_default", "tune")])
def test_the_simulator_starts_trials_in_the_order_a_real_two_node_run_did(mode, admission):
    """Issue 75: ``bench.admission``'s two-node run (2 nodes of 2 slots, 24 trials of 3-6 one-second
    epochs, a 4-worker trial among every four; its recorded timeline) replayed on the simulated
    clock: the trials start in the real run's order. Under raysweep's admission the sizes' order and
    each 4-worker trial's predecessors are the real run's (the first three large trials, then the
    small ones beside the fourth's reservation...); under Tune's default the same (every large
    trial last). Trials that started together (within a second) count in either order."""
    trials = json.loads(TIMELINE.read_text())["starvation"][mode]
    run = replay(trials, admission, epoch_s=1.0)
    run.run()
    simulated = sorted(run.trials.values(), key=lambda t: (t.start, t.trial_id))
    sim_order = [int(t.trial_id[1:]) for t in simulated]
    real_order = sorted(range(len(trials)), key=lambda i: trials[i]["start"])
    assert [trials[i]["size"] for i in sim_order] == [trials[i]["size"] for i in real_order]
    for large in (i for i, t in enumerate(trials) if t["size"] == 4):
        before_real = {i for i in real_order if trials[i]["start"] < trials[large]["start"] - 1.0}
        before_sim = {int(t.trial_id[1:]) for t in simulated if t.start < run.trials[f"t{large:05d}"].start - 1.0}
        assert before_sim == before_real, large


def test_a_change_planted_in_the_admissions_step_moves_the_simulator_and_the_driver_calls_the_same(monkeypatch):
    """The simulator acts on ``backfill.step``, the very function ``driver/admission.py`` calls: a
    step planted to backfill nothing changes the first trace's order (t3 no longer starts at 10 s)."""
    import bench.simulate
    import raysweep.driver.admission
    from raysweep import backfill

    def no_backfill(view):
        chosen = backfill.step(view)
        return backfill.Step(chosen.decision) if chosen.backfilled else chosen

    assert raysweep.driver.admission.step is backfill.step and bench.simulate.step is backfill.step
    monkeypatch.setattr(bench.simulate, "step", no_backfill)
    run, _ = simulate([1, 1, 2, 1], queue_len=2, gpus=3)
    assert (10.0, "start", "t00003") not in run.log and (60.0, "start", "t00002") in run.log, run.log


FILL_TIMELINE = Path(__file__).parents[1] / "support" / "fill_three_nodes_timeline.json"  # bench.fill, 2026-12-07


def test_the_simulator_grows_and_fills_the_tail_as_a_real_three_node_run_did():
    """Issue 83: ``bench.fill``'s run (3 nodes of 2 slots, 8 trials that grow to 12 epochs of 4 s /
    world, the fill on; its recorded timeline) replayed on the simulated clock, the restart charged
    what the run's restarts cost (``Promotions.reported``'s measure): wall time and slots busy
    within 10% of the run's, and the same changes of size in the same order (the two tail trials
    grow at their first rung, then one fills two whole nodes, and the other once it ended).
    Planted: without the fill (``Promotions.refit`` none), the changes are two growths only."""
    from bench.fill import compare

    raw = json.loads(FILL_TIMELINE.read_text())
    out = compare(raw["trials"], raw["epoch_s"])
    assert 0.9 <= out["wall_s"]["ratio"] <= 1.1 and 0.9 <= out["slots_busy"]["ratio"] <= 1.1, out
    assert out["changes_real"] == [[1, 2], [1, 2], [2, 4], [2, 4]], out
    assert out["changes_simulated"] == out["changes_real"] and out["sizes_simulated"] == out["sizes_real"], out
