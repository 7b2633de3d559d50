"""``cuzk bench deadlines``: its options, and each configuration's runs as a text table (the
bench itself, and what each figure means: ``cuzk.bench.deadlines``)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cuzk.bench.deadlines import BACKGROUND, DEADLINE_KINDS, LAG_BOUND_S, ORDERS, Run


def table(title: str, runs: Sequence[Run]) -> str:
    rows: list[tuple[str, list[str]]] = []
    f = [r.figures() for r in runs]
    for kind in (*DEADLINE_KINDS, *BACKGROUND):
        rows.append((f"{kind} missed/submitted",
                     [f"{x['missed'].get(kind, 0)}/{x['submitted'].get(kind, 0)}" for x in f]))
    for kind in DEADLINE_KINDS:
        rows.append((f"{kind} refused/at risk", [
            f"{x['rejected'].get(kind, 0)}/{x['admitted_at_risk'].get(kind, 0)}" for x in f]))
    rows += [
        ("winning-post p50 s", [f"{x['winning_p50_s']:.2f}" for x in f]),
        ("winning-post p99 s", [f"{x['winning_p99_s']:.2f}" for x in f]),
        ("GPU busy fraction", [f"{x['gpu_busy']:.3f}" for x in f]),
        ("background GPU-s/s", [f"{x['background_gpu_s_per_s']:.3f}" for x in f]),
        ("winning synth+mem wait p99 s", [f"{x['critical_wait_p99_s']:.2f}" for x in f]),
        ("driver lag p99/max s", [f"{x['driver_lag_p99_s']:.1f}/{x['driver_lag_max_s']:.1f}"
                                  for x in f]),
        (f"submits > {LAG_BOUND_S:g} s late (missed)", [
            f"{x['late_submits']} ({x['missed_after_late_submit']})" for x in f]),
        ("valid (no miss the driver caused)", [
            "yes" if x["valid"] else "NO" for x in f]),
    ]
    for kind in DEADLINE_KINDS:
        rows.append((f"{kind} pred. |err| p50/p95 s", [
            "{p50:.2f}/{p95:.2f}".format(**x["prediction_abs_error_s"].get(
                kind, {"p50": math.nan, "p95": math.nan})) for x in f]))
    width0 = max(len(r[0]) for r in rows)
    widths = [max(len(r.name), *(len(row[1][i]) for row in rows)) for i, r in enumerate(runs)]
    lines = [title, "  ".join([" " * width0, *(r.name.rjust(w) for r, w in
                                              zip(runs, widths, strict=True))])]
    for label, vals in rows:
        lines.append("  ".join([label.ljust(width0),
                                *(v.rjust(w) for v, w in zip(vals, widths, strict=True))]))
    return "\n".join(lines)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "deadlines",
        help="a compressed Filecoin day on the scripted prover: today's priority-then-arrival "
        "order against the deadline scheduler at 70/90/110%% load")
    p.add_argument("--hours", type=float, default=1.0, help="model hours of the day to run"
                   " (default: %(default)g)")
    p.add_argument("--scale", type=float, default=1 / 100,
                   help="real seconds per model second (default: %(default)g, an hour in 36 s)")
    p.add_argument("--seed", type=int, default=1,
                   help="random seed of the arrivals, so two runs see the same day"
                   " (default: %(default)s)")
    p.add_argument("--loads", default="0.7,0.9,1.1", help="offered loads, fractions of capacity,"
                   " comma-separated (default: %(default)s)")
    p.add_argument("--scenarios", default="bundled,flat",
                   help="priority settings, comma-separated: bundled, flat (every kind"
                   " normal) (default: %(default)s)")
    p.add_argument("--orders", default=",".join(ORDERS),
                   help="which orders to run, comma-separated: " + ", ".join(ORDERS)
                   + " (default: %(default)s)")
    p.add_argument("--json", type=Path, help="also write the figures as JSON here")
    p.set_defaults(func=_run)


def _run(args: Any) -> int:
    from cuzk.bench.deadlines import run_bench

    loads = [float(x) for x in str(args.loads).split(",") if x.strip()]
    scenarios = [x.strip() for x in str(args.scenarios).split(",") if x.strip()]
    orders = [x.strip() for x in str(args.orders).split(",") if x.strip()]
    bad = [s for s in scenarios if s not in ("bundled", "flat")] + \
        [o for o in orders if o not in ORDERS]
    if bad or not orders or not loads or any(not 0 < x < 5 for x in loads) or not args.hours > 0 \
            or not args.scale > 0:
        print("cuzk bench deadlines: --scenarios takes bundled,flat; --orders takes "
              f"{','.join(ORDERS)}; --loads fractions in (0, 5); --hours and --scale positive")
        return 2

    def echo(line: str) -> None:
        print(line, flush=True)

    def report(key: str, runs: Sequence[Run]) -> None:
        echo(table(key, runs))

    figures = run_bench(args.hours, args.scale, args.seed, loads, scenarios, orders, echo,
                        report)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0
