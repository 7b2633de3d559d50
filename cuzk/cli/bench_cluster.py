"""``cuzk bench cluster``: its options, the private network namespace Ray starts in, and the
figures as a table (the bench itself, and what each figure means: ``cuzk.bench.cluster``)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from cuzk.tools import python_module_command

NETNS_ENV = "CUZK_BENCH_NETNS"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "cluster",
        help="Ray's overhead per partition and GPU-worker busy fraction on a local two-node"
        " cluster (scheduling capacity on one box)",
    )
    p.add_argument("--runs", type=int, default=3, help="measurement runs (default: %(default)s)")
    p.add_argument("--jobs", type=int, default=30, help="one-partition jobs per overhead run"
                   " (default: %(default)s)")
    p.add_argument("--partitions", type=int, default=40, help="partitions of the busy job"
                   " (default: %(default)s)")
    p.add_argument("--gpu-ms", type=float, default=50.0, help="scripted GPU phase in ms"
                   " (default: %(default)g)")
    p.add_argument("--synth-ms", type=float, default=20.0, help="scripted synthesis in ms"
                   " (default: %(default)g)")
    p.add_argument("--node-losses", type=int, default=10,
                   help="GPU-node removals mid-job (each then adds a node back; 0: skip;"
                   " default: %(default)s)")
    p.add_argument("--restart-partitions", type=int, default=4,
                   help="partitions of the job in flight when the head is killed (0: skip;"
                   " default: %(default)s)")
    p.add_argument("--bytes-kinds", default="winning-post",
                   help="proof kinds whose bytes moved per partition are measured, comma-"
                   "separated, real CPU prover (empty: skip; default: %(default)s)")
    p.add_argument("--bytes-partitions", type=int, default=4,
                   help="partitions of each bytes-moved job, one job per run and kind"
                   " (default: %(default)s)")
    p.add_argument("--only-head-restart", action="store_true",
                   help="run the head-restart drill alone (--runs kills and restarts, each"
                   " with a job of --restart-partitions), none of the other figures")
    p.add_argument("--keys-dir", type=Path, help="proving-key cache (default: the user's)")
    p.add_argument("--json", type=Path, help="also write the figures as JSON here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if os.environ.get(NETNS_ENV) != "1":
        script = 'ip link set lo up && exec "$0" "$@"'
        argv = ["bench", "cluster", "--runs", str(args.runs), "--jobs", str(args.jobs),
                "--partitions", str(args.partitions), "--gpu-ms", str(args.gpu_ms),
                "--synth-ms", str(args.synth_ms),
                "--restart-partitions", str(args.restart_partitions),
                "--node-losses", str(args.node_losses), "--bytes-kinds", args.bytes_kinds,
                "--bytes-partitions", str(args.bytes_partitions)]
        if args.keys_dir:
            argv += ["--keys-dir", str(args.keys_dir.resolve())]
        if args.only_head_restart:
            argv.append("--only-head-restart")
        if args.json:
            argv += ["--json", str(args.json.resolve())]
        env = {**os.environ, NETNS_ENV: "1", "RAY_USAGE_STATS_ENABLED": "0"}
        try:
            return subprocess.call(["unshare", "-n", "--", "sh", "-c", script,
                                    *python_module_command("cuzk.cli.main", *argv)], env=env)
        except FileNotFoundError:
            print("cuzk bench cluster: needs unshare (util-linux) for a private network "
                  "namespace", file=sys.stderr)
            return 2
    from cuzk.bench.cluster import ClusterOptions, measure

    figures = measure(ClusterOptions(
        runs=args.runs, jobs=args.jobs, partitions=args.partitions, gpu_ms=args.gpu_ms,
        synth_ms=args.synth_ms, node_losses=args.node_losses,
        restart_partitions=args.restart_partitions,
        bytes_kinds=tuple(k.strip() for k in args.bytes_kinds.split(",") if k.strip()),
        bytes_partitions=args.bytes_partitions, keys_dir=args.keys_dir,
        only_head_restart=args.only_head_restart))
    show(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


def _range(values: list[float], fmt: str) -> str:
    return (f"{format(min(values), fmt)}–{format(max(values), fmt)} "
            f"(median {format(statistics.median(values), fmt)})")


def show(f: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"cuzk bench cluster: {f['runs']} runs; {f['label']}")
    t.add_column("figure")
    t.add_column("range over runs", justify="right")
    if f["in_process_ms_per_partition"]:  # absent with --only-head-restart
        t.add_row("one-partition job, in process (ms)",
                  _range(f["in_process_ms_per_partition"], ".1f"))
        t.add_row("one-partition job, over Ray (ms)", _range(f["cluster_ms_per_partition"], ".1f"))
        t.add_row("Ray overhead per partition (ms)",
                  _range(f["ray_overhead_ms_per_partition"], ".1f"))
        t.add_row(f"GPU worker busy, {f['gpu_ms']:.0f} ms phases, depth 2",
                  _range(f["gpu_busy_fraction"], ".3f"))
    for name, value in table_rows(f, _range):
        t.add_row(name, value)
    if f.get("node_loss_reps"):
        t.add_row(f"GPU node removed mid-job and added back, {f['node_loss_reps']} times: "
                  "removal to the job's success (s)",
                  _range(f["node_loss_recovered_s"], ".1f") if f["node_loss_recovered_s"]
                  else "none recovered")
        for key, what in (("node_loss_noticed_s", "removal to the head dropping the node"),
                          ("node_loss_joined_s", "removal to the new node joining")):
            if f.get(key):
                t.add_row(f"  {what} (s)", _range(f[key], ".1f"))
        t.add_row("  jobs lost / duplicate proofs",
                  f"{f['node_loss_jobs_lost']} / {f['node_loss_duplicate_proofs']}")
    if f.get("head_restart_ready_s"):
        n = f["head_restart_partitions"]
        t.add_row(f"head kill -9 mid-job ({n} partitions): restart to ready (s)",
                  _range(f["head_restart_ready_s"], ".1f"))
        t.add_row("head kill -9: restart to the resumed job's success (s, CPU prover)",
                  _range(f["head_restart_job_done_s"], ".1f"))
        for stage in ("connected", "gpu_worker_found", "nodes_joined", "listening",
                      "first_cpu_worker"):
            values = [st[stage] for st in f.get("head_restart_stages_s", []) if stage in st]
            if values:
                t.add_row(f"  restart to {stage.replace('_', ' ')} (s)", _range(values, ".1f"))
        t.add_row("head kill -9: partitions journaled at the kill",
                  ", ".join(map(str, f["head_restart_journaled_at_kill"])))
        t.add_row("head kill -9: GPU-worker key loads caused by the restart",
                  ", ".join(map(str, f["head_restart_key_loads"])))
    Console().print(t)
    print(f"load average at start: {f['load_average_at_start']}, at the end: "
          f"{f['load_average_at_end']}")


def table_rows(figures: dict[str, Any], fmt_range: Any) -> list[tuple[str, str]]:
    """Table rows (figure, value) for ``cuzk bench cluster``'s table."""
    out = []
    mib = float(1 << 20)
    for kind, f in figures.get("bytes_moved", {}).items():
        runs = f["mean_bytes_per_partition_per_run"]
        out.append((f"{kind}: bytes moved per partition, mean of each run (B)",
                    fmt_range(runs, ".0f")))
        out.append(("  the same in MiB", fmt_range([r / mib for r in runs], ".3f")))
        for where in ("off", "on"):
            sort = f[f"synthesized_{where}_gpu_node"]
            if sort["partitions"]:
                out.append((f"  {sort['partitions']} partitions synthesized {where} the GPU "
                            "node (B each)", fmt_range(sort["bytes"], ".0f")))
        sizes = ", ".join(f"{k} {v / mib:.3f}" for k, v in f["object_bytes"].items())
        out.append(("  object sizes (MiB)", sizes))
    return out
