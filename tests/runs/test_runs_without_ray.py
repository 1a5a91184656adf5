"""``raysweep show`` and ``raysweep report`` read a run dir with Ray (and torch) not importable:
a run dir can be read on a laptop with no Ray, during a sweep or long after it.

Modules: ``runs/show.py``, ``runs/results.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from bench.readers import write_run_dir

BLOCKED = ("ray", "torch")
RUN_WITHOUT = f"""
import importlib.abc, sys

class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError(f"{{name}} is not installed here")

sys.meta_path.insert(0, Missing())
from raysweep.cli import main
code = main(sys.argv[1:])
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({BLOCKED!r}))
print("LOADED", loaded, file=sys.stderr)
sys.exit(code)
"""


def run_without_ray(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", RUN_WITHOUT, *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def test_show_and_report_need_no_ray(tmp_path: Path):
    run_dir = write_run_dir(tmp_path, trials=12, epochs=4)
    shown = run_without_ray("show", str(run_dir), "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert len(data["trials"]) == 12 and data["best"]["metric"] == max(t["metric"] for t in data["trials"])
    assert "LOADED []" in shown.stderr
    table = run_without_ray("show", str(run_dir), "--top", "3")
    assert table.returncode == 0 and len(table.stdout.strip().splitlines()) == 2 + 3 + 2, (
        table.stdout + table.stderr
    )  # + the cost line, and what the sweep holds on its storage
    assert table.stdout.strip().splitlines()[-1].startswith("storage: "), table.stdout
    assert table.stdout.startswith(f"sweep {run_dir.name}: top 3 of 12 trials,"), table.stdout
    report = run_without_ray("report", str(run_dir), "-o", str(tmp_path / "r.html"))
    assert report.returncode == 0, report.stderr
    assert "LOADED []" in report.stderr
    page = (tmp_path / "r.html").read_text()
    assert 'id="fig-curves"' in page and "t00000" in page


def test_the_guard_itself_stops_an_import_of_ray():
    """The blocker is real: a command that needs Ray fails under it."""
    out = run_without_ray("validate", "search_spaces/smoke.yaml", "--sample", "1")  # draws with Tune's generator
    assert out.returncode != 0
    assert "ray is not installed here" in out.stderr, out.stderr


def test_raysweep_load_reads_a_run_dir_like_show_with_no_ray(tmp_path: Path):
    """``raysweep.load`` (issue 34) gives ``show --json``'s trials, a DataFrame of them and a
    trial's history, with Ray and torch not importable."""
    run_dir = write_run_dir(tmp_path, trials=5, epochs=3)
    code = (
        RUN_WITHOUT.split("from raysweep.cli import main")[0]
        + f"""
import json, raysweep
result = raysweep.load({str(run_dir)!r})
frame = result.dataframe()
first = result.trials[0].trial_id
print(json.dumps({{"trials": [t.to_json() for t in result.trials], "best": result.best.to_json(), "rows": len(frame),
                  "columns": list(frame.columns), "history": len(result.history(first))}}, default=str))
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({BLOCKED!r}))
print("LOADED", loaded, file=sys.stderr)
"""
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "LOADED []" in out.stderr
    data = json.loads(out.stdout)
    shown = json.loads(run_without_ray("show", str(run_dir), "--json").stdout)
    assert data["trials"] == json.loads(json.dumps(shown["trials"], default=str)) and data["best"] == shown["best"]
    assert data["rows"] == 5 and {"trial_id", "status", "iterations", "wall_s"} <= set(data["columns"])
    assert data["history"] == 3


def test_trials_and_best_are_frozen_records_whose_json_is_shows_row(tmp_path: Path):
    """Issue 76: ``SweepResult.trials`` and ``.best`` are records, as Optuna hands ``FrozenTrial``s;
    a script written for the dicts they were still reads them, warned."""
    import dataclasses

    import raysweep
    from raysweep.runs.trial_result import TrialResult
    from raysweep.words import TrialStatus

    run_dir = write_run_dir(tmp_path, trials=3, epochs=2)
    result = raysweep.load(run_dir)
    shown = json.loads(run_without_ray("show", str(run_dir), "--json").stdout)
    assert all(isinstance(t, TrialResult) for t in result.trials) and result.best == result.trials[0]
    assert [t.to_json() for t in result.trials] == shown["trials"] and result.best.to_json() == shown["best"]
    assert result.best.status is TrialStatus.DONE and result.best.metric == shown["best"]["metric"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.best.metric = 0.0
    best = shown["best"]
    with pytest.warns(DeprecationWarning, match=r"t\['config'\] reads the dict they were; use the attributes"):
        assert result.best["config"] == best["config"]
    with pytest.warns(DeprecationWarning, match=r"t\.get\('metric'\)"):  # as dicts, where users' code read them so
        assert result.best.get("metric") == best["metric"] and result.best.get("nope", 7) == 7
    with pytest.warns(DeprecationWarning):
        assert "metric" in result.best and "nope" not in result.best
    with pytest.warns(DeprecationWarning):
        assert set(result.best.keys()) == set(best) and dict(result.best.items()) == best


def test_resume_refuses_a_run_dir_of_another_format_in_one_sentence_and_show_still_reads_it(tmp_path: Path):
    """Tune pickled the searcher, scheduler and callbacks under the module paths of the raysweep
    that wrote the run dir: one whose format differs is refused before anything starts."""
    from raysweep.runs.files import RUN_DIR_FORMAT, SETTINGS_FILE
    from raysweep.runs.run_settings import RunSettings

    run_dir = write_run_dir(tmp_path, trials=2, epochs=2)
    saved = RunSettings(name=run_dir.name, budget=2, wandb="disabled").to_json()
    assert saved["format"] == RUN_DIR_FORMAT  # what run writes
    for written, shown in (({}, 0), ({"format": RUN_DIR_FORMAT + 1}, RUN_DIR_FORMAT + 1)):
        settings = {k: v for k, v in saved.items() if k != "format"} | written
        (run_dir / SETTINGS_FILE).write_text(json.dumps(settings))
        out = subprocess.run(
            [sys.executable, "-m", "raysweep", "resume", str(run_dir)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
        )
        assert out.returncode == 2 and out.stderr == (
            f"raysweep: {run_dir} holds a sweep in run-dir format {shown}, and this raysweep resumes format "
            f"{RUN_DIR_FORMAT}: resume it with the raysweep that started it (show and report still read it)\n"
        )
        assert run_without_ray("show", str(run_dir)).returncode == 0


def test_the_plan_in_run_json_reads_back_as_a_record_and_one_of_an_older_raysweep_as_unknown(tmp_path: Path):
    from raysweep.runs.files import SETTINGS_FILE
    from raysweep.runs.run_settings import Plan, RunSettings, read_settings, write_settings

    run_dir = write_run_dir(tmp_path, trials=2, epochs=2)
    plan = Plan(2, {1: 0.5, 2: 0.5}, 2, 1.5, [(1, 1.0), (2, 0.5)], 4.5, 10.0, 0.0125, "worker-hours")
    write_settings(run_dir, RunSettings(name=run_dir.name, budget=2, wandb="disabled", plan=plan))
    assert read_settings(run_dir).plan == plan
    cost = json.loads(run_without_ray("show", str(run_dir), "--json").stdout)["cost"]
    assert cost["plan_hours"] == 0.0125 and cost["unit"] == "worker-hours"
    older = json.loads((run_dir / SETTINGS_FILE).read_text())
    del older["plan"]["unit"]  # a field this raysweep's plan has and that one's lacked
    (run_dir / SETTINGS_FILE).write_text(json.dumps(older))
    assert read_settings(run_dir).plan is None
    cost = json.loads(run_without_ray("show", str(run_dir), "--json").stdout)["cost"]
    assert cost["plan_hours"] is None and cost["unit"] == "GPU-hours"


def test_show_into_a_pipe_that_closes_early_ends_quietly(tmp_path: Path):
    """``raysweep show NAME | head``: the reader leaves after its lines, and show ends with no traceback."""
    run_dir = write_run_dir(tmp_path, trials=1500, epochs=1)  # a table larger than the pipe's buffer
    out = subprocess.run(
        f"{sys.executable} -m raysweep show {run_dir} | head -2", shell=True, capture_output=True, text=True, cwd=ROOT
    )
    assert len(out.stdout.splitlines()) == 2 and out.stderr == "", out.stderr[-2000:]
