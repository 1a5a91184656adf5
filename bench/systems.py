"""The five ways of running the same list of trials that the benchmark compares.

(a) raysweep (``run_sweep`` on a spec), (b) the pattern of Ray's docs (a Tune function
trainable that builds a ``TorchTrainer`` with ``TuneReportCallback``, ``OptunaSearch`` and
``ASHAScheduler``), (c) the "seeds' way" (one sequential agent: Optuna asks, ``torchrun``
runs the trial), (d) a plain Tune function trainable with no Train (1 worker only: the floor),
(e) a plain Ray actor per trial, no Tune (1 worker only: what Ray itself costs a lone trial).

Every runner takes the same trials (worker count + the nested config the loop receives) and
returns spans (start, end) per trial, the wall time, peak memory and the loop's event log.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import yaml

from bench.common import REPO, RssSampler, read_events
from raysweep.runs.files import TRIALS_FILE, read_trials
from raysweep.spec import grid_points, load_spec, trial_config


def spec_trials(spec_doc: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    """Write ``spec_doc`` as a sweep file, load it with raysweep, and expand its grid.

    Every system then runs exactly raysweep's configs, in raysweep's order.
    """
    path = Path(tempfile.mkdtemp(prefix="raysweep_bench_spec_")) / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_doc, sort_keys=False))
    spec = load_spec(path)
    trials = [
        {"workers": int(flat.get("num_gpus", 1)), "config": trial_config(spec, flat)} for flat in grid_points(spec)
    ]
    return spec, trials


def _with_events(trials: list[dict[str, Any]], events: str) -> list[dict[str, Any]]:
    return [{**t, "config": {**t["config"], "bench_events": events, "bench_tag": i}} for i, t in enumerate(trials)]


def _finish(
    started: float, spans: list[tuple[float, float]], events: str, rss: RssSampler, extra: dict | None = None
) -> dict[str, Any]:
    ev = read_events(events)
    return {
        "total_s": time.time() - started,
        "spans": spans,
        "events": ev,
        **rss.as_dict(),
        **(extra or {}),
    }


# --- (a) raysweep ------------------------------------------------------------------------------


def run_raysweep(spec_doc: dict[str, Any], loop: str, max_concurrent: int | None = None) -> dict[str, Any]:
    """raysweep's own engine on the spec (grid, its scheduler), W&B off."""
    from raysweep.driver.request import RunRequest
    from raysweep.driver.sweep import run_sweep

    workdir = Path(tempfile.mkdtemp(prefix="raysweep_bench_a_"))
    events = str(workdir / "events.jsonl")
    doc = {**spec_doc, "train_loop": f"bench.loops:{loop}"}
    doc["base_config"] = {**doc.get("base_config", {}), "bench_events": events}
    spec, _ = spec_trials(doc)
    started = time.time()
    with RssSampler() as rss:
        request = RunRequest(name="a", storage=workdir, max_concurrent=max_concurrent, wandb="disabled", quiet=True)
        code = run_sweep(spec, request)
    rows = read_trials(workdir / "a" / TRIALS_FILE)
    spans = [(r["start"], r["end"]) for r in rows if "end" in r]
    failed = [r.get("error", "")[-500:] for r in rows if r.get("status") == "failed"]
    extra = {"exit_code": code, "failed": failed, "run_dir": str(workdir / "a"), "rows": rows}
    return _finish(started, spans, events, rss, extra)


# --- (b) Ray's documented pattern and (d) plain Tune --------------------------------------------


def _docs_worker(config: dict[str, Any]) -> None:
    """Every TorchTrainer worker: the same loop, reporting through ray.train."""
    from bench import loops
    from raysweep import trial
    from raysweep.trial.backends import TrainBackend

    trial.use(TrainBackend())  # the loop's report() goes straight to ray.train.report
    getattr(loops, config["loop"])(config["config"])


def _docs_trial(config: dict[str, Any], trials: list, loop: str, storage: str) -> None:
    """The Tune function trainable of Ray's Train V2 + Tune docs: build a TorchTrainer, fit it."""
    from ray import tune
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer
    from ray.tune.integration.ray_train import TuneReportCallback

    t = trials[config["index"]]
    TorchTrainer(
        _docs_worker,
        train_loop_config={"loop": loop, "config": t["config"]},
        scaling_config=ScalingConfig(num_workers=t["workers"], use_gpu=False),
        run_config=RunConfig(
            name=tune.get_context().get_trial_id(), storage_path=storage, callbacks=[TuneReportCallback()]
        ),
    ).fit()


def _plain_trial(config: dict[str, Any], trials: list, loop: str, storage: str) -> None:  # noqa: ARG001
    """(d): the loop inside the Tune trial, reporting through ray.tune."""
    from bench import loops
    from raysweep import trial
    from raysweep.trial.backends import TuneBackend

    trial.use(TuneBackend())
    getattr(loops, loop)(trials[config["index"]]["config"])


@contextlib.contextmanager
def ray_defaults() -> Iterator[None]:
    """(b) and (d) run as a user writes them, with Ray's defaults: the Ray they start must not
    inherit what a raysweep sweep earlier in this process set (its Train poll interval)."""
    from raysweep.env import TRAIN_POLL

    saved = os.environ.pop(TRAIN_POLL, None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ[TRAIN_POLL] = saved


def start_local_ray(dashboard: bool) -> None:
    """A Ray of its own on this machine's cores ("local": a bare ray.init() joins any cluster
    `ray start` left on this machine)."""
    import ray

    ray.init(
        address="local",
        num_cpus=os.cpu_count() or 1,
        include_dashboard=dashboard,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}},
    )


def _tune_run(
    fn: Any,
    resources: dict[str, float],
    trials: list[dict[str, Any]],
    loop: str,
    metric: str,
    mode: str,
    max_concurrent: int,
    searcher: bool,
    events: str,
    storage: Path,
) -> dict[str, Any]:
    import ray
    from ray import tune

    spans: dict[str, list[float]] = {}

    class Spans(tune.Callback):
        def on_trial_start(self, iteration, trials, trial, **info):  # noqa: ANN001, ARG002
            spans[trial.trial_id] = [time.time()]

        def on_trial_complete(self, iteration, trials, trial, **info):  # noqa: ANN001, ARG002
            spans[trial.trial_id].append(time.time())

        on_trial_error = on_trial_complete

    n = len(trials)
    tune_config: dict[str, Any] = {"metric": metric, "mode": mode, "max_concurrent_trials": max_concurrent}
    if searcher:
        import optuna
        from ray.tune.schedulers import ASHAScheduler
        from ray.tune.search.optuna import OptunaSearch

        # The fixed trials go in as points_to_evaluate; ASHA's grace period is beyond the last
        # report, so it stops nothing and the work done is the same as (a)'s and (c)'s.
        space = {"index": optuna.distributions.CategoricalDistribution(list(range(n)))}
        tune_config["search_alg"] = OptunaSearch(
            space=space, metric=metric, mode=mode, points_to_evaluate=[{"index": i} for i in range(n)]
        )
        tune_config["scheduler"] = ASHAScheduler(grace_period=10_000, max_t=10_001)
        tune_config["num_samples"] = n
        param_space: dict[str, Any] = {}
    else:
        param_space = {"index": tune.grid_search(list(range(n)))}
    trainable = tune.with_resources(
        tune.with_parameters(fn, trials=trials, loop=loop, storage=str(storage / "train")), resources
    )
    started = time.time()
    errors: list[str] = []
    with RssSampler() as rss, ray_defaults():
        start_local_ray(dashboard=False)
        try:
            grid = tune.Tuner(
                trainable,
                param_space=param_space,
                tune_config=tune.TuneConfig(**tune_config),
                run_config=tune.RunConfig(storage_path=str(storage / "tune"), verbose=0, callbacks=[Spans()]),
            ).fit()
            errors = [str(r.error)[-500:] for r in grid if r.error]
        finally:
            ray.shutdown()
    return _finish(started, [(s[0], s[1]) for s in spans.values() if len(s) == 2], events, rss, {"failed": errors})


def run_docs_pattern(
    trials: list[dict[str, Any]], loop: str, metric: str, mode: str, max_concurrent: int = 2
) -> dict[str, Any]:
    """(b): trial reserves 0 CPU (its workers take 1 CPU each), at most ``max_concurrent`` trials."""
    workdir = Path(tempfile.mkdtemp(prefix="raysweep_bench_b_"))
    events = str(workdir / "events.jsonl")
    # Tune rejects an empty bundle; a token of memory makes the trial itself hold no CPU.
    resources = {"cpu": 0, "memory": 1}
    return _tune_run(
        _docs_trial, resources, _with_events(trials, events), loop, metric, mode, max_concurrent, True, events, workdir
    )


def run_plain_tune(
    trials: list[dict[str, Any]], loop: str, metric: str, mode: str, max_concurrent: int = 2
) -> dict[str, Any]:
    """(d): one CPU per trial, the loop in the trial process; 1-worker trials only."""
    if any(t["workers"] != 1 for t in trials):
        raise ValueError("plain Tune runs 1-worker trials only")
    workdir = Path(tempfile.mkdtemp(prefix="raysweep_bench_d_"))
    events = str(workdir / "events.jsonl")
    return _tune_run(
        _plain_trial,
        {"cpu": 1},
        _with_events(trials, events),
        loop,
        metric,
        mode,
        max_concurrent,
        False,
        events,
        workdir,
    )


class _BareRank:
    """(e)'s actor: the loop as a lone raysweep rank runs it, on every core of the node."""

    def run(self, loop: str, config: dict[str, Any]) -> None:
        import torch

        from bench import loops
        from raysweep import trial

        torch.set_num_threads(os.cpu_count() or 1)  # Ray set OMP_NUM_THREADS=1 for a 1-CPU actor
        trial.run_local(getattr(loops, loop), config)

    def pid(self) -> int:
        return os.getpid()


@contextlib.contextmanager
def bare_ray() -> Iterator[None]:
    """(e)'s Ray, started as raysweep's embedded one (dashboard on, workers at nice 0), shut down after."""
    import ray

    from raysweep.env import WORKER_NICENESS

    with mock.patch.dict(os.environ, {WORKER_NICENESS: "0"}):
        start_local_ray(dashboard=True)
        try:
            yield
        finally:
            ray.shutdown()


def start_bare_rank() -> Any:
    """(e)'s actor, on ``bare_ray``: a 1-CPU actor that runs a loop as a lone rank."""
    import ray

    return ray.remote(num_cpus=1)(_BareRank).remote()


def run_bare_actor(trials: list[dict[str, Any]], loop: str) -> dict[str, Any]:
    """(e): each 1-worker trial in a plain Ray actor on a Ray started as raysweep's embedded one
    (dashboard on, workers at nice 0), no Tune, no pool: what running inside Ray costs a lone
    trial, so that raysweep's own cost is (a)/(e) and Ray's is (e)/(c)."""
    import ray

    if any(t["workers"] != 1 for t in trials):
        raise ValueError("the bare actor runs 1-worker trials only")
    workdir = Path(tempfile.mkdtemp(prefix="raysweep_bench_e_"))
    events = str(workdir / "events.jsonl")
    spans, failed = [], []
    started = time.time()
    with RssSampler() as rss, bare_ray():
        for t in _with_events(trials, events):
            t0, actor = time.time(), start_bare_rank()
            try:
                ray.get(actor.run.remote(loop, t["config"]))
            except ray.exceptions.RayError as e:
                failed.append(str(e)[-500:])
            spans.append((t0, time.time()))
            ray.kill(actor)
    return _finish(started, spans, events, rss, {"failed": failed})


# torchrun as a module: a venv made beside a node's own torch has no torchrun script of its own.
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


# --- (c) the seeds' way: Optuna agent + torchrun ---------------------------------------------------


def run_torchrun_agent(trials: list[dict[str, Any]], loop: str, metric: str, mode: str) -> dict[str, Any]:
    """One agent, one trial at a time: Optuna hands out the config, torchrun runs it."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    workdir = Path(tempfile.mkdtemp(prefix="raysweep_bench_c_"))
    events = str(workdir / "events.jsonl")
    study = optuna.create_study(direction="maximize" if mode == "max" else "minimize")
    trials = _with_events(trials, events)
    for i in range(len(trials)):
        study.enqueue_trial({"index": i})
    spans, failed = [], []
    started = time.time()
    with RssSampler() as rss:
        for i in range(len(trials)):
            t0 = time.time()
            ask = study.ask({"index": optuna.distributions.IntDistribution(0, len(trials) - 1)})
            t = trials[ask.params["index"]]
            cfg, out = workdir / f"config_{i}.json", workdir / f"out_{i}.json"
            cfg.write_text(json.dumps(t["config"]))
            proc = subprocess.run(
                [
                    *TORCHRUN,
                    "--standalone",
                    f"--nproc_per_node={t['workers']}",
                    str(REPO / "bench" / "torchrun_entry.py"),
                    loop,
                    str(cfg),
                    str(out),
                ],
                cwd=REPO,
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0 or not out.exists():
                failed.append(proc.stderr[-500:])
                study.tell(ask, state=optuna.trial.TrialState.FAIL)
            else:
                reports = json.loads(out.read_text())
                study.tell(ask, reports[-1][metric])
            spans.append((t0, time.time()))
    return _finish(started, spans, events, rss, {"failed": failed})


# --- (c) the seeds' way exactly: W&B's engine proposes, torchrun runs, one trial at a time -------

WANDB_PYTHON = REPO / ".venv-wandb" / "bin" / "python"  # W&B's engine (PyPI sweeps) pins numpy<2: its own venv
WANDB_ENGINE = REPO / "tests" / "support" / "wandb_oracle.py"  # the engine over JSON lines, as the oracle tests use it


class WandbEngine:
    """W&B's sweep engine in its own process: ``ask(op=..., ...)`` sends one request, returns the answer."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [str(WANDB_PYTHON), str(WANDB_ENGINE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def ask(self, **request: Any) -> dict[str, Any]:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        if "error" in answer:
            raise RuntimeError(f"W&B's engine: {answer['error']}")
        return answer

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


def _history(events: str, tag: int) -> list[dict[str, Any]]:
    """What rank 0 of trial ``tag`` has logged so far, one dict per report (W&B's run history)."""
    return [
        e["metrics"] for e in read_events(events) if e["kind"] == "report" and e.get("tag") == tag and e["rank"] == 0
    ]


def run_wandb_agent(
    spec_doc: dict[str, Any], loop: str, seed: int, stop_period_s: float, budget: int, stopped_state: str = "killed"
) -> dict[str, Any]:
    """One ``wandb agent``: W&B's engine proposes each configuration (its bayes or random method,
    given every earlier run), ``torchrun`` runs it, and every ``stop_period_s`` W&B's hyperband
    decides on the running trial from all runs' histories, as W&B's server does periodically:
    on the sweep's clock, not the trial's, so a trial shorter than the period may meet no check
    (the agent then ends the process: the run's state becomes ``stopped_state``)."""
    workdir = Path(tempfile.mkdtemp(prefix="raysweep_bench_c_wandb_"))
    events = str(workdir / "events.jsonl")
    spec, _ = spec_trials(spec_doc)
    sweep = {k: spec_doc[k] for k in ("method", "metric", "parameters", "early_terminate") if k in spec_doc}
    metric = sweep["metric"]["name"]
    engine = WandbEngine()
    runs: list[dict[str, Any]] = []
    spans, rows, failed = [], [], []
    started = time.time()
    next_check = started + stop_period_s
    try:
        with RssSampler() as rss:
            while len(runs) < budget:
                point = engine.ask(op="next_run", config=sweep, runs=runs, seed=seed if not runs else None)["point"]
                if point is None:
                    break
                tag = len(runs)
                run = {"name": f"run-{tag}", "state": "running", "config": point, "history": []}
                runs.append(run)
                cfg, out = workdir / f"config_{tag}.json", workdir / f"out_{tag}.json"
                cfg.write_text(json.dumps({**trial_config(spec, point), "bench_events": events, "bench_tag": tag}))
                t0 = time.time()
                with open(workdir / f"stderr_{tag}.log", "w") as err:
                    proc = subprocess.Popen(
                        [
                            *TORCHRUN,
                            "--standalone",
                            f"--nproc_per_node={int(point.get('num_gpus', 1))}",
                            str(REPO / "bench" / "torchrun_entry.py"),
                            loop,
                            str(cfg),
                            str(out),
                        ],
                        cwd=REPO,
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                        start_new_session=True,
                    )
                stopped = False
                while proc.poll() is None:
                    time.sleep(0.2)
                    if "early_terminate" in sweep and time.time() >= next_check:
                        next_check += stop_period_s * math.ceil((time.time() - next_check) / stop_period_s + 1e-9)
                        run["history"] = _history(events, tag)
                        histories = [
                            {
                                "name": r["name"],
                                "state": r["state"],
                                "history": [h[metric] for h in r["history"] if metric in h],
                            }
                            for r in runs
                        ]
                        if run["name"] in engine.ask(op="hyperband", config=sweep, runs=histories)["stop"]:
                            stopped = True
                            os.killpg(proc.pid, signal.SIGTERM)
                            proc.wait()
                end = time.time()
                run["history"] = _history(events, tag)
                run["state"] = stopped_state if stopped else ("finished" if proc.returncode == 0 else "failed")
                if run["state"] == "failed":
                    failed.append((workdir / f"stderr_{tag}.log").read_text()[-500:])
                spans.append((t0, end))
                if run["history"]:
                    rows.append(
                        {
                            "start": t0,
                            "end": end,
                            "metrics": run["history"][-1],
                            "iterations": len(run["history"]),
                            "config": point,
                            "status": "stopped" if stopped else "done",
                        }
                    )
    finally:
        engine.close()
    return _finish(
        started,
        spans,
        events,
        rss,
        {"failed": failed, "rows": rows, "stopped": sum(r["state"] == stopped_state for r in runs)},
    )
