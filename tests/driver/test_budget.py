"""GPU-hour budgets and the plan (issue 43), on a Ray node with 4 GPUs that do not exist (and 2
CPUs: 2 workers at once): trials of 1 and 2 workers of a loop whose report takes a known time
(the smoke loop's sleep).

The budget: the spend stays within the budget plus one report of the trials running when it ran
out; the sweep ends with the sentence, resumable; ``resume --budget-gpu-hours`` with a larger one
goes on, counting what was spent. The plan: ``validate --plan`` against what the sweeps spent.

Modules: ``search/plan.py`` (``validate --plan``), ``trial/holdings.py`` (what the admission reads).
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import RAY, ROOT, cli_env, ensure_ray_token, free_port, raysweep, stop_cluster, write_spec

from raysweep.runs.files import TRIALS_FILE, read_trials

pytestmark = pytest.mark.ray

REPORT_S = 1.0  # the smoke loop's sleep: one report's seconds


@pytest.fixture(scope="module")
def fake_gpus():
    """One node, 2 CPUs, 4 GPUs that do not exist, 4 worker slots (its CPUs host 2 workers)."""
    port = free_port()
    ensure_ray_token()
    args = [RAY, "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=2", "--num-gpus=4"]
    args += ["--resources", json.dumps({"raysweep_slot": 4}), "--include-dashboard=false", "--disable-usage-stats"]
    subprocess.run(args, check=True, capture_output=True, cwd=ROOT, env=cli_env())
    try:
        yield f"127.0.0.1:{port}"
    finally:
        stop_cluster(f"127.0.0.1:{port}")


def sweep(tmp_path: Path, name: str, **raysweep_keys) -> Path:
    doc = {
        "name": name,
        "method": "grid",
        "metric": {"name": "score", "goal": "minimize"},
        "parameters": {"x": {"values": [0.1, 0.2, 0.3, 0.4]}, "num_gpus": {"values": [1, 2]}},
        "raysweep": {"train_loop": "train_loops.smoke:train", "base_config": {"epochs": 3, "sleep": REPORT_S}}
        | raysweep_keys,
    }
    return write_spec(tmp_path / f"{name}.yaml", **doc)


def cli(*args: str, address: str | None = None) -> subprocess.CompletedProcess:
    where = ["--address", address] if address else []
    return subprocess.run(
        [sys.executable, "-m", "raysweep", *args, *where],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=ROOT,
        timeout=300,  # a driver that never ends fails here, not at CI's limit
    )


def spent(run_dir: Path) -> float:
    """What the sweep's trials cost, from its record: workers x the seconds each ran."""
    return sum(r["num_workers"] * r.get("run_s", 0.0) for r in read_trials(run_dir / TRIALS_FILE)) / 3600


def largest_trial_hours(rows: list[dict], sizes: tuple[int, ...] = (1, 2)) -> float:
    """The most a trial of the sweep costs as ``estimates.py`` reckons it from ``rows``: its workers
    x the median seconds of a report of its size (start-up shared out; a size none reported yet
    takes the slowest size's) x its 3 reports; unbounded before any trial reported (under load the
    first trials' start-ups alone spent the budget: the largest trial starts first)."""
    seconds: dict[int, list[float]] = {}
    for r in rows:
        if r.get("iterations") and r.get("run_s"):
            seconds.setdefault(r["num_workers"], []).append(r["run_s"] / r["iterations"])
    per = {size: statistics.median(s) for size, s in seconds.items()}
    slowest = max(per.values(), default=math.inf)
    return max(size * per.get(size, slowest) * 3 for size in sizes) / 3600


def test_a_budget_is_never_overspent_and_resume_with_a_larger_one_goes_on(tmp_path, fake_gpus):
    budget = 0.005  # 18 worker-seconds: about two thirds of the 8 trials' 27
    spec = sweep(tmp_path, "capped")
    storage = str(tmp_path / "runs")
    out = cli(
        "run",
        str(spec),
        "--storage",
        storage,
        "--wandb",
        "disabled",
        "--budget-gpu-hours",
        str(budget),
        address=fake_gpus,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "sweep capped: budget spent: " in out.stdout and f"of {budget:g} GPU-hours" in out.stdout, out.stdout
    assert "--budget-gpu-hours H" in out.stdout
    run_dir = tmp_path / "runs" / "capped"
    first = spent(run_dir)
    report = 2 * (REPORT_S + 0.5) / 3600  # one report of the largest trial (2 workers) that may be running
    rows = read_trials(run_dir / TRIALS_FILE)
    assert first <= budget + report, (first, [(r["num_workers"], r["status"], r.get("run_s")) for r in rows])
    # it stopped only when the trial it held could not fit: what was left is less than that
    # trial's cost as the ledger reckons it (a slow machine's start-ups make the cost larger)
    held = {r["num_workers"] for r in rows if r["status"] == "pending"} or {1, 2}  # Tune made it, or not yet
    assert budget - first < largest_trial_hours(rows, tuple(held)), (first, held, rows)
    # left for resume (how many trials Tune made before the first estimate told the ledger hangs
    # on the machine's speed: all 8 on a fast one)
    assert [r for r in rows if r["status"] == "pending"] or len(rows) < 8, rows
    settings = json.loads((run_dir / "run.json").read_text())
    assert settings["stopped"].startswith("budget spent:")
    done_first = {r["trial_id"]: r["run_s"] for r in rows if r["status"] == "done"}

    # resumed with the same budget, it ends at once: the budget is spent. (Tune put the first
    # driver's stopper, already fired, back over this one's: the resume never stopped for its budget)
    same = cli("resume", str(run_dir), "--budget-gpu-hours", str(budget), address=fake_gpus)
    assert same.returncode == 0 and "sweep capped: budget spent: " in same.stdout, (
        same.stdout[-2000:] + same.stderr[-2000:]
    )
    assert spent(run_dir) == pytest.approx(first, abs=1e-6)  # no trial ran

    # 0.03: 108 worker-seconds, the whole grid's 27 reports however slow (a run under load spent 0.0209)
    again = cli("resume", str(run_dir), "--budget-gpu-hours", "0.03", address=fake_gpus)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "finished" in again.stdout
    rows = read_trials(run_dir / TRIALS_FILE)
    assert len(rows) == 8 and {r["status"] for r in rows} == {"done"}
    total = spent(run_dir)
    assert first < total <= 0.03  # counted on from the first driver's spend
    assert {r["trial_id"]: r["run_s"] for r in rows if r["trial_id"] in done_first} == done_first  # none ran again
    cost = json.loads(raysweep("show", str(run_dir), "--json").stdout)["cost"]
    assert cost["budget_hours"] == 0.03 and cost["spent_hours"] == pytest.approx(total, rel=1e-3)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget-gpu-hours", "0"], "--budget-gpu-hours must be a number of hours > 0, got 0.0"),
        (["--budget-gpu-hours", "-2"], "--budget-gpu-hours must be a number of hours > 0, got -2.0"),
        (
            ["--budget-gpu-hours", "0.0001", "--epoch-seconds", "1"],
            "budget 0.0001 GPU-hours is below one trial's cost: the cheapest trial (num_gpus=1, to its first "
            "rung at 1 s a report) costs 0.0008333",
        ),
    ],
)
def test_a_budget_that_cannot_be_is_one_sentence_and_exit_2(tmp_path, fake_gpus, args, message):
    spec = sweep(tmp_path, "bad")
    out = cli("run", str(spec), "--storage", str(tmp_path / "runs"), "--wandb", "disabled", *args, address=fake_gpus)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert not (tmp_path / "runs" / "bad").exists()  # nothing written


def test_the_plan_of_a_grid_sweep_counts_its_reports_and_never_more_than_it_spends(tmp_path, fake_gpus):
    """The plan of a grid is its reports times the report's seconds: exactly the reports the sweep
    makes, and never more than it spends (each report sleeps 2 s; a trial's start-up, which the plan
    does not count, comes on top). How close the two are is a figure of bench.admission's kind,
    not an assert: it hangs on the machine's load (docs/budgets-and-admission.md, "A budget worked through")."""
    spec = sweep(tmp_path, "planned", max_concurrent=2)
    doc = yaml.safe_load(spec.read_text())
    doc["parameters"]["x"] = {"values": [0.1, 0.2]}
    doc["raysweep"]["base_config"]["sleep"] = 2.0
    spec.write_text(yaml.safe_dump(doc))
    plan = cli("validate", str(spec), "--plan", "--json", "--epoch-seconds", "2")
    assert plan.returncode == 0, plan.stderr
    planned = json.loads(plan.stdout)
    hours = planned["hours"]
    assert hours == pytest.approx(2 * (1 + 2) * 3 * 2.0 / 3600)  # 2 trials of each size, 3 reports of 2 s each
    storage = str(tmp_path / "runs")
    out = cli("run", str(spec), "--storage", storage, "--wandb", "disabled", "--epoch-seconds", "2", address=fake_gpus)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "plan: expected 0.01 GPU-hours at 2 s a report" in out.stdout  # the banner says it too
    rows = read_trials(tmp_path / "runs" / "planned" / TRIALS_FILE)
    assert sum(r["iterations"] * r["num_workers"] for r in rows) == planned["worker_reports"] == 18
    assert spent(tmp_path / "runs" / "planned") >= hours


def test_the_plan_of_an_asha_sweep_counts_the_reports_its_early_stopping_leaves(tmp_path, fake_gpus):
    """ASHA's stops depend on the order trials come in: the plan runs ASHA itself on trials of
    random quality, one after another. A random sweep of 32 short trials, one at a time, fixed
    seed: the reports it made, against the plan's (what it spends, before seconds). Which trials a
    sweep stops is its own draw: over 32 trials a sweep's reports vary by about 8% around the mean."""
    doc = {
        "name": "halving",
        "method": "random",
        "run_cap": 32,
        "metric": {"name": "score", "goal": "minimize"},
        "parameters": {"x": {"min": 0.0, "max": 1.0}},
        "raysweep": {
            "train_loop": "train_loops.smoke:train",
            "base_config": {"epochs": 4, "sleep": 0.0},
            "scheduler": {"type": "asha", "grace_period": 1, "max_t": 4, "reduction_factor": 2},
            "max_concurrent": 1,
            "seed": 3,
        },
    }
    spec = write_spec(tmp_path / "halving.yaml", **doc)
    plan = json.loads(cli("validate", str(spec), "--plan", "--json").stdout)
    assert 1.5 < plan["reports_per_trial"] < 3  # early stopping counted: far from every trial at max_t
    out = cli("run", str(spec), "--storage", str(tmp_path / "runs"), "--wandb", "disabled", address=fake_gpus)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = read_trials(tmp_path / "runs" / "halving" / TRIALS_FILE)
    made = sum(r["iterations"] for r in rows)
    assert made == pytest.approx(plan["worker_reports"], rel=0.15), (made, plan)


def _by_id(rows: list) -> dict:
    """The driver's rows, as its monitor keeps them and the estimates read them."""
    return {r.trial_id: r for r in rows}


def may_start(ledger, config: dict, starting: list) -> bool:
    """Whether the admission lets a waiting trial of ``config`` start beside ``starting``."""
    return ledger.cost_s(config) <= ledger.start_room_s(starting)


class _Trials:
    """An inner search that hands out trials of these configs, in order."""

    def __init__(self, *configs: dict):
        self.trials = [
            type(
                "Trial",
                (),
                {"config": c, "trial_id": uuid.uuid4().hex[:8], "create_placement_group_factory": lambda self: None},
            )()
            for c in configs
        ]

    def next_trial(self):
        return self.trials.pop(0) if self.trials else None

    def save_to_dir(self, dirpath, **kwargs):
        (Path(dirpath) / "left.json").write_text(json.dumps([t.config for t in self.trials]))

    def restore_from_dir(self, dirpath):
        self.__init__(*json.loads((Path(dirpath) / "left.json").read_text()))


def test_a_trial_is_admitted_only_when_the_spend_the_running_trials_and_its_own_cost_fit(tmp_path):
    """By hand, no cluster: 10 s a report for either size, 4 reports a trial. Spent 60 worker-s, the
    running 2-worker trial will use 60 more; a 2-worker trial costs 80 (200 in all), a 1-worker one
    40 (160). (``Ledger.fits`` returning True let every one through, and the sweep's own tests
    still passed: the stopper hid it.)"""
    from raysweep.driver.admitted_search import AdmittedSearch
    from raysweep.driver.budget import HOUR, Ledger
    from raysweep.driver.estimates import Estimates
    from raysweep.runs.rows import TrialRow
    from raysweep.spec import parse_spec
    from raysweep.words import TrialStatus

    spec = parse_spec(
        {
            "method": "grid",
            "metric": {"name": "score", "goal": "minimize"},
            "parameters": {"x": {"values": [0.1]}, "num_gpus": {"values": [1, 2]}},
            "raysweep": {"train_loop": "train_loops.smoke:train", "base_config": {"epochs": 4}},
        }
    )
    rows = [
        TrialRow("done", status=TrialStatus.DONE, world_size=1, iterations=4, run_s=40.0),
        TrialRow("running", status=TrialStatus.RUNNING, world_size=2, iterations=1, run_s=10.0),
    ]
    big, small = {"x": 0.1, "num_gpus": 2}, {"x": 0.1, "num_gpus": 1}

    def search(limit_s: float, *configs: dict) -> AdmittedSearch:
        return AdmittedSearch(_Trials(*configs), Ledger(Estimates(spec, _by_id(rows)), limit_s / HOUR, False))

    assert search(199.0, big).next_trial() is None  # held while the running trial may free the budget
    assert search(200.0, big).next_trial().config == big
    assert search(160.0, small).next_trial().config == small
    assert search(159.0, small).next_trial() is None

    # Tune saves the search while a trial is held: the resumed search hands it out first
    capped = search(199.0, big, small)
    assert capped.next_trial() is None
    capped.save_to_dir(str(tmp_path))
    resumed = AdmittedSearch(_Trials(), Ledger(Estimates(spec, _by_id(rows)), 1.0, False))
    resumed.restore_from_dir(str(tmp_path))
    assert [resumed.next_trial().config, resumed.next_trial().config] == [big, small]

    # a trial handed to Tune and waiting to start counts as a running one does: 40 more here
    # (counting only running trials let waiting ones each fit alone and overspend together)
    rows.append(TrialRow("waiting", status=TrialStatus.PENDING, world_size=1, config=small))
    assert search(239.0, big).next_trial() is None
    assert search(240.0, big).next_trial().config == big
    # with nothing running but a trial waiting, one that does not fit is held, not the budget's end
    del rows[1]
    waits = search(139.0, big)  # spent 40, the waiting trial's 40, the big one's 80: 160
    assert waits.next_trial() is None and not waits.ledger.exhausted


def test_a_trial_handed_to_tune_counts_before_it_starts_and_starts_only_if_it_fits_then():
    """By hand, as above: 10 s a report, 4 reports a trial, spent 40 worker-s. A trial the search
    handed Tune has no row until it starts, yet counts (counting rows alone let the trials the
    admission queued each fit alone); and a trial handed before any estimate existed (cost 0
    then) is judged again when it would start (``Ledger.start_room_s``: the budget test spent 0.0071
    of 0.005 GPU-hours on a loaded machine without it)."""
    from raysweep.driver.admitted_search import AdmittedSearch
    from raysweep.driver.budget import HOUR, Ledger
    from raysweep.driver.estimates import Estimates
    from raysweep.runs.rows import TrialRow
    from raysweep.spec import parse_spec
    from raysweep.words import TrialStatus

    spec = parse_spec(
        {
            "method": "grid",
            "metric": {"name": "score", "goal": "minimize"},
            "parameters": {"x": {"values": [0.1]}, "num_gpus": {"values": [1, 2]}},
            "raysweep": {"train_loop": "train_loops.smoke:train", "base_config": {"epochs": 4}},
        }
    )
    big, small = {"x": 0.1, "num_gpus": 2}, {"x": 0.1, "num_gpus": 1}
    rows = _by_id([TrialRow("done", status=TrialStatus.DONE, world_size=1, iterations=4, run_s=40.0)])
    ledger = Ledger(Estimates(spec, rows), 199.0 / HOUR, False)
    search = AdmittedSearch(_Trials(small, small, big), ledger)
    handed = [search.next_trial(), search.next_trial()]  # 40 spent, two of 40 waiting: 120
    assert [t.config for t in handed] == [small, small]
    assert search.next_trial() is None and not ledger.exhausted  # the big one's 80 makes 200
    rows[handed[0].trial_id] = TrialRow(handed[0].trial_id, status=TrialStatus.RUNNING, world_size=1, config=small)
    assert ledger.committed_s() == 120.0  # started: counted once, by its row

    blind = Ledger(Estimates(spec, {}), 199.0 / HOUR, False)  # nothing reported yet: every trial fits
    assert blind.fits(big) and may_start(blind, big, [small, small])
    blind.rows["done"] = rows["done"]  # the first trial reported: 40 spent
    assert may_start(blind, big, []) and may_start(blind, big, [small])  # 120, 160
    assert not may_start(blind, big, [small, small])  # 200: the waiting trial stays
    blind.rows["run"] = TrialRow("run", status=TrialStatus.RUNNING, world_size=2, config=big, iterations=1, run_s=10.0)
    # spent 60, the running one's 60 more: 160, 200
    assert may_start(blind, small, []) and not may_start(blind, big, [])


@pytest.mark.parametrize("start_ahead", [True, pytest.param(False, marks=pytest.mark.slow)])  # default, then off
def test_a_trial_of_the_whole_node_gets_a_reservation_and_a_short_trial_is_backfilled_before_it(
    tmp_path, fake_gpus, start_ahead
):
    """One node of 4 GPUs that do not exist (half a CPU per worker, so the GPUs bound it): sizes 1
    and 4 (tests/support/backfill_case.py says what the grid's order forces); trials place their
    own slots and ask each bundle for its GPUs, or with RAYSWEEP_START_AHEAD=0 run in Tune's groups."""
    from backfill_case import backfill_sweep, check_backfill, check_started_ahead

    from raysweep.env import START_AHEAD
    from raysweep.runs.rows import read_rows

    spec = backfill_sweep(tmp_path, "bf-one", resources={"cpus_per_worker": 0.5})
    args = ["run", str(spec), "--storage", str(tmp_path / "runs"), "--wandb", "disabled", "--address", fake_gpus]
    env = cli_env() | ({} if start_ahead else {START_AHEAD: "0"})
    out = subprocess.run([sys.executable, "-m", "raysweep", *args], capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "reserved, starts in ~" in out.stdout  # the progress line shows the waiting head
    rows = read_rows(tmp_path / "runs" / "bf-one")
    check_backfill(rows)
    assert all(r.metrics["world_size"] == r.world_size for r in rows)
    if start_ahead:
        check_started_ahead(rows, tmp_path / "runs" / "bf-one")


def test_a_sweep_whose_last_trial_took_the_spend_past_the_budget_finishes_and_is_not_interrupted():
    """By hand, no cluster: once ``fit()`` returns, the driver asks the stoppers whether one ended
    the sweep. The budget's, asked then with the spend past the budget, sent this process SIGINT, so
    a sweep whose last trial ran past its estimate ended "raysweep: interrupted", 130, its finish
    skipped (a full run under load, 2026-11-28)."""
    import signal

    from raysweep.driver.budget import HOUR, BudgetStopper, Ledger
    from raysweep.driver.estimates import Estimates
    from raysweep.driver.outcome import stopped_by
    from raysweep.runs.rows import TrialRow
    from raysweep.spec import parse_spec
    from raysweep.words import TrialStatus

    spec = parse_spec(
        {
            "method": "grid",
            "metric": {"name": "score", "goal": "minimize"},
            "parameters": {"num_gpus": {"values": [1, 2]}},
            "raysweep": {"train_loop": "train_loops.smoke:train", "base_config": {"epochs": 3}},
        }
    )
    done = TrialRow("last", status=TrialStatus.DONE, world_size=2, iterations=3, run_s=60.0)
    got: list[int] = []
    before = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    try:
        assert stopped_by([BudgetStopper(Ledger(Estimates(spec, _by_id([done])), 100 / HOUR, False))]) is None
        assert got == []
        during = BudgetStopper(Ledger(Estimates(spec, _by_id([done])), 100 / HOUR, False))
        assert during.stop_all() is False and during.fired  # while Tune runs it interrupts the sweep
    finally:
        signal.signal(signal.SIGINT, before)
    assert got == [signal.SIGINT]


def test_before_any_trial_reported_the_epoch_seconds_given_are_the_estimate_then_the_reports_are():
    """By hand, no cluster: a new trial's expected seconds, which reservations and the budget read.
    Without ``--epoch-seconds`` nothing is known until a trial reports (nothing is backfilled)."""
    from raysweep.driver.estimates import Estimates
    from raysweep.runs.rows import TrialRow
    from raysweep.spec import parse_spec
    from raysweep.words import TrialStatus

    def spec(**budget):
        return parse_spec(
            {
                "method": "grid",
                "metric": {"name": "score", "goal": "minimize"},
                "parameters": {"num_gpus": {"values": [1, 2]}},
                "raysweep": {"train_loop": "train_loops.smoke:train", "base_config": {"epochs": 4}, "budget": budget},
            }
        )

    small = {"num_gpus": 1}
    assert Estimates(spec(), _by_id([])).trial_seconds(small) is None
    assert Estimates(spec(epoch_seconds=3), _by_id([])).trial_seconds(small) == 12.0  # 4 reports of 3 s
    reported = [TrialRow("a", status=TrialStatus.RUNNING, world_size=2, iterations=2, run_s=10.0)]
    assert Estimates(spec(epoch_seconds=3), _by_id(reported)).trial_seconds(small) == 20.0  # 5 s a report, measured


def test_a_chosen_trials_lead_to_its_start_is_measured_from_the_trials_that_started():
    """By hand, no cluster: Tune starts a chosen trial's actor before the trial starts, and no
    trial's seconds held count that; reservations and backfill add it to a trial not yet started."""
    from raysweep.driver.estimates import START_LEAD_S, Estimates
    from raysweep.runs.rows import TrialRow
    from raysweep.spec import parse_spec
    from raysweep.words import TrialStatus

    spec = parse_spec(
        {
            "method": "grid",
            "metric": {"name": "score", "goal": "minimize"},
            "parameters": {"x": {"values": [1]}},
            "raysweep": {"train_loop": "train_loops.smoke:train"},
        }
    )
    rows = [
        TrialRow("a", status=TrialStatus.DONE, start=103.0),  # a new actor: 3 s
        TrialRow("b", status=TrialStatus.DONE, start=110.5),  # a reused one: 0.5 s
        TrialRow("c", status=TrialStatus.RUNNING, start=127.0),  # 7 s
        TrialRow("d", status=TrialStatus.PENDING),  # chosen, not started: no lead yet
        TrialRow("e", status=TrialStatus.RUNNING, start=130.0),  # started before this driver chose any
    ]
    chosen = {"a": 100.0, "b": 110.0, "c": 120.0, "d": 125.0}
    assert Estimates(spec, _by_id(rows)).start_lead(chosen) == 3.0  # the median of 3, 0.5 and 7
    assert Estimates(spec, _by_id(rows)).start_lead({}) == START_LEAD_S  # none measured yet
