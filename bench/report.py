"""Read bench/results/*.json, compute the ratios pair by pair, check the targets, print a table.

.venv/bin/python -m bench.report [--quick]   (Markdown, as in docs/benchmarks.md)
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from typing import Any

from bench.common import RESULTS, median, time_to

NAMES = {
    "a_raysweep": "(a) raysweep",
    "b_docs_pattern": "(b) Ray docs pattern",
    "c_torchrun_agent": "(c′) Optuna + torchrun",
    "d_plain_tune": "(d) plain Tune",
}


def load(quick: bool) -> dict[str, Any]:
    suffix = "_quick.json" if quick else ".json"
    out = {}
    for p in sorted(RESULTS.glob(f"*{suffix}")):
        if quick or not p.name.endswith("_quick.json"):
            out[p.name.removesuffix(suffix)] = json.loads(p.read_text())
    return out


def _f(x: Any, fmt: str = "{:.2f}") -> str:
    return "n/a" if x is None else fmt.format(x)


def _check(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "MISSED")


def tables(r: dict[str, Any]) -> tuple[list[str], list[tuple[str, str, str]]]:
    lines: list[str] = []
    targets: list[tuple[str, str, str]] = []
    lines += [
        "### 1. Per-trial overhead (trivial trials, one at a time; median s/trial)",
        "",
        "| system | 1 worker | ratio to (b) | 2 workers | ratio to (b) |",
        "|---|---|---|---|---|",
    ]
    o1 = r.get("overhead_1w", {}).get("systems", {})
    o2 = r.get("overhead_2w", {}).get("systems", {})
    for key, name in NAMES.items():
        a, b = o1.get(key, {}), o2.get(key, {})
        lines.append(
            f"| {name} | {_f(a.get('per_trial_s'))} | {_f(o1.get('ratios_to_b', {}).get(key), '{:.3f}')} | "
            f"{_f(b.get('per_trial_s'))} | {_f(o2.get('ratios_to_b', {}).get(key), '{:.3f}')} |"
        )
    r1 = o1.get("ratios_to_b", {}).get("a_raysweep")
    r2 = o2.get("ratios_to_b", {}).get("a_raysweep")
    targets.append(("1-worker overhead (a)/(b) <= 0.35", _f(r1, "{:.3f}"), _check(None if r1 is None else r1 <= 0.35)))
    targets.append(("2-worker overhead (a)/(b) <= 0.9", _f(r2, "{:.3f}"), _check(None if r2 is None else r2 <= 0.9)))

    lines += [
        "",
        "### 2 + 5. 16-trial mixed sweep (8 x 1 worker, 8 x 2 workers): throughput and memory",
        "",
        "| system | wall s (first start to last end) | with cluster start s | busy worker-s | utilisation | driver peak RSS MiB | children peak RSS MiB | children peak PSS MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    tp = {s: r.get(f"throughput_{s}") for s in "abc"}
    for s, name in zip("abc", list(NAMES.values())[:3], strict=True):
        t = tp[s] or {}
        lines.append(
            f"| {name} | {_f(t.get('wall_s'), '{:.1f}')} | {_f(t.get('total_s'), '{:.1f}')} | {_f(t.get('busy_worker_s'), '{:.1f}')} | "
            f"{_f(t.get('utilisation'), '{:.3f}')} | {_f(t.get('driver_peak_rss_mib'), '{:.0f}')} | {_f(t.get('children_peak_rss_mib'), '{:.0f}')} | "
            f"{_f(t.get('children_peak_pss_mib'), '{:.0f}')} |"
        )
    ua = (tp["a"] or {}).get("utilisation")
    targets.append(("utilisation of (a) >= 0.95", _f(ua, "{:.3f}"), _check(None if ua is None else ua >= 0.95)))
    wa, wc = (tp["a"] or {}).get("wall_s"), (tp["c"] or {}).get("wall_s")
    sp = wc / wa if wa and wc else None
    targets.append(
        (
            "(a) >= 3.5x faster than (c′) on the 16-trial sweep",
            _f(sp, "{:.2f}x"),
            _check(None if sp is None else sp >= 3.5),
        )
    )
    mem = (tp["a"] or {}).get("children_peak_rss_mib")
    targets.append(
        (
            "(a)'s Ray processes peak RSS <= 2 GiB on the 16-trial sweep",
            _f(mem, "{:.0f} MiB"),
            _check(None if mem is None else mem <= 2048),
        )
    )
    pss = (tp["a"] or {}).get("children_peak_pss_mib")
    targets.append(
        (
            "(a)'s Ray processes peak PSS <= 2 GiB (shared pages counted once)",
            _f(pss, "{:.0f} MiB"),
            _check(None if pss is None else pss <= 2048),
        )
    )
    wb = (tp["b"] or {}).get("wall_s")
    if wa and wb:
        lines.append(f"\n(a)/(b) wall: {wa / wb:.2f}; (c)/(a) wall: {_f(sp)}")

    ddp = r.get("ddp_scaling", {})
    d = ddp.get("systems", {})
    lines += [
        "",
        "### 4. DDP scaling (looped transformer, samples/sec, median over epochs 2.., then over pairs)",
        "",
        "| system | 1 worker | 2 workers | speed-up |",
        "|---|---|---|---|",
    ]
    for key, name in (
        ("a_raysweep", "(a) raysweep"),
        ("c_torchrun", "(c) torchrun"),
        ("e_bare_actor", "(e) bare Ray actor"),
    ):
        x = d.get(key, {})
        if not x and key == "e_bare_actor":  # results from before (e) ran
            continue
        lines.append(
            f"| {name} | {_f(x.get('samples_per_sec_1w'), '{:.0f}')} | {_f(x.get('samples_per_sec_2w'), '{:.0f}')} | {_f(x.get('speedup_2w'))} |"
        )
    if ddp.get("pairs"):
        per_pair = ", ".join(f"{_f(p.get('a_over_c_2w'))}" for p in ddp["pairs"])
        lines.append(
            f"\n(a)/(c) pair by pair ({len(ddp['pairs'])} interleaved pairs), median: 1 worker "
            f"{_f(ddp.get('a_over_c_1w'))}, 2 workers {_f(ddp.get('a_over_c_2w'))} (2 workers per pair: {per_pair})"
        )
    if ddp.get("a_over_e_1w"):
        lines.append(
            f"1 worker, (a)/(e) raysweep over a bare Ray actor: {_f(ddp.get('a_over_e_1w'))}; "
            f"(e)/(c) the bare actor over torchrun: {_f(ddp.get('e_over_c_1w'))}"
        )
    bg = r.get("ray_background")
    if bg:
        lines.append(
            f"(e) with Ray's other processes stopped for a window (`bench.ray_background`, {len(bg['rounds'])} rounds): "
            f"those epochs over the rest {_f(bg.get('stopped_over_running'), '{:.3f}')}, over torchrun "
            f"{_f(bg.get('stopped_over_torchrun'), '{:.3f}')} (the rest over torchrun {_f(bg.get('running_over_torchrun'), '{:.3f}')})"
        )
    a_c = ddp.get("a_over_c_2w")
    targets.append(("DDP 2 workers, (a)/(c) samples/s >= 0.97", _f(a_c), _check(None if a_c is None else a_c >= 0.97)))

    lines += ["", "### 3. Search efficiency (stages sweep, reduced; raysweep)", ""]
    searches = {k.removeprefix("search_"): v for k, v in r.items() if k.startswith("search_")}
    lines_3, targets_3 = search_table({m: searches.get(m) or {} for m in ("bayes", "random", "grid")} | searches)
    lines_6, target_6 = scale_table(r.get("scale") or {})
    lines_7, target_7 = readers_table(r.get("readers") or {})
    lines_8, target_8 = first_report_table(r.get("first_report") or {})
    lines_gpu, targets_gpu = gpu_table(r["gpu"]) if "gpu" in r else ([], [])
    return (
        lines + lines_3 + lines_6 + lines_7 + lines_8 + lines_gpu,
        [*targets, *targets_3, target_6, target_7, target_8, *targets_gpu],
    )


def gpu_table(g: dict[str, Any]) -> tuple[list[str], list[tuple[str, str, str]]]:
    """``bench --gpu`` (bench.gpu), run on a GPU machine: its own figures and issue 21's goals."""
    o, b, v, k = g.get("overhead", {}), g.get("busy", {}), g.get("vs_torchrun", {}), g.get("packing", {})
    per = ", ".join(
        f"{NAMES.get(key, key)} {_f(x.get('per_trial_s'))} s" for key, x in o.items() if isinstance(x, dict)
    )
    lines = [
        "",
        f"### GPU ({g.get('device')}; bench.gpu)",
        "",
        f"- Per-trial overhead, trivial 1-GPU trials one at a time: {per}.",
        f"- 16 looped-transformer trials of one GPU: wall {_f(b.get('wall_s'), '{:.1f}')} s, the GPU busy "
        f"{_f(b.get('gpu_busy_fraction'), '{:.3f}')} of it.",
        f"- Samples/s under raysweep over torchrun, same GPU, median of {len(v.get('pairs', []))} pairs: {_f(v.get('a_over_c'), '{:.3f}')}.",
        f"- Packing 16 small trials four to the GPU: wall {_f(k.get('share_0.25', {}).get('wall_s'), '{:.1f}')} s against "
        f"{_f(k.get('share_1', {}).get('wall_s'), '{:.1f}')} s one per GPU ({_f(k.get('speedup_packed'))}x).",
        f"- CUDA contexts per GPU during the 16-trial sweep (processes in `nvidia-smi --query-compute-apps`): "
        f"at most {b.get('cuda_contexts', {}).get('most_per_gpu')}, last {b.get('cuda_contexts', {}).get('last_per_gpu')}.",
    ]
    busy, ratio = b.get("gpu_busy_fraction"), v.get("a_over_c")
    return lines, [
        ("GPU busy over a 16-trial sweep >= 0.9", _f(busy, "{:.3f}"), _check(None if busy is None else busy >= 0.9)),
        (
            "raysweep vs torchrun on one GPU, samples/s >= 0.97x",
            _f(ratio, "{:.3f}"),
            _check(None if ratio is None else ratio >= 0.97),
        ),
    ]


def first_report_table(r: dict[str, Any]) -> tuple[list[str], tuple[str, str, str]]:
    """``raysweep run`` (embedded Ray, W&B offline) to the loop's first report, by phase (bench.first_report)."""
    runs = r.get("runs") or {}
    phases = [
        "raysweep imported",
        "ray.init (start_or_connect) returned",
        "Tuner.fit called",
        "loop's first start",
        "loop's first report",
    ]
    lines = [
        "",
        "### 8. `raysweep run` to the first report (trivial loop; s after the process started, median of runs)",
        "",
        "| phase ends | 1-worker trials | 2-worker trials |",
        "|---|---|---|",
    ]
    for phase in phases:
        cells = [
            _f(median(x[phase] for x in runs.get(k, []) if phase in x) if runs.get(k) else None) for k in ("1w", "2w")
        ]
        lines.append(f"| {phase} | {' | '.join(cells)} |")
    worst = max((r.get("median_s") or {}).values(), default=None)
    return lines, (
        "`raysweep run` to the first report <= 10 s (the slower size)",
        _f(worst, "{:.2f} s"),
        _check(None if worst is None else worst <= 10),
    )


def readers_table(r: dict[str, Any]) -> tuple[list[str], tuple[str, str, str]]:
    """``raysweep show`` / ``report`` on a run dir of N trials, each a fresh process (bench.readers)."""
    lines = [
        "",
        f"### 7. Reading a run dir ({r.get('trials', '?')} trials; a fresh `python -m raysweep` each, median)",
        "",
        "| command | wall s |",
        "|---|---|",
    ]
    for key, name in (("show_s", "show"), ("show_json_s", "show --json"), ("report_s", "report")):
        lines.append(f"| {name} | {_f(r.get(key), '{:.2f}')} |")
    show = r.get("show_s")
    return lines, (
        "`raysweep show` on a 256-trial run dir < 1 s",
        _f(show, "{:.2f} s"),
        _check(None if show is None else show < 1),
    )


def scale_table(r: dict[str, Any]) -> tuple[list[str], tuple[str, str, str]]:
    """Part 6: the 2,000-trial sweep of 1-s trials on 2 slots, and the driver's work per result."""
    sweep, per = r.get("sweep") or {}, r.get("driver_per_result_us") or {}
    eff = sweep.get("efficiency")
    lines = [
        "",
        "### 6. Scale: many 1-s trials (3 reports each) on 2 slots, W&B off",
        "",
        "| trials | recorded / done | ideal s | sweep wall s | efficiency | with start-up | s per trial per slot "
        "| driver RSS MiB, 2nd tenth -> last tenth |",
        "|---|---|---|---|---|---|---|---|",
    ]
    if sweep:
        rss = sweep.get("driver_rss_mib_by_tenth") or [None] * 10
        lines.append(
            f"| {sweep.get('trials')} | {sweep.get('recorded')} / {sweep.get('done_with_3_reports')} | "
            f"{_f(sweep.get('ideal_s'), '{:.0f}')} | {_f(sweep.get('sweep_wall_s'), '{:.0f}')} | {_f(eff, '{:.3f}')} | "
            f"{_f(sweep.get('efficiency_incl_startup'), '{:.3f}')} | {_f(sweep.get('per_trial_s'), '{:.3f}')} | "
            f"{_f(rss[1], '{:.0f}')} -> {_f(rss[-1], '{:.0f}')} |"
        )
    if per:
        lines.append(
            "\nThe driver's bookkeeping per result (SweepMonitor + ResultLog), by trials already in the run dir: "
            + ", ".join(f"{k.removesuffix('_trials_us')}: {v:.0f} µs" for k, v in per.items())
        )
    return lines, (
        "2,000-trial sweep: efficiency >= 0.9",
        _f(eff, "{:.3f}"),
        _check(None if eff is None else eff >= 0.9),
    )


def search_table(s: dict[str, dict[str, Any]]) -> tuple[list[str], list[tuple[str, str, str]]]:
    """Part 3: every method against the whole grid's best and its top 1%, and the targets.

    Keys of ``s``: bayes, random, grid (raysweep), and wandb_<method>_every<P>s: system (c),
    W&B's engine with its hyperband evaluated every P seconds, one torchrun agent.
    """
    grid = (s["grid"].get("runs") or [{}])[0]
    grid_best, grid_wall = grid.get("best"), grid.get("wall_s")
    figures = s["grid"].get("grid") or {}  # bench.search's summary of the grid's run
    top1, best_config = figures.get("top1"), figures.get("best_config")
    size = s["grid"].get("size", {})
    lines = [
        f"Trials of {size.get('epochs')} epochs of {size.get('train_size')} problems, the first early-stopping "
        f"rung at epoch {size.get('asha_min_iter')}. Grid's best: {_f(grid_best, '{:.3f}')}; a top-1% configuration of its {figures.get('configurations', 0)}: "
        f"{_f(top1, '{:.3f}')} or more. Times from each run's first trial start; medians over runs "
        "(a run that never reached a target counts as slower than any that did).",
        "",
        "| method | runs x trials | best reached | wall s | s to grid's best | s to a top-1% configuration "
        "| s until grid's best configuration started |",
        "|---|---|---|---|---|---|---|",
    ]
    reached, best_trials = {}, {}  # per method, per run: seconds to grid's best, and its trial of grid's best config
    methods = [
        ("bayes", "ASHA + TPE (stages_bayes.yaml)"),
        ("random", "ASHA + random (stages_random.yaml)"),
        ("grid", "ASHA + grid (stages.yaml)"),
    ]
    methods += [
        (k, f"(c) W&B {k.split('_')[1]} + hyperband every {k.rsplit('every', 1)[1]}, torchrun agent")
        for k in sorted(s)
        if k.startswith("wandb_")
    ]
    for m, name in methods:
        x = s[m]
        runs = x.get("runs") or []
        reached[m] = _times_to(runs, grid_best)
        best_trials[m] = [run.get("grid_best_config") or {} for run in runs]
        started = _median_or_never([t.get("start") for t in best_trials[m]])
        lines.append(
            f"| {name} | {len(runs)} x {x.get('trials_done', 'n/a')} | {_f(x.get('best'), '{:.3f}')} | "
            f"{_f(x.get('wall_s'), '{:.0f}')} | {_never(_median_or_never(reached[m]), runs, grid_best)} | "
            f"{_never(_median_or_never(_times_to(runs, top1)), runs, top1)} | {_never(started, runs, best_config)} |"
        )
    first = figures.get("first")
    if first:
        lines.append(
            f"| ASHA + grid, its first {first['trials']} trials only | 1 x {first['trials']} | "
            f"{first['best']:.3f} | {first['end']:.0f} | | | |"
        )
    for m in ("bayes", "random"):
        if reached[m] and grid_wall:
            started = _per_run([t.get("start") for t in best_trials[m]], grid_wall)
            epochs = ", ".join(str(t.get("epochs", "-")) for t in best_trials[m])
            lines.append(
                f"\n{m} per seed (x grid's wall): s to grid's best {_per_run(reached[m], grid_wall)}; "
                f"grid's best configuration started {started}, ran epochs {epochs}"
            )
    time_bayes = _median_or_never(reached["bayes"])
    ratio = time_bayes / grid_wall if time_bayes is not None and grid_wall else None
    measured = _f(ratio) if ratio is not None else ("not reached" if s["bayes"].get("runs") and grid_wall else "n/a")
    targets = [
        (
            "ASHA+TPE reaches grid's best in <= 0.1x grid's wall",
            measured,
            _check(None if measured == "n/a" else ratio is not None and ratio <= 0.1),
        )
    ]
    wandb_times = [t for k in reached if k.startswith("wandb_bayes") for t in [_median_or_never(reached[k])]]
    if wandb_times:  # against W&B's faster stop period; a W&B run that never reached counts as never
        fastest = min((t for t in wandb_times if t is not None), default=None)
        vs = fastest / time_bayes if fastest is not None and time_bayes else None
        text = _f(vs, "{:.2f}x") if vs is not None else ("W&B never reached" if time_bayes else "n/a")
        targets.append(
            (
                "ASHA+TPE reaches grid's best >= 3x faster than W&B's bayes + hyperband under (c)",
                text,
                _check(None if text == "n/a" else vs is None or vs >= 3),
            )
        )
    return lines, targets


def _times_to(runs: list[dict[str, Any]], target: float | None) -> list[float | None]:
    """Per run, the seconds until its best so far reached ``target`` (None: never, or no target)."""
    return [None if target is None else time_to(run.get("curve") or [], target) for run in runs]


def _per_run(times: list[float | None], wall: float) -> str:
    return ", ".join("never" if t is None else f"{t:.0f} ({t / wall:.2f}x)" for t in times)


def _median_or_never(times: list[float | None]) -> float | None:
    """The median over runs; a run that never reached counts as slower than any that did (None
    when most never did)."""
    m = statistics.median_high([math.inf if t is None else t for t in times]) if times else math.inf
    return None if math.isinf(m) else m


def _never(t: float | None, runs: list[dict[str, Any]], target: Any) -> str:
    return _f(t, "{:.0f}") if t is not None or not runs or target is None else "not reached"


def render(quick: bool) -> str:
    r = load(quick)
    lines, targets = tables(r)
    machine = next((v["machine"] for v in r.values() if "machine" in v), {})
    head = [
        f"Machine: {machine.get('cpus')} CPUs, {machine.get('memory_gib')} GiB, {machine.get('platform')}, "
        f"Python {machine.get('python')}, Ray {machine.get('ray')}, torch {machine.get('torch')}; no GPU.",
        "",
    ]
    tail = ["", "### Targets (ratios computed within one run)", "", "| target | measured | |", "|---|---|---|"]
    tail += [f"| {t} | {v} | {c} |" for t, v, c in targets]
    return "\n".join(head + lines + tail)


def main() -> None:
    p = argparse.ArgumentParser(description="the benchmark's table from bench/results")
    p.add_argument("--quick", action="store_true", help="read the --quick results")
    args = p.parse_args()
    print(render(args.quick))


if __name__ == "__main__":
    main()
