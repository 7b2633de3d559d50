"""``cuzk bench durability``: its options, and both parts' figures as a table (the bench itself,
and what each figure means: ``cuzk.bench.durability``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from cuzk.cli._bench_server import add_server_bench_args, keys_dir


def register(sub: Any) -> None:
    p = sub.add_parser(
        "durability",
        help="kill -9 cycles against a real cuzk serve: jobs accepted, lost, proven twice, "
        "recovery time; journal on/off throughput",
    )
    p.add_argument("--cycles", type=int, default=20, help="kill -9 cycles (default: %(default)s)")
    p.add_argument("--jobs", type=int, default=40, help="jobs in the kill-cycle backlog"
                   " (default: %(default)s)")
    p.add_argument(
        "--window-partitions", type=int, default=2,
        help="partitions of a window-post job in this bench (default: %(default)s)",
    )  # fmt: skip
    p.add_argument("--max-kill-delay", type=float, default=2.0, metavar="SECONDS",
                   help="a kill comes up to this long after a life's first accepted submit"
                   " (default: %(default)g)")
    p.add_argument("--cost-jobs", type=int, default=16, help="jobs per journal-cost run"
                   " (default: %(default)s)")
    p.add_argument("--cost-repeats", type=int, default=3,
                   help="journal on/off pairs (0: skip the journal's cost; default: %(default)s)")
    p.add_argument("--budget-s", type=float, default=3600.0, metavar="SECONDS",
                   help="give up after this long (default: %(default)g)")
    add_server_bench_args(p, backend="cpu")
    p.set_defaults(func=run_durability)


def run_durability(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from cuzk.bench.durability import DurabilityOptions
    from cuzk.bench.durability import run_durability as durability

    console = Console()
    options = DurabilityOptions(
        cycles=args.cycles, jobs=args.jobs, window_partitions=args.window_partitions,
        max_kill_delay=args.max_kill_delay, cost_jobs=args.cost_jobs,
        cost_repeats=args.cost_repeats, budget_s=args.budget_s, backend=args.backend,
        keys_dir=keys_dir(args), seed=args.seed)
    figures = durability(options, echo=console.print,
                         heading=lambda title, what: console.print(f"[bold]{title}[/bold]: {what}"))
    kills, cost = figures["kill_cycles"], figures["journal_cost"]

    table = Table(title="cuzk bench durability", show_header=True)
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("kill -9 cycles", str(kills["cycles"]))
    table.add_row("jobs accepted", f"{kills['jobs_accepted']} of {kills['jobs_in_backlog']}")
    table.add_row("partitions", str(kills["partitions"]))
    table.add_row("jobs lost (must be 0)", str(kills["lost"]))
    table.add_row("partitions proven twice", str(kills["proven_twice"]))
    table.add_row("unfinished jobs resumed (summed over restarts)",
                  str(kills["jobs_resumed_at_restarts"]))
    if kills["recovery_s_mean"] is not None:
        table.add_row("recovery to /readyz 200, mean", f"{kills['recovery_s_mean']:.2f} s")
        table.add_row("recovery to /readyz 200, max", f"{kills['recovery_s_max']:.2f} s")
    if cost is not None:
        table.add_row("throughput, journal on (median)",
                      f"{cost['jobs_per_s_on_median']:.3f} jobs/s")
        table.add_row("throughput, journal off (median)",
                      f"{cost['jobs_per_s_off_median']:.3f} jobs/s")
        table.add_row("journal cost (median of pairs)", f"{100 * cost['cost_median']:+.1f} %")
        table.add_row("journal cost (range of pairs)",
                      f"{100 * cost['cost_min']:+.1f} % .. {100 * cost['cost_max']:+.1f} %")
        if cost["journal_write_ms_mean"] is not None:
            table.add_row("journal write, mean", f"{cost['journal_write_ms_mean']:.2f} ms")
            table.add_row("journal write time / wall time",
                          f"{100 * cost['journal_write_share']:.2f} %")
    console.print(table)
    if kills["lost"]:
        console.print(f"[red]lost: {', '.join(kills['lost_request_ids'])}[/red]")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 1 if kills["lost"] or kills["proven_twice"] else 0
