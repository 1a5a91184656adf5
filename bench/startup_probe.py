"""Where a 2-worker TorchTrainer trial's time goes: one Tune trial -> TorchTrainer.fit, timed.

Runs N sequential trials of a trivial loop (3 reports, no compute) the way raysweep's
trainable does, with the knobs given on the command line, and prints per-trial seconds plus
the phases from the Train controller's log. Used to find and check the start-up fix:

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.startup_probe --trials 3 \
        --env RAY_TRAIN_HEALTH_CHECK_INTERVAL_S=0.1
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time
from pathlib import Path


def _loop(config: dict) -> None:
    import ray.train

    for i in range(3):
        ray.train.report({"score": float(i), "it": i})


def _trial(config: dict) -> None:
    os.environ.update(config["env"])  # Train reads its knobs from the process that calls fit()
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer
    from ray.tune.integration.ray_train import TuneReportCallback

    TorchTrainer(
        _loop,
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
        torch_config=TorchConfig(backend="gloo"),
        run_config=RunConfig(name=f"t{config['i']}", storage_path=config["storage"], callbacks=[TuneReportCallback()]),
    ).fit()


def controller_phases(session_dir: Path) -> list[str]:
    """The controller log lines that carry a duration, for every trial, in order."""
    lines = []
    for f in sorted((session_dir / "logs" / "train").glob("ray-train-sys-controller-*.log"), key=os.path.getmtime):
        for raw in f.read_text().splitlines():
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            text = msg.get("message", "").splitlines()[0]
            if re.search(r"in \d+\.\d+s|Requesting|Shutting down|PlacementGroupCleaner launched", text):
                lines.append(f"{msg.get('asctime')} {text}")
    return lines


def _parse_variant(text: str) -> tuple[str, dict[str, str]]:
    name, _, knobs = text.partition(":")
    return name, dict(kv.split("=", 1) for kv in knobs.split(",") if kv)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3, help="trials per variant")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:K=V,K=V",
        help="knobs set in the trial process only; variants are interleaved trial by trial",
    )
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--reuse-actors", action="store_true", help="TuneConfig(reuse_actors=True)")
    parser.add_argument("--system-config", default="{}", help="JSON for ray.init(_system_config=...)")
    args = parser.parse_args()
    env = dict(kv.split("=", 1) for kv in args.env)
    os.environ.update(env)

    import tempfile

    import ray
    from ray import tune

    started: dict[str, float] = {}
    durations: dict[int, float] = {}

    class Timer(tune.Callback):
        def on_trial_start(self, iteration, trials, trial, **info):  # noqa: ANN001, ARG002
            started[trial.trial_id] = time.time()

        def on_trial_complete(self, iteration, trials, trial, **info):  # noqa: ANN001, ARG002
            durations[trial.config["i"]] = time.time() - started[trial.trial_id]

    variants = [("base", {})] + [_parse_variant(v) for v in args.variant]
    plan = [variants[i % len(variants)] for i in range(args.trials * len(variants))]
    storage = tempfile.mkdtemp(prefix="raysweep_probe_")
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": env},
        _system_config=json.loads(args.system_config),
    )
    session_dir = Path(ray._private.worker.global_worker.node.get_session_dir_path())  # noqa: SLF001
    t0 = time.time()
    try:
        tune.Tuner(
            tune.with_resources(_trial, {"cpu": 0, "memory": 1}),
            param_space={
                "i": tune.grid_search(list(range(len(plan)))),
                "storage": storage,
                "env": tune.sample_from(lambda spec: plan[spec.config.i][1]),
            },
            tune_config=tune.TuneConfig(max_concurrent_trials=1, reuse_actors=args.reuse_actors),
            run_config=tune.RunConfig(storage_path=storage, verbose=0, callbacks=[Timer()]),
        ).fit()
    finally:
        wall = time.time() - t0
        ray.shutdown()
    for line in controller_phases(session_dir):
        print("  ", line)
    by_variant: dict[str, list[float]] = {}
    for i, d in sorted(durations.items()):
        name = plan[i][0]
        by_variant.setdefault(name, []).append(round(d, 2))
    print(
        json.dumps(
            {
                "env": env,
                "reuse_actors": args.reuse_actors,
                "system_config": json.loads(args.system_config),
                "variants": dict(variants),
                "trial_s": by_variant,
                "median_s": {k: round(statistics.median(v), 2) for k, v in by_variant.items()},
                "wall_s": round(wall, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
