"""``raysweep validate | run | show | resume | report``: the command line.

User mistakes (``UserError``) become one paragraph on stderr and exit code 2; no traceback.
Ray and torch are imported only by the commands that need them, so ``validate`` is quick.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from raysweep.errors import UserError


def _validate(args: argparse.Namespace) -> int:
    from raysweep.spec import load_spec, sample_points, trial_config
    from raysweep.spec.summary import summary_json, summary_text

    spec = load_spec(args.spec, args.set)
    if args.sample:
        for flat in sample_points(spec, args.sample, args.seed):
            print(json.dumps(trial_config(spec, flat)))
    elif args.json:
        print(json.dumps(summary_json(spec)))
    else:
        print(summary_text(spec))
    return 0


def _run(args: argparse.Namespace) -> int:
    from raysweep.engine.sweep import run_sweep
    from raysweep.spec import load_spec

    spec = load_spec(args.spec, args.set)
    return run_sweep(
        spec,
        count=args.count,
        name=args.name,
        storage=args.storage,
        address=args.address,
        max_concurrent=args.max_concurrent,
        wandb_mode=args.wandb,
        seed=args.seed,
        quiet=args.quiet,
    )


def _resume(args: argparse.Namespace) -> int:
    from raysweep.engine.sweep import resume_sweep

    return resume_sweep(args.run, storage=args.storage, address=args.address, quiet=args.quiet)


def _show(args: argparse.Namespace) -> int:
    from raysweep.engine.results import load_results, render_csv, render_table, resolve_run_dir

    data = load_results(resolve_run_dir(args.run, args.storage))
    if args.top:
        data["trials"] = data["trials"][: args.top]
    if args.json:
        print(json.dumps(data, default=str))
    elif args.csv:
        sys.stdout.write(render_csv(data))
    else:
        print(render_table(data))
    return 0


def _report(args: argparse.Namespace) -> int:
    from raysweep.engine.results import resolve_run_dir
    from raysweep.sweep_report import build_report

    run_dir = resolve_run_dir(args.run, args.storage)
    out = build_report(run_dir, args.output or run_dir / "report.html", png_dir=args.png)
    print(f"report written to {out}" + (f"; PNGs in {args.png}" if args.png else ""))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="raysweep", description="W&B-style sweeps on Ray Tune, each trial a DDP job.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("validate", help="check a sweep file and summarise it")
    p.add_argument("spec", help="sweep YAML file")
    p.add_argument("--json", action="store_true", help="print one JSON object (schema in the README)")
    p.add_argument("--sample", type=int, metavar="N", help="print N configurations as the train loop receives them")
    p.add_argument("--seed", type=int, help="seed for --sample (default: the spec's seed)")
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE", help="override a key of the file")
    p.set_defaults(func=_validate)

    p = sub.add_parser("run", help="run a sweep")
    p.add_argument("spec", help="sweep YAML file")
    p.add_argument("--count", type=int, help="number of trials (default: run_cap, else the grid size)")
    p.add_argument("--name", help="sweep name (default: the spec's name, else the file name)")
    p.add_argument("--storage", default="raysweep_runs", help="where run dirs go (default: ./raysweep_runs)")
    p.add_argument("--address", help="an existing Ray cluster: auto or HOST:PORT (default: start one here)")
    p.add_argument("--max-concurrent", type=int, help="at most this many trials at once")
    p.add_argument("--wandb", choices=("offline", "online", "disabled"), help="W&B mode (default: offline without a key)")
    p.add_argument("--seed", type=int, help="seed for the searcher and the trials")
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE", help="override a key of the file")
    p.add_argument("--quiet", action="store_true", help="print only the final summary")
    p.set_defaults(func=_run)

    p = sub.add_parser("resume", help="continue an interrupted sweep")
    p.add_argument("run", help="run name or run dir")
    p.add_argument("--storage", default="raysweep_runs")
    p.add_argument("--address")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=_resume)

    p = sub.add_parser("show", help="show a sweep's trials, best first")
    p.add_argument("run", help="run name or run dir")
    p.add_argument("--storage", default="raysweep_runs")
    p.add_argument("--top", type=int, metavar="K", help="only the K best trials")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="one JSON object (schema in the README)")
    fmt.add_argument("--csv", action="store_true", help="CSV, one row per trial")
    p.set_defaults(func=_show)

    p = sub.add_parser("report", help="write a self-contained HTML report of a sweep (opens offline)")
    p.add_argument("run", help="run name or run dir")
    p.add_argument("--storage", default="raysweep_runs")
    p.add_argument("-o", "--output", metavar="FILE.html", help="where to write it (default: RUN_DIR/report.html)")
    p.add_argument("--png", metavar="DIR", help="also write each figure as a PNG here (needs Chrome/Chromium)")
    p.set_defaults(func=_report)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for flag in ("count", "max_concurrent", "sample", "top"):
        value = getattr(args, flag, None)
        if value is not None and value < 1:
            print(f"raysweep: --{flag.replace('_', '-')} must be >= 1, got {value}", file=sys.stderr)
            return 2
    try:
        return args.func(args)
    except UserError as e:
        print(f"raysweep: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("raysweep: interrupted; continue with `raysweep resume`", file=sys.stderr)
        return 130
