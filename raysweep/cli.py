"""``raysweep validate | run | slurm | show | resume | report | publish``: the command line.

User mistakes (``UserError``) become one paragraph on stderr and exit code 2; no traceback.
Ray and torch are imported only by the commands that need them, so ``validate`` is quick.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from raysweep.errors import UserError
from raysweep.values import safe_name


def _validate(args: argparse.Namespace) -> int:
    from raysweep.search.wandb_optimizer import checked
    from raysweep.spec import load_spec, trial_config
    from raysweep.spec.space import wandb_config
    from raysweep.spec.summary import summary_json, summary_text

    spec = load_spec(args.spec, _with_epoch_seconds(args), strict=args.strict)
    _print_notes(spec)
    spec, said = checked(spec)  # what W&B's sweep scheduler refuses at start, refused now (exit 2)
    for line in said:
        print(f"warning: W&B's sweep scheduler: {line}", file=sys.stderr)
    if args.plan:
        return _plan(spec, args)
    if args.sample:
        from raysweep.search.preview import first_configs  # Tune's and Optuna's samplers, as run draws
        from raysweep.spec.model import draw_seed

        # What the loop gets (its config, dotted names nested), or what a script gets: W&B's
        # names as written (`--model.n_layers=4`, wandb.config["model.n_layers"]).
        shown = wandb_config if spec.runs_program else trial_config
        seed = args.seed if args.seed is not None else spec.seed
        if seed is None:
            seed = draw_seed()
            print(
                f"seed {seed}: this file fixes no seed, so each run draws its own; `run --seed {seed}` tries these",
                file=sys.stderr,
            )
        else:
            print(f"seed {seed}: `run` with this seed tries these", file=sys.stderr)
        for flat in first_configs(spec, args.sample, seed):
            print(json.dumps(shown(spec, flat)))
    elif args.json:
        print(json.dumps(summary_json(spec)))
    else:
        print(summary_text(spec))
    return 0


def _with_epoch_seconds(args: argparse.Namespace) -> list[str]:
    """``--epoch-seconds S`` is ``--set raysweep.budget.epoch_seconds=S``."""
    if getattr(args, "epoch_seconds", None) is None:
        return list(args.set)
    if not args.epoch_seconds > 0:
        raise UserError(f"--epoch-seconds must be a number of seconds > 0, got {args.epoch_seconds!r}")
    return [*args.set, f"raysweep.budget.epoch_seconds={args.epoch_seconds}"]


def _plan(spec: Any, args: argparse.Namespace) -> int:
    """``validate --plan``: what the sweep will cost, before anything runs."""
    from raysweep.driver.request import check_budget, trials_to_run
    from raysweep.search.plan import cheapest_trial_hours, plan

    trials = trials_to_run(spec, args.count, " for a plan")
    check_budget(args.budget_gpu_hours)
    planned = plan(spec, trials, spec.budget.epoch_seconds, spec.resources.use_gpu is not False)
    if args.json:
        print(json.dumps(planned.to_json()))
        return 0
    print("\n".join(planned.lines(args.slots)))
    budget = args.budget_gpu_hours or spec.budget.gpu_hours
    if budget and planned.hours is not None:
        cheapest = cheapest_trial_hours(spec, spec.budget.epoch_seconds)
        verdict = "fits" if planned.hours <= budget else f"runs out after about {budget / planned.hours:.0%} of it"
        print(f"plan: the budget of {budget:g} {planned.unit} {verdict}; the cheapest trial costs {cheapest:.3g}")
    return 0


def _print_notes(spec: object) -> None:
    for note in getattr(spec, "notes", ()):
        print(note, file=sys.stderr)


def _run(args: argparse.Namespace) -> int:
    from dataclasses import fields

    from raysweep.api import start
    from raysweep.driver.request import RunRequest

    args.set = _with_epoch_seconds(args)
    flags = {f.name: getattr(args, f.name) for f in fields(RunRequest) if hasattr(args, f.name)}
    flags["warm_start"] = tuple(flags.get("warm_start") or ())
    code, _ = start(args.spec, None, RunRequest(**flags, exit_at_once=True))
    return code


def _slurm(args: argparse.Namespace) -> int:
    import shlex
    from pathlib import Path

    from raysweep.slurm import SlurmJob, check_sizes, render
    from raysweep.spec import load_spec

    for flag in ("--address", "--gpus", "--dashboard-host"):
        if any(a == flag or a.startswith(flag + "=") for a in args.run_args):
            raise UserError(
                f"the batch script starts its own Ray and passes --address; leave {flag} out of the arguments after --"
            )
    run_args = build_parser().parse_args(["run", args.spec, *args.run_args])  # bad run flags: exit 2 now
    spec = load_spec(args.spec, run_args.set)
    name = args.job_name or spec.name or Path(args.spec).stem
    job = SlurmJob(
        spec=args.spec,
        run_args=tuple(args.run_args),
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        cpus_per_node=args.cpus_per_node,
        cpus_per_worker=spec.resources.cpus_per_worker,
        time=args.time,
        partition=args.partition,
        account=args.account,
        job_name=safe_name(name) or "raysweep",
        port=args.port,
        sbatch=tuple(args.sbatch),
        requeue=args.requeue,
    )
    note = check_sizes(job, spec.world_sizes)
    if note:
        print(note, file=sys.stderr)
    script = render(job, shlex.join(["raysweep", *args.argv]))
    if not args.output:
        sys.stdout.write(script)
        return 0
    Path(args.output).write_text(script)
    Path(args.output).chmod(0o755)
    print(f"wrote {args.output}; submit it from this directory: sbatch {shlex.quote(args.output)}")
    return 0


def _resume(args: argparse.Namespace) -> int:
    from raysweep.driver.sweep import resume_sweep

    return resume_sweep(
        args.run,
        storage=args.storage,
        address=args.address,
        quiet=args.quiet,
        retry_failed=args.retry_failed,
        budget_gpu_hours=args.budget_gpu_hours,
    )


def _show(args: argparse.Namespace) -> int:
    from raysweep.runs.show import render_csv, render_table, resolve_run_dir
    from raysweep.runs.storage import held
    from raysweep.runs.sweep_results import load_results

    run_dir = resolve_run_dir(args.run, args.storage)
    results = load_results(run_dir)
    total = len(results.trials)
    if args.top:
        results = results.top(args.top)
    if args.json:
        print(json.dumps(results.to_json() | {"storage": held(run_dir).to_json()}, default=str))
    elif args.csv:
        sys.stdout.write(render_csv(results))
    else:
        print(render_table(results, of=total))
        print(f"storage: {held(run_dir).text()}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from raysweep.runs.html_report import build_report
    from raysweep.runs.show import resolve_run_dir

    run_dir = resolve_run_dir(args.run, args.storage)
    out = build_report(run_dir, args.output or run_dir / "report.html", png_dir=args.png)
    print(f"report written to {out}" + (f"; PNGs in {args.png}" if args.png else ""))
    return 0


def _publish(args: argparse.Namespace) -> int:
    from raysweep.runs.publish import publish
    from raysweep.runs.show import resolve_run_dir

    return publish(resolve_run_dir(args.run, args.storage))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="raysweep", description="W&B-style sweeps on Ray Tune, each trial a DDP job.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_validate, _add_run, _add_slurm, _add_resume, _add_readers):
        add(sub)
    return parser


def _add_validate(sub: Any) -> None:
    p = sub.add_parser("validate", help="check a sweep file and summarise it")
    p.add_argument("spec", help="sweep YAML file")
    p.add_argument("--json", action="store_true", help="print one JSON object (schema: docs/sweep-file.md)")
    p.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="print the first N configurations `run` (same --seed) tries, as the loop or script receives them",
    )
    p.add_argument("--seed", type=int, help="seed for --sample (default: the spec's seed)")
    p.add_argument(
        "--plan", action="store_true", help="print what the sweep will cost (trials, reports, GPU-hours) before it runs"
    )
    p.add_argument("--count", type=int, help="--plan: the trials `run --count` would run")
    p.add_argument("--epoch-seconds", type=float, metavar="S", help="--plan: one report's seconds (raysweep.budget)")
    p.add_argument("--slots", type=int, help="--plan: the cluster's worker slots, for the wall time")
    p.add_argument("--budget-gpu-hours", type=float, metavar="H", help="--plan: a budget to hold the plan against")
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE", help="override a key of the file")
    p.add_argument(
        "--strict",
        action="store_true",
        help="refuse what W&B's schema flags, as W&B's local controller does (W&B's service runs it)",
    )
    p.set_defaults(func=_validate)


def _add_run(sub: Any) -> None:
    p = sub.add_parser("run", help="run a sweep")
    p.add_argument("spec", help="sweep YAML file")
    p.add_argument("--count", type=int, help="number of trials (default: run_cap, else the grid size)")
    p.add_argument("--name", help="sweep name (default: the spec's name, else the file name)")
    p.add_argument("--storage", default="raysweep_runs", help="where run dirs go (default: ./raysweep_runs)")
    p.add_argument("--address", help="an existing Ray cluster: auto or HOST:PORT (default: start one here)")
    p.add_argument("--max-concurrent", type=int, help="at most this many trials at once")
    p.add_argument(
        "--wandb", choices=("offline", "online", "disabled"), help="W&B mode (default: offline without a key)"
    )
    p.add_argument("--seed", type=int, help="seed for the searcher and the trials")
    p.add_argument(
        "--budget-gpu-hours",
        type=float,
        metavar="H",
        help="spend at most H GPU-hours (worker-hours on CPUs): trials start only if they fit (raysweep.budget)",
    )
    p.add_argument(
        "--epoch-seconds", type=float, metavar="S", help="one report's seconds, for the banner's plan (raysweep.budget)"
    )
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE", help="override a key of the file")
    p.add_argument(
        "--warm-start",
        nargs="+",
        default=(),
        metavar="RUN_DIR",
        help="earlier sweeps' run dirs: their finished trials that fit this sweep's space are told to the search "
        "before its first new trial (bayes, engine optuna; grid skips them), and not run again",
    )
    p.add_argument("--quiet", action="store_true", help="print only the final summary")
    p.add_argument("--gpus", metavar="I,J,...", help="the Ray started here uses only these GPUs, e.g. 0,1")
    p.add_argument(
        "--dashboard-host",
        metavar="HOST",
        help="where the Ray dashboard started here listens (default 127.0.0.1; 0.0.0.0 exposes it, with a warning)",
    )
    p.add_argument(
        "--resume-existing",
        action="store_true",
        help="if the run dir already holds this sweep, continue it (`raysweep resume`) instead of refusing the name; "
        "the SLURM script uses it so a requeued job goes on",
    )
    p.set_defaults(func=_run)


def _add_slurm(sub: Any) -> None:
    p = sub.add_parser(
        "slurm",
        help="write a SLURM batch script: Ray on the job's nodes, then the sweep",
        description="Write a SLURM batch script that starts Ray on every node of the job and runs the sweep "
        "against it. Arguments after -- are passed to `raysweep run`.",
    )
    p.add_argument("spec", help="sweep YAML file (a path relative to where the job is submitted)")
    p.add_argument("--nodes", type=int, default=1, help="nodes (default 1)")
    p.add_argument("--gpus-per-node", type=int, default=0, metavar="G", help="GPUs per node (default 0: CPU workers)")
    p.add_argument("--cpus-per-node", type=int, metavar="C", help="CPUs per node (default: SLURM's default)")
    p.add_argument("--time", metavar="D-HH:MM:SS", help="the job's time limit")
    p.add_argument("--partition", help="SLURM partition")
    p.add_argument("--account", help="SLURM account")
    p.add_argument("--job-name", help="SLURM job name (default: the sweep's name)")
    p.add_argument("--port", type=int, help="the Ray head's port (default: a free one, found when the job starts)")
    p.add_argument(
        "--sbatch", action="append", default=[], metavar="OPT", help="an #SBATCH option, e.g. --sbatch=--qos=high"
    )
    p.add_argument(
        "--requeue",
        action="store_true",
        help="SLURM brings the job back after a preemption or node failure; it goes on with the sweep",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write the script here (default: stdout)")
    p.set_defaults(func=_slurm, run_args=[])


def _add_resume(sub: Any) -> None:
    p = sub.add_parser("resume", help="continue an interrupted sweep")
    p.add_argument("run", help="run name or run dir")
    p.add_argument("--storage", default="raysweep_runs")
    p.add_argument("--address")
    p.add_argument("--quiet", action="store_true")
    p.add_argument(
        "--retry-failed", action="store_true", help="also run failed trials again (default: they stay failed)"
    )
    p.add_argument(
        "--budget-gpu-hours", type=float, metavar="H", help="the sweep's budget from now on (what it spent counts)"
    )
    p.set_defaults(func=_resume)


def _add_readers(sub: Any) -> None:
    """The commands that read a run dir."""
    p = sub.add_parser("show", help="show a sweep's trials, best first")
    p.add_argument("run", help="run name or run dir")
    p.add_argument("--storage", default="raysweep_runs")
    p.add_argument("--top", type=int, metavar="K", help="only the K best trials")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="one JSON object (schema: docs/run-dir.md)")
    fmt.add_argument("--csv", action="store_true", help="CSV, one row per trial")
    p.set_defaults(func=_show)

    p = sub.add_parser("report", help="write a self-contained HTML report of a sweep (opens offline)")
    p.add_argument("run", help="run name or run dir")
    p.add_argument("--storage", default="raysweep_runs")
    p.add_argument("-o", "--output", metavar="FILE.html", help="where to write it (default: RUN_DIR/report.html)")
    p.add_argument("--png", metavar="DIR", help="also write each figure as a PNG here (needs Chrome/Chromium)")
    p.set_defaults(func=_report)

    p = sub.add_parser(
        "publish",
        help="upload an offline sweep's W&B runs and show them on a W&B sweep page",
        description="Sync the sweep's offline W&B runs (wandb sync) and attach them to a W&B sweep, created on "
        "the first publish; publishing again adds only new runs to the same sweep. Needs a W&B key.",
    )
    p.add_argument("run", help="run name or run dir")
    p.add_argument("--storage", default="raysweep_runs")
    p.set_defaults(func=_publish)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    run_args: list[str] = []
    if argv[:1] == ["slurm"] and "--" in argv:  # `raysweep slurm SPEC [flags] -- [run flags]`
        cut = argv.index("--")
        argv, run_args = argv[:cut], argv[cut + 1 :]
    args = build_parser().parse_args(argv)
    if args.command == "slurm":
        args.run_args, args.argv = run_args, argv + (["--", *run_args] if run_args else [])
    for flag, low in (("count", 1), ("max_concurrent", 1), ("sample", 1), ("top", 1), ("seed", 0)):
        value = getattr(args, flag, None)
        if value is not None and value < low:
            print(f"raysweep: --{flag.replace('_', '-')} must be >= {low}, got {value}", file=sys.stderr)
            return 2
    try:
        return args.func(args)
    except UserError as e:
        print(f"raysweep: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("raysweep: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `raysweep show | head`: the reader has had what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit must not fail again
        return 0
