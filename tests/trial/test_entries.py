"""The entry kinds (``raysweep/trial/entries.py``), with no Ray: which kind serves a sweep, what
each checks before a cluster starts, what it builds for a trial, and a Python kind run as one
rank. The kinds' runs on real clusters are the warm-worker, program and API tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import raysweep
from raysweep.errors import UserError
from raysweep.placement import Capacity, Node
from raysweep.spec import parse_spec
from raysweep.trial.backends import LocalBackend
from raysweep.trial.entries import KINDS, Function, Loop, Script, WandbFunction, kind_of
from raysweep.trial.job import Sweep, TrialJob
from raysweep.trial.job_builder import build_job
from raysweep.trial.rank import ALONE
from raysweep.words import Runner

BASE = {"method": "grid", "metric": {"name": "score", "goal": "minimize"}}
LOOP = {"train_loop": "train_loops.smoke:train"}
PROGRAM = {"program": "train.py"}


def spec_of(keys: dict, function: str | None = None, parameters: dict | None = None):
    return parse_spec({**BASE, **keys, "parameters": parameters or {"x": {"value": 1}}}, function=function)


@pytest.mark.parametrize(
    ("keys", "function", "kind"),
    [
        (LOOP, None, Loop),
        (PROGRAM, None, Script),
        (PROGRAM, "raysweep", Function),  # a function replaces the file's script, as wandb.agent(function=)
        (LOOP, "raysweep", Function),
        (PROGRAM, "wandb", WandbFunction),
        (LOOP, "wandb", WandbFunction),
    ],
)
def test_exactly_one_kind_serves_each_sweep(keys, function, kind):
    spec = spec_of(keys, function)
    assert [k for k in KINDS if k.serves(spec)] == [kind]
    assert kind_of(spec) is kind


@pytest.mark.parametrize(
    ("kind", "own_process", "own_wandb_run"),
    [(Loop, False, False), (Function, False, False), (WandbFunction, False, True), (Script, True, True)],
)
def test_what_the_driver_reads_of_each_kind(kind, own_process, own_wandb_run):
    """A script runs as processes of its own (its own group and port, no actor reuse, a 1-worker
    trial in the Tune trial's process); scripts and W&B-style functions log their own W&B runs."""
    assert kind.runs_own_process is own_process
    assert kind.calls_wandb_init is own_wandb_run


def test_a_loop_or_script_that_does_not_exist_is_the_users_error_before_a_cluster_starts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="train_loop 'nope:train' could not be imported"):
        Loop.check(spec_of({"train_loop": "nope:train"}))
    with pytest.raises(UserError, match=r"program: 'train.py' is not a file \(it is resolved from"):
        Script.check(spec_of(PROGRAM))
    (tmp_path / "train.py").write_text("")
    Script.check(spec_of(PROGRAM))  # there now
    Function.check(spec_of(PROGRAM, "raysweep"))  # a function given by value has nothing to check


def _job(tmp_path: Path, spec, function=None) -> TrialJob:
    capacity = Capacity((Node("n", "127.0.0.1", 2, 2.0),), False, 1.0, True)
    sweep = Sweep(
        spec=spec,
        capacity=capacity,
        run_dir=str(tmp_path),
        name="s",
        workdir=str(tmp_path),
        wandb_mode="offline",
        function=function,
        runners={1: Runner.IN_PROCESS},
    )
    return build_job(sweep, {"x": 3, "opt.lr": 0.1}, "t1", str(tmp_path / "t1"))


def test_each_kind_builds_its_trials_entry_from_the_trials_values(tmp_path):
    parameters = {"x": {"value": 3}, "opt": {"parameters": {"lr": {"value": 0.1}}}}
    loop = _job(tmp_path, spec_of(LOOP, parameters=parameters))
    assert loop.entry == Loop("train_loops.smoke:train", {"x": 3, "opt": {"lr": 0.1}})  # nested, as the loop reads it
    assert loop.attempt == "" and loop.group_backend == "gloo"

    script = _job(tmp_path, spec_of(PROGRAM, parameters=parameters))
    assert isinstance(script.entry, Script) and script.entry.launch.params == {"x": 3, "opt": {"lr": 0.1}}
    assert Path(script.entry.wandb.param_file).is_file()  # the YAML wandb.init reads, written
    assert json.loads(Path(script.entry.launch.args_json_file).read_text()) == {"x": 3, "opt": {"lr": 0.1}}
    assert script.attempt != "" and script.group_backend is None  # a fresh metrics file; its own group

    def main() -> None: ...

    wandb_style = _job(tmp_path / "w", spec_of(LOOP, "wandb", parameters=parameters), function=main)
    assert isinstance(wandb_style.entry, WandbFunction) and wandb_style.entry.function is main
    param_file = Path(wandb_style.entry.wandb.param_file)
    assert wandb_style.entry.wandb.group == "s" and param_file.is_file()
    assert list(param_file.parent.iterdir()) == [param_file]  # no script's args file beside it


def test_a_python_kind_runs_as_a_rank_and_reports_through_its_backend(tmp_path):
    def train(config: dict) -> None:
        raysweep.report({"score": config["x"] * 2})

    job = _job(tmp_path, spec_of(LOOP, "raysweep"), function=train)
    backend = LocalBackend()
    job.entry.run(job, backend, 0, ALONE)
    assert backend.reports == [{"score": 6}]


def test_a_python_kind_sees_torchruns_variables_while_it_runs_and_not_after(tmp_path, monkeypatch):
    """Guarantee: "Every rank of a trial reads torchrun's variables as its own (`RANK`, `LOCAL_RANK`,
    `WORLD_SIZE`, `LOCAL_WORLD_SIZE`, `GROUP_RANK`, `NODE_RANK`, `MASTER_ADDR`, `MASTER_PORT`), whatever
    it runs (a train loop, a function of either style, a `program:` script) and wherever (warm workers,
    a `TorchTrainer`, the Tune trial's own process); a warm worker gets its environment back when the
    rank ends."

    Here the Python kinds' rank, by hand; on warm workers and under a TorchTrainer, for every kind
    and a script too, the matrix (tests/end_to_end/test_matrix_*.py)."""
    import os

    from raysweep.placement import RankPlace

    monkeypatch.setenv("WORLD_SIZE", "99")  # set before the rank: put back after it
    monkeypatch.delenv("RANK", raising=False)
    seen: list[dict] = []

    def train(config: dict) -> None:
        names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "MASTER_ADDR")
        seen.append({k: os.environ.get(k) for k in (*names, "MASTER_PORT")})
        raysweep.report({"score": 1.0})

    from dataclasses import replace

    job = replace(_job(tmp_path, spec_of(LOOP, "raysweep"), function=train), world_size=4)  # rank 2 of 4
    place = RankPlace("n2", "10.0.0.2", node_rank=1, local_rank=0, local_world_size=2)
    job.entry.run(job, LocalBackend(), 2, place, master=("10.0.0.1", 29511))
    assert seen == [
        {
            "RANK": "2",
            "LOCAL_RANK": "0",
            "WORLD_SIZE": "4",
            "LOCAL_WORLD_SIZE": "2",
            "GROUP_RANK": "1",
            "NODE_RANK": "1",
            "MASTER_ADDR": "10.0.0.1",
            "MASTER_PORT": "29511",
        }
    ]
    assert os.environ["WORLD_SIZE"] == "99" and "RANK" not in os.environ and "NODE_RANK" not in os.environ
