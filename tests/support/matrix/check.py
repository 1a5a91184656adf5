"""Running one matrix cell end to end and checking it (tests/end_to_end/test_matrix*.py).

A cell's sweep runs on the module's Ray cluster through raysweep's Python API (``driver.py``),
ends as the cell says (to its end; a Ctrl-C or a SIGKILL once a trial has reported, then
``resume``; or after a first sweep it warm-starts from), and is then read by every reader. Checked:

* the exit code, and every trial ended (done, or stopped by the scheduler);
* every rank's config is the trial's row's, as its entry reads it, and torchrun's variables are
  its own (``seen.rank<R>.json``, written by the entry on each rank);
* no reader raises: ``show``, ``show --json``, ``show --csv``, ``raysweep.load(...).dataframe()``,
  ``report``, ``validate --sample 2``; and they agree on the trials;
* every epoch of every trial is in its ``result.json`` once, after a resume too; with W&B offline,
  the trial's run holds them.
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from raysweep import cli
from raysweep.api import load
from raysweep.runs.files import TRIALS_FILE, read_spec, read_trials
from raysweep.spec import trial_config
from raysweep.spec.space import wandb_config

from .cells import HERE, Cell

ROOT = HERE.parents[2]
ENDED = {"done", "stopped"}


def _driver(mode: str, cell_file: Path, env: dict[str, str]) -> subprocess.Popen:
    cmd = [sys.executable, str(HERE / "driver.py"), mode, str(cell_file)]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen, expect: int, timeout: float = 420) -> None:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == expect, f"exit {proc.returncode}, expected {expect}\n{out[-3000:]}\n{err[-4000:]}"


def _reported(run_dir: Path) -> bool:
    rows = read_trials(run_dir / TRIALS_FILE) if (run_dir / TRIALS_FILE).exists() else []
    return any((r.get("iterations") or 0) >= 1 for r in rows)


def run_cell(cell: Cell, tmp_path: Path, cluster: str, env: dict[str, str]) -> Path:
    """The cell's sweep, run to its end as the cell says; returns its run dir."""
    storage = tmp_path / "runs"
    base = {"entry": cell.entry, "storage": str(storage), "address": cluster, "wandb": cell.wandb}
    cell_file = tmp_path / "cell.json"
    if cell.ending == "warm_start":  # an earlier sweep of the same space, then this one starts from it
        earlier = tmp_path / "earlier.json"
        earlier.write_text(json.dumps(base | {"doc": cell.doc() | {"name": "m0", "run_cap": 1}, "name": "m0"}))
        _finish(_driver("run", earlier, env), 0)
        base["warm_start"] = [str(storage / "m0")]
    cell_file.write_text(json.dumps(base | {"doc": cell.doc(), "name": "m"}))
    run_dir = storage / "m"
    proc = _driver("run", cell_file, env)
    if cell.ending in ("ctrl_c", "kill"):
        deadline = time.time() + 300
        while not _reported(run_dir):
            assert proc.poll() is None and time.time() < deadline, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT if cell.ending == "ctrl_c" else signal.SIGKILL)
        _finish(proc, 130 if cell.ending == "ctrl_c" else -signal.SIGKILL)
        proc = _driver("resume", cell_file, env)
    _finish(proc, 0)
    return run_dir


def check_cell(cell: Cell, run_dir: Path, tmp_path: Path) -> None:
    spec = read_spec(run_dir)
    rows = read_trials(run_dir / TRIALS_FILE)
    assert len(rows) == 2 and {r["status"] for r in rows} <= ENDED, [(r["status"], r.get("error")) for r in rows]
    for row in rows:
        _check_ranks(cell, spec, row)
        _check_epochs(cell, row)
    shown = _check_readers(cell, run_dir, tmp_path, rows)
    _check_objectives(cell, shown, rows)


def _check_ranks(cell: Cell, spec: Any, row: dict[str, Any]) -> None:
    """Every rank got the trial's config as its entry reads it, and its own torchrun variables."""
    flat = row["config"]
    expected = trial_config(spec, flat) if cell.entry in ("loop", "function") else wandb_config(spec, flat)
    workers = row["num_workers"]
    seen = [json.loads((Path(row["trial_dir"]) / f"seen.rank{r}.json").read_text()) for r in range(workers)]
    ports = set()
    for rank, s in enumerate(seen):
        assert s["config"] == json.loads(json.dumps(expected)), (rank, s["config"], expected)
        env = s["env"]
        assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"]) == (str(rank), str(rank), str(workers)), env
        assert env["LOCAL_WORLD_SIZE"] == str(workers) and env["GROUP_RANK"] == "0" and env["MASTER_ADDR"], env
        ports.add(env["MASTER_PORT"])
    assert len(ports) == 1 and None not in ports, ports  # one process group's master for all ranks


def _check_epochs(cell: Cell, row: dict[str, Any]) -> None:
    """Every epoch once, in order, after a resume too; with W&B offline, the trial's run logged them."""
    trial_dir = Path(row["trial_dir"])
    epochs = [int(json.loads(line)["epoch"]) for line in (trial_dir / "result.json").read_text().splitlines()]
    assert epochs == list(range(1, row["iterations"] + 1)), (row["trial_id"], epochs)
    if row["status"] == "done":
        assert row["iterations"] == 2
    if cell.wandb == "offline":
        from wandb_records import run_contents

        runs = [run_contents(f) for f in trial_dir.glob("wandb/offline-run-*/*.wandb")]
        logged = {int(h["epoch"]) for r in runs if r["run"].get("id") == row["trial_id"] for h in r["history"]}
        assert set(range(1, row["iterations"] + 1)) <= logged, (row["trial_id"], sorted(logged))


def _cli(*args: str) -> str:
    """``raysweep ARGS`` in this process, its output; a reader that raises, or exits other than 0, fails."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(list(args))
    assert code == 0, (args, out.getvalue())
    return out.getvalue()


def _check_readers(cell: Cell, run_dir: Path, tmp_path: Path, rows: list[dict[str, Any]]) -> dict[str, Any]:
    ids = {r["trial_id"] for r in rows}
    table = _cli("show", str(run_dir))
    assert all(i in table for i in ids), table
    shown = json.loads(_cli("show", str(run_dir), "--json"))
    csv = _cli("show", str(run_dir), "--csv").splitlines()
    frame = load(run_dir).dataframe()
    assert {t["trial_id"] for t in shown["trials"]} == ids == set(frame["trial_id"]) and len(csv) == 3
    assert [t["trial_id"] for t in shown["trials"]] == list(frame["trial_id"])  # one order, best first
    report = tmp_path / "report.html"
    _cli("report", str(run_dir), "-o", str(report))
    assert report.stat().st_size > 10_000
    spec_file = tmp_path / "spec.yaml"  # the cell's file; a function's sweep named by its loop (validate takes files)
    doc = cell.doc()
    if cell.entry in ("function", "wandb_function"):
        doc["raysweep"]["train_loop"] = "tests.support.matrix.entries:train"
    spec_file.write_text(yaml.safe_dump(doc))
    sampled = _cli("validate", str(spec_file), "--sample", "2", "--seed", "0").splitlines()
    assert len(sampled) == 2 and all(json.loads(line) for line in sampled), sampled
    return shown


def _check_objectives(cell: Cell, shown: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """Ranked by what the sweep optimizes: its one metric, the Pareto front, or creation order."""
    trials = shown["trials"]
    if cell.objectives == "one":
        assert shown["metric"] == "loss" and (shown["best"] is None or shown["best"] == trials[0])
    elif cell.objectives == "several":
        assert [o["name"] for o in shown["objectives"]] == ["loss", "cost_hours"]
        assert all("pareto" in t for t in trials) and any(t["pareto"] for t in trials if t["status"] == "done")
    else:
        assert shown["metric"] is None and shown["best"] is None
        assert [t["trial_id"] for t in trials] == [r["trial_id"] for r in sorted(rows, key=lambda r: r["created"])]
