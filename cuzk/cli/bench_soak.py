"""``cuzk bench soak``: its options, and the soak's figures as a table (the bench itself, and
how a series is judged: ``cuzk.bench.soak``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from cuzk.cli._bench_server import add_server_bench_args, keys_dir

_LABELS = {
    "rss_mib": "RSS MiB", "fds": "open fds", "threads": "threads", "spans_open": "open spans"
}  # fmt: skip


def register(sub: Any) -> None:
    p = sub.add_parser(
        "soak",
        help="steady mixed load through a real cuzk serve; RSS, fds, threads and open spans"
        " per hour of load, lost or failed jobs",
    )
    p.add_argument("--minutes", type=float, default=10.0, help="load duration"
                   " (default: %(default)g)")
    p.add_argument("--sample-every", type=float, default=5.0, metavar="SECONDS",
                   help="how often the server's RSS, fds, threads and spans are sampled"
                   " (default: %(default)g)")
    p.add_argument("--kind", default="winning-post", help="bundled proof kind of the jobs"
                   " (default: %(default)s)")
    p.add_argument("--jobs-in-flight", type=int, default=2, help="concurrent job clients"
                   " (default: %(default)s)")
    p.add_argument("--slow-clients", type=int, default=20, help="slow connections kept open"
                   " (default: %(default)s)")
    p.add_argument("--bad-per-second", type=float, default=5.0, help="bad requests per second"
                   " (default: %(default)g)")
    p.add_argument(
        "--retention-jobs",
        type=int,
        default=50,
        help="the server's journal.retention_jobs: small, so the job history is full before the"
        " trend is measured (default: %(default)s)",
    )
    add_server_bench_args(p, backend="auto")
    p.set_defaults(func=run_soak)


def run_soak(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from cuzk.bench import BenchFailed
    from cuzk.bench.soak import MAX_MINUTES, NOISE_FLOORS, WARMUP_FRACTION, SoakOptions
    from cuzk.bench.soak import run_soak as soak
    from cuzk.circuits.registry import bundled_circuits

    console = Console()
    if not 0 < args.minutes <= MAX_MINUTES:
        console.print(f"--minutes must be in (0, {MAX_MINUTES}]")
        return 2
    circuits = bundled_circuits()
    if args.kind not in circuits:
        console.print(f"--kind must be a bundled proof kind: {', '.join(circuits)}")
        return 2
    options = SoakOptions(
        minutes=args.minutes, kind=args.kind, sample_every=args.sample_every,
        jobs_in_flight=args.jobs_in_flight, slow_clients=args.slow_clients,
        bad_per_second=args.bad_per_second, retention_jobs=args.retention_jobs,
        backend=args.backend, keys_dir=keys_dir(args), seed=args.seed)
    try:
        result = soak(options, echo=console.print)
    except BenchFailed as e:
        console.print(str(e))
        return 1
    f = result.figures
    load_s = f["minutes"] * 60
    kept = 100 - 100 * WARMUP_FRACTION
    table = Table(
        title=f"cuzk bench soak: {load_s / 60:.1f} min of load, server pid {result.pid}"
        f" (trend over the last {kept:.0f}%)"
    )
    for col in ("series", "first", "last", "min", "max", "growth / hour", "rise", "noise",
                "verdict"):  # fmt: skip
        table.add_column(col, justify="right" if col != "series" else "left")
    for name in NOISE_FLOORS:
        s = f["series"][name]
        table.add_row(
            _LABELS[name], f"{s['first']:.1f}", f"{s['last']:.1f}", f"{s['min']:.1f}",
            f"{s['max']:.1f}", f"{s['per_hour']:+.2f}", f"{s['rise']:+.2f}",
            f"{s['noise']:.2f}", "GROWING" if s["growing"] else "flat",
        )  # fmt: skip
    console.print(table)
    console.print(
        "threshold: a series is growing when its least-squares rise over the measured window"
        " exceeds max(2 x std of the samples around the line, floor: "
        + ", ".join(f"{k} {v:g}" for k, v in NOISE_FLOORS.items())
        + ")"
    )
    drained = {name: s["after_drain"] for name, s in f["series"].items()}
    console.print(f"after the load drained: {drained['spans_open']:.0f} open spans,"
                  f" {drained['threads']:.0f} threads, {drained['fds']:.0f} fds,"
                  f" {drained['rss_mib']:.1f} MiB RSS")  # fmt: skip
    console.print("requests: " + ", ".join(f"{k} {v}" for k, v in sorted(f["requests"].items())))
    console.print("jobs: " + (", ".join(f"{k} {v}" for k, v in sorted(f["jobs"].items()))
                              or "none"))
    done = sum(f["jobs"].values())
    console.print(f"load: {done / (load_s / 3600):.0f} jobs/hour, "
                  f"{sum(f['requests'].values()) / load_s:.1f} requests/s")  # fmt: skip
    console.print(f"lost jobs: {len(f['lost'])}; jobs failed unexpectedly: {len(f['failed'])};"
                  f" unexpected responses: {len(f['unexpected'])}")  # fmt: skip
    for line in (f["lost"] + f["failed"] + f["unexpected"])[:20]:
        console.print(f"  {line}")
    if args.json:
        args.json.write_text(json.dumps(f, indent=2))
    return 0 if result.ok else 1
