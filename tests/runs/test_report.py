"""``raysweep report`` on real sweeps: the HTML opens offline in a real Chromium and every plot renders."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import ROOT, chromium, raysweep, screenshot_path, show, write_spec

from raysweep.runs.figures import FIGURES, figures
from raysweep.runs.html_report import build_report
from raysweep.runs.record import SweepRecord
from raysweep.spec import load_spec

LOOP = "train_loops.smoke:train"
PLOTS = [name for name, _, _ in FIGURES if name != "pareto"]  # the Pareto front: sweeps of several objectives
XS = [0.3, 0.35, 2.0, 0.32, 3.0, 2.5]  # good trials first, so the poor ones meet a full rung


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory, ray_cluster) -> Path:
    """Two small real sweeps, run once: ASHA over a grid (some trials stopped) and bayes (a journal)."""
    root = tmp_path_factory.mktemp("report")
    base = {"metric": {"name": "score", "goal": "minimize"}, "train_loop": LOOP}
    specs = [
        write_spec(
            root / "a.yaml",
            name="a",
            method="grid",
            base_config={"epochs": 9},
            max_concurrent=1,
            parameters={"x": {"values": XS}, "sleep": {"values": [0.0, 0.01]}},
            scheduler={"type": "asha", "grace_period": 1, "max_t": 9, "reduction_factor": 3},
            **base,
        ),
        write_spec(
            root / "b.yaml",
            name="b",
            method="bayes",
            run_cap=4,
            seed=0,  # its first two draws differ in sleep: two parameters vary, for importance
            base_config={"epochs": 3},
            parameters={"x": {"min": 0.0, "max": 1.0}, "sleep": {"values": [0.0, 0.01]}},
            searcher={"n_startup_trials": 2},
            **base,
        ),
    ]
    for spec in specs:
        out = raysweep(
            "run",
            str(spec),
            "--address",
            ray_cluster,
            "--storage",
            str(root / "runs"),
            "--wandb",
            "disabled",
            "--quiet",
        )
        assert out.returncode == 0, out.stderr + out.stdout
    return root / "runs"


@pytest.mark.ray
def test_report_is_self_contained_and_holds_every_plot(sweeps):
    out = raysweep("report", "a", "--storage", str(sweeps))
    assert out.returncode == 0, out.stderr
    page = (sweeps / "a" / "report.html").read_text()
    assert str(sweeps / "a" / "report.html") in out.stdout
    assert not re.search(r"""<(script|link|img|iframe)[^>]+(src|href)=["']?(https?:)?//""", page, re.I)
    assert page.count("<script") >= 1 + len(PLOTS) and "Plotly.newPlot" in page
    for name in PLOTS:
        assert f'id="fig-{name}"' in page, name

    data = show(sweeps / "a")
    best = data["best"]
    assert best["config"]["x"] == 0.3 and f"trial {best['trial_id']}" in page
    best = page.split('<section id="best">')[1].split("</section>")[0]
    assert best.count("<tr><td>") == 10  # the top-10 table
    counts = {s: sum(t["status"] == s for t in data["trials"]) for s in ("done", "stopped")}
    assert counts["stopped"] > 0 and f"{counts['done']} done, {counts['stopped']} stopped" in page
    assert "rungs [1, 3, 9]" in page and f"each of the {counts['stopped']} trials stopped by the scheduler" in page


@pytest.mark.ray
def test_figures_follow_the_run_dir(sweeps):
    sweep = SweepRecord.read(sweeps / "a")
    figs = {name: (fig, note) for name, _, fig, note in figures(sweep)}
    drawn = {n: note for n, (fig, note) in figs.items() if fig is None and n in PLOTS}
    assert drawn == {}, drawn
    assert figs["pareto"][0] is None and "one objective" in figs["pareto"][1]  # a sweep of one metric

    parallel = figs["parallel"][0].data[0]
    assert [d.label for d in parallel.dimensions] == ["sleep", "x", "score"]  # the spec's (W&B's) order: by name
    assert sorted(parallel.dimensions[1].values) == sorted(XS * 2)

    curves = figs["curves"][0]
    stop = next(tr for tr in curves.data if tr.name == "stopped by the scheduler")
    stopped = [t for t in show(sweeps / "a")["trials"] if t["status"] == "stopped"]
    assert sorted(stop.x) == sorted(t["iterations"] for t in stopped) and stop.marker.symbol == "x"
    assert sorted(s.x0 for s in curves.layout.shapes) == [1, 3, 9]

    best = figs["best_so_far"][0].data[1]
    assert list(best.y) == sorted(best.y, reverse=True)  # minimize: never gets worse
    assert best.y[-1] == pytest.approx(show(sweeps / "a")["best"]["metric"])
    assert "a study built from the finished trials" in figs["importance"][1]


@pytest.mark.ray
def test_bayes_journal_holds_every_finished_trial_and_feeds_importance(sweeps):
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    storage = JournalStorage(JournalFileBackend(str(sweeps / "b" / "optuna.journal")))
    study = optuna.load_study(study_name="b", storage=storage)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    finished = [t for t in show(sweeps / "b")["trials"] if t["status"] in ("done", "stopped")]
    assert len(complete) == len(finished) == 4

    figs = {name: (fig, note) for name, _, fig, note in figures(SweepRecord.read(sweeps / "b"))}
    fig, note = figs["importance"]
    assert fig is not None and "optuna.journal" in note
    assert sorted(fig.data[0].y) == ["sleep", "x"] and sum(fig.data[0].x) == pytest.approx(1.0)
    throughput = figs["throughput"][0].data[0]
    assert set(throughput.x) == {t["num_workers"] for t in finished}


@pytest.mark.ray
def test_report_renders_in_an_offline_chromium(sweeps, tmp_path):
    from playwright.sync_api import sync_playwright

    browser_path = chromium()
    pages = {name: build_report(sweeps / name, sweeps / f"{name}.html") for name in ("a", "b")}
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=browser_path,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--enable-unsafe-swiftshader",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        try:
            for name, path in pages.items():
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                errors: list[str] = []
                blocked: list[str] = []
                page.on("console", lambda m, errors=errors: m.type == "error" and errors.append(m.text))
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))

                def offline(route, blocked=blocked):
                    if route.request.url.startswith(("file:", "data:", "blob:")):
                        return route.continue_()
                    blocked.append(route.request.url)
                    return route.abort()

                page.route("**/*", offline)
                page.goto(path.as_uri(), wait_until="load")
                page.wait_for_function(
                    f"document.querySelectorAll('.js-plotly-plot svg.main-svg').length >= {len(PLOTS)}", timeout=30_000
                )
                rendered = page.evaluate(
                    "[...document.querySelectorAll('.js-plotly-plot')].filter(d => d.querySelector('svg.main-svg')).map(d => d.id)"
                )
                assert sorted(rendered) == sorted(f"fig-{n}" for n in PLOTS)
                assert page.locator(".js-plotly-plot .parcoords .axis").count() == 3  # x, sleep, score
                assert errors == [] and blocked == [], (errors, blocked)
                if name == "a":
                    page.screenshot(path=str(screenshot_path(tmp_path, "report.png")), full_page=True)
                page.close()
        finally:
            browser.close()


@pytest.mark.ray
def test_png_writes_every_figure(sweeps, tmp_path):
    chromium()
    out = raysweep("report", str(sweeps / "b"), "-o", str(tmp_path / "b.html"), "--png", str(tmp_path / "png"))
    assert out.returncode == 0, out.stderr
    for name in PLOTS:
        png = tmp_path / "png" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000, name
    assert (tmp_path / "b.html").exists()


def test_png_a_render_that_fails_is_an_error(tmp_path, monkeypatch):
    """kaleido returns a failed render's error and leaves no file; plotly's write_images dropped it
    (CI 2026-12-01: `--png` exited 0 with no parallel.png). A render that cannot finish in time
    now fails twice and is an error naming the figure."""
    import plotly.graph_objects as go

    from raysweep.errors import UserError
    from raysweep.runs.figures import png as figures_module

    chromium()
    good, slow = go.Figure(go.Scatter(x=[1, 2], y=[3, 4])), go.Figure(go.Bar(x=[1, 2], y=[3, 4]))
    assert [p.name for p in figures_module.write_pngs({"good": good}, tmp_path / "ok")] == ["good.png"]
    monkeypatch.setattr(figures_module, "RENDER_TIMEOUT_S", 0.001)
    with pytest.raises(UserError, match=r"could not export PNGs of slow with kaleido \(\w+"):
        figures_module.write_pngs({"slow": slow}, tmp_path / "png")
    assert not (tmp_path / "png" / "slow.png").exists()


# --- no cluster: a run dir written by hand ----------------------------------------------------


def fake_run(tmp_path: Path, trials: list[dict]) -> Path:
    """A run dir as a sweep leaves it: spec.json, trials.jsonl and each trial's result.json."""
    spec = load_spec(
        write_spec(
            tmp_path / "f.yaml",
            name="f",
            method="random",
            run_cap=len(trials),
            train_loop=LOOP,
            metric={"name": "acc", "goal": "maximize"},
            parameters={
                "opt": {"values": ["sgd", "adam"]},
                "bn": {"values": [True, False]},
                "lr": {"min": 0.001, "max": 0.1},
            },
        )
    )
    run_dir = tmp_path / "runs" / "f"
    run_dir.mkdir(parents=True)
    (run_dir / "spec.json").write_text(json.dumps(spec.to_json()))
    rows = []
    for i, t in enumerate(trials):
        trial_dir = run_dir / f"t{i}"
        trial_dir.mkdir()
        (trial_dir / "result.json").write_text(
            "".join(
                json.dumps({"acc": a, "training_iteration": k + 1, "time_total_s": k + 1.0}) + "\n"
                for k, a in enumerate(t["accs"])
            )
        )
        rows.append(
            {
                "trial_id": f"t{i}",
                "status": t.get("status", "done"),
                "config": t["config"],
                "start": 1000.0 + i,
                "metrics": {"acc": t["accs"][-1], "training_iteration": len(t["accs"])},
                "num_workers": 1,
                "iterations": len(t["accs"]),
                "wall_s": 2.0,
                "trial_dir": str(trial_dir),
            }
        )
    (run_dir / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run_dir


def test_categorical_and_bool_params_become_indexed_axes_and_maximize_is_respected(tmp_path):
    run_dir = fake_run(
        tmp_path,
        [
            {"config": {"opt": "adam", "bn": True, "lr": 0.01}, "accs": [0.5, 0.9]},
            {"config": {"opt": "sgd", "bn": False, "lr": 0.05}, "accs": [0.4, 0.6]},
            {"config": {"opt": "adam", "bn": False, "lr": 0.002}, "accs": [0.3, 0.7]},
        ],
    )
    figs = {name: (fig, note) for name, _, fig, note in figures(SweepRecord.read(run_dir))}
    bn, lr, opt, acc = figs["parallel"][0].data[0].dimensions  # parameters in the spec's (W&B's) order: by name
    assert (list(opt.ticktext), list(opt.values)) == (["sgd", "adam"], [1, 1, 0])  # spec order, best first
    assert (list(bn.ticktext), list(bn.values)) == (["true", "false"], [0, 1, 1])
    assert list(acc.values) == [0.9, 0.7, 0.6]
    assert list(figs["best_so_far"][0].data[1].y) == [0.5, 0.5, 0.9, 0.9, 0.9, 0.9]  # maximize: only rises
    fig, note = figs["importance"]
    assert fig is not None and sorted(fig.data[0].y) == ["bn", "lr", "opt"]
    assert figs["throughput"][0] is None and "samples_per_sec" in figs["throughput"][1]


def test_too_few_finished_trials_skip_importance_with_a_note(tmp_path):
    run_dir = fake_run(
        tmp_path,
        [
            {"config": {"opt": "adam", "bn": True, "lr": 0.01}, "accs": [0.5, 0.9]},
            {"config": {"opt": "sgd", "bn": False, "lr": 0.05}, "accs": [0.4], "status": "running"},
        ],
    )
    figs = {name: (fig, note) for name, _, fig, note in figures(SweepRecord.read(run_dir))}
    assert figs["importance"][0] is None and "needs 2+ finished trials" in figs["importance"][1]
    page = build_report(run_dir, tmp_path / "r.html").read_text()
    assert "1 running, 1 done" in page and "needs 2+ finished trials" in page


def test_trials_that_all_score_the_same_skip_importance_with_a_note(tmp_path):
    run_dir = fake_run(
        tmp_path,
        [
            {"config": {"opt": "adam", "bn": True, "lr": 0.01}, "accs": [0.5]},
            {"config": {"opt": "sgd", "bn": False, "lr": 0.05}, "accs": [0.5]},
            {"config": {"opt": "adam", "bn": False, "lr": 0.002}, "accs": [0.5]},
        ],
    )
    fig, note = next((fig, note) for name, _, fig, note in figures(SweepRecord.read(run_dir)) if name == "importance")
    assert fig is None and "could not rank the parameters" in note and "zero total variance" in note


def test_report_errors_are_sentences(tmp_path):
    out = raysweep("report", "nope", "--storage", str(tmp_path))
    assert out.returncode == 2 and "no sweep found at 'nope'" in out.stderr and "Traceback" not in out.stderr

    run_dir = fake_run(tmp_path, [{"config": {"opt": "adam", "bn": True, "lr": 0.01}, "accs": [0.5]}])
    env_path = "/usr/bin/does-not-exist/chromium"
    out = raysweep_env({"BROWSER_PATH": env_path}, "report", str(run_dir), "--png", str(tmp_path / "png"))
    assert out.returncode == 2 and "--png: could not export PNGs" in out.stderr and "Traceback" not in out.stderr
    assert (run_dir / "report.html").exists()


def raysweep_env(extra: dict[str, str], *args: str):
    import subprocess
    import sys

    from conftest import cli_env

    return subprocess.run(
        [sys.executable, "-m", "raysweep", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env=cli_env() | extra,
    )


def test_a_sweep_of_two_objectives_draws_them_with_its_front(tmp_path):
    """W&B's `metrics:`: the report plots the two objectives, every trial a point, the front in red."""
    from raysweep.spec import parse_spec

    spec = parse_spec(
        {
            "method": "custom",
            "metrics": [{"name": "loss"}, {"name": "cost_hours"}],
            "parameters": {"x": {"min": 0.0, "max": 1.0}},
            "scheduler": {"engine": "optuna"},
            "raysweep": {"train_loop": LOOP},
        }
    )
    run_dir = tmp_path / "runs" / "m"
    run_dir.mkdir(parents=True)
    (run_dir / "spec.json").write_text(json.dumps(spec.to_json()))
    trials = [(0.5, 3600.0, 1), (0.2, 3600.0, 2), (0.9, 1800.0, 1), (0.6, 3600.0, 1)]  # loss, seconds, workers
    rows = [
        {
            "trial_id": f"t{i}",
            "status": "done",
            "config": {"x": i / 10},
            "metrics": {"loss": loss, "time_total_s": seconds},
            "num_workers": workers,
            "start": 1000.0 + i,
            "end": 1000.0 + i + seconds,
        }
        for i, (loss, seconds, workers) in enumerate(trials)
    ]
    (run_dir / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    figs = {name: (fig, note) for name, _, fig, note in figures(SweepRecord.read(run_dir))}
    fig, note = figs["pareto"]
    points, front = fig.data
    assert sorted(zip(points.x, points.y)) == sorted([(0.5, 1.0), (0.2, 2.0), (0.9, 0.5), (0.6, 1.0)])
    assert list(zip(front.x, front.y)) == [(0.2, 2.0), (0.5, 1.0), (0.9, 0.5)]  # by loss: (0.6, 1.0) is beaten
    assert "3 trials no other beats on both" in note
    assert show(run_dir)["trials"][0]["pareto"] is True
