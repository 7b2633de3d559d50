"""``cuzk bench cluster``: what Ray costs the engine, on a two-node cluster on this machine.

Figures, each over ``--runs`` runs on one cluster (range and median):

* Ray's overhead per partition: the median time of a one-partition job through the engine over
  the cluster minus the same through the engine in one process, both with the scripted prover
  and no step time (so only the dispatch is timed: three actor calls and their objects).
* Node loss (``bench_cluster_recovery``): the GPU node removed mid-job and a new one added,
  ``--node-losses`` times: seconds to the job's success, jobs lost, duplicate proofs.
* Head restart (``bench_cluster_recovery``): a real ``cuzk serve --cluster`` head on the CPU
  prover killed with SIGKILL while a job is partly journaled, and started again: seconds to
  ready and to the resumed job's success, and the key loads that cost the GPU worker.
* Bytes moved between nodes per partition (``bench_cluster_bytes``), with the real CPU prover
  for each of ``--bytes-kinds``: the witness, a/b/c, GPU output and proof of every partition, and
  the nodes Ray holds copies on (``cuzk.cluster.transfers`` says what counts as moved).
* GPU-worker busy fraction with scripted GPU phases of ``--gpu-ms`` (50 ms): busy seconds as the
  GPU worker's own leases count them, over the job's wall time, prefetch depth 2, small
  payloads. This is **scheduling capacity on one box**: both "nodes" share this machine's
  cores, so it says nothing about proving throughput, and no speed-up is claimed.

Ray starts only inside a private network namespace: without one the command runs itself again
under ``unshare -n`` (root, util-linux) with only loopback up.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from cuzk.cli.bench_cluster_bytes import table_rows

NETNS_ENV = "CUZK_BENCH_NETNS"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "cluster",
        help="Ray's overhead per partition and GPU-worker busy fraction on a local two-node"
        " cluster (scheduling capacity on one box)",
    )
    p.add_argument("--runs", type=int, default=3, help="measurement runs (default 3)")
    p.add_argument("--jobs", type=int, default=30, help="one-partition jobs per overhead run")
    p.add_argument("--partitions", type=int, default=40, help="partitions of the busy job")
    p.add_argument("--gpu-ms", type=float, default=50.0, help="scripted GPU phase (ms)")
    p.add_argument("--synth-ms", type=float, default=20.0, help="scripted synthesis (ms)")
    p.add_argument("--node-losses", type=int, default=10,
                   help="GPU-node removals mid-job (each then adds a node back; 0: skip)")
    p.add_argument("--restart-partitions", type=int, default=4,
                   help="partitions of the job in flight when the head is killed (0: skip)")
    p.add_argument("--bytes-kinds", default="winning-post",
                   help="proof kinds whose bytes moved per partition are measured, comma-"
                   "separated, real CPU prover (empty: skip)")
    p.add_argument("--bytes-partitions", type=int, default=4,
                   help="partitions of each bytes-moved job (one job per run and kind)")
    p.add_argument("--keys-dir", type=Path, help="proving-key cache (default: the user's)")
    p.add_argument("--json", type=Path, help="also write the figures as JSON here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if os.environ.get(NETNS_ENV) != "1":
        script = 'ip link set lo up && exec "$0" "$@"'
        code = "import sys; from cuzk.cli.main import main; raise SystemExit(main(sys.argv[1:]))"
        argv = ["bench", "cluster", "--runs", str(args.runs), "--jobs", str(args.jobs),
                "--partitions", str(args.partitions), "--gpu-ms", str(args.gpu_ms),
                "--synth-ms", str(args.synth_ms),
                "--restart-partitions", str(args.restart_partitions),
                "--node-losses", str(args.node_losses), "--bytes-kinds", args.bytes_kinds,
                "--bytes-partitions", str(args.bytes_partitions)]
        if args.keys_dir:
            argv += ["--keys-dir", str(args.keys_dir.resolve())]
        if args.json:
            argv += ["--json", str(args.json.resolve())]
        env = {**os.environ, NETNS_ENV: "1", "RAY_USAGE_STATS_ENABLED": "0"}
        try:
            return subprocess.call(["unshare", "-n", "--", "sh", "-c", script, sys.executable,
                                    "-c", code, *argv], env=env)
        except FileNotFoundError:
            print("cuzk bench cluster: needs unshare (util-linux) for a private network "
                  "namespace", file=sys.stderr)
            return 2
    figures = measure(args)
    show(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


def _one_partition_ms(engine: Any, jobs: int) -> float:
    times = []
    for i in range(jobs):
        t0 = time.perf_counter()
        job = engine.submit("one", [{"tag": f"o{i}"}])
        if engine.wait(job.id, 60).outcome != "succeeded":
            raise RuntimeError(f"job failed: {job.error}")
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import ray

    from cuzk.cli.bench_cluster_bytes import bytes_moved
    from cuzk.cli.bench_cluster_recovery import node_losses
    from cuzk.cluster.local import two_nodes
    from cuzk.cluster.runtime import cluster_engine
    from cuzk.cluster.worker import ProverSpec
    from cuzk.engine.engine import Engine
    from cuzk.engine.settings import EngineSettings, ProofKindSettings
    from cuzk.testing import ScriptedProver

    settings = EngineSettings(
        backend="cpu", memory_budget_bytes=1 << 30, tracing_enabled=False,
        proof_kinds={"one": ProofKindSettings("one", 1, "normal"),
                     "busy": ProofKindSettings("busy", args.partitions, "normal"),
                "loss": ProofKindSettings("loss", 10, "normal")})
    local_ms: list[float] = []
    ray_ms: list[float] = []
    busy: list[float] = []
    load = os.getloadavg()
    scripted: Any = ScriptedProver()
    inproc = Engine(settings, scripted).start()
    try:
        _one_partition_ms(inproc, 3)  # warm
        for _ in range(args.runs):
            local_ms.append(_one_partition_ms(inproc, args.jobs))
    finally:
        inproc.shutdown(timeout=10)
    restart: dict[str, Any] = {}
    losses: dict[str, Any] = {}
    moved: dict[str, Any] = {}
    kinds = [k.strip() for k in args.bytes_kinds.split(",") if k.strip()]
    with two_nodes() as cluster:
        spec = ProverSpec("scripted")
        engine = cluster_engine(settings, None, spec=spec, prefix="bench-")
        executor: Any = engine.prover
        engine.start()
        try:
            gpu = executor.gpu_actor("slot-0")
            _one_partition_ms(engine, 3)  # warm: keys, actors, connections
            for _ in range(args.runs):
                ray_ms.append(_one_partition_ms(engine, args.jobs))
            ray.get(gpu.script_delay.remote("gpu", args.gpu_ms / 1000.0))
            cpus = [a.handle for a in executor.actors() if a.kind == "cpu"]
            ray.get([c.script_delay.remote("synthesize", args.synth_ms / 1000.0)
                     for c in cpus])
            for _ in range(args.runs):
                before = ray.get(gpu.snapshot.remote())["busy_seconds"]
                t0 = time.perf_counter()
                job = engine.submit("busy", [{"tag": f"b{i}"} for i in range(args.partitions)])
                if engine.wait(job.id, 600).outcome != "succeeded":
                    raise RuntimeError(f"busy job failed: {job.error}")
                wall = time.perf_counter() - t0
                after = ray.get(gpu.snapshot.remote())["busy_seconds"]
                busy.append((after - before) / wall)
            if args.node_losses > 0:
                ray.get([c.script_delay.remote("synthesize", 0.0) for c in cpus])
                losses = node_losses(engine, executor, cluster, args.node_losses, "loss", 10)
        finally:
            engine.shutdown(timeout=10)
            for a in executor.actors():
                ray.kill(a.handle, no_restart=True)
        if kinds:
            moved = bytes_moved(kinds, args.runs, args.bytes_partitions, args.keys_dir)
        if args.restart_partitions > 0:
            restart = _head_restart(cluster, args)
    overhead = [r - min(local_ms) for r in ray_ms]
    return {
        "runs": args.runs,
        "load_average_at_start": [round(x, 2) for x in load],
        "in_process_ms_per_partition": local_ms,
        "cluster_ms_per_partition": ray_ms,
        "ray_overhead_ms_per_partition": overhead,
        "gpu_ms": args.gpu_ms,
        "partitions": args.partitions,
        "gpu_busy_fraction": busy,
        "label": "scheduling capacity on one box (both nodes share this machine's cores)",
        **losses,
        **moved,
        **restart,
    }


def _head_restart(cluster: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The head-restart runs, with the GPU worker they leave behind killed at the end."""
    import tempfile

    import ray

    from cuzk.cli.bench_cluster_recovery import head_restart
    from cuzk.cluster import NAMESPACE
    from cuzk.cluster.executor import short

    gpu_name = f"gpu-{short(next(iter(cluster.worker_nodes)).node_id)}-0"
    try:
        with tempfile.TemporaryDirectory(prefix="cuzk-bench-restart-") as tmp:
            return head_restart(cluster.address, gpu_name, args.runs,
                                args.restart_partitions, Path(tmp))
    finally:
        with contextlib.suppress(ValueError):  # ValueError: never placed
            ray.kill(ray.get_actor(gpu_name, namespace=NAMESPACE), no_restart=True)


def _range(values: list[float], fmt: str) -> str:
    return (f"{format(min(values), fmt)}–{format(max(values), fmt)} "
            f"(median {format(statistics.median(values), fmt)})")


def show(f: dict[str, Any]) -> None:
    t = Table(title=f"cuzk bench cluster: {f['runs']} runs; {f['label']}")
    t.add_column("figure")
    t.add_column("range over runs", justify="right")
    t.add_row("one-partition job, in process (ms)", _range(f["in_process_ms_per_partition"], ".1f"))
    t.add_row("one-partition job, over Ray (ms)", _range(f["cluster_ms_per_partition"], ".1f"))
    t.add_row("Ray overhead per partition (ms)", _range(f["ray_overhead_ms_per_partition"], ".1f"))
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
        for stage in ("connected", "gpu_worker_found", "nodes_joined", "listening"):
            values = [st[stage] for st in f.get("head_restart_stages_s", []) if stage in st]
            if values:
                t.add_row(f"  restart to {stage.replace('_', ' ')} (s)", _range(values, ".1f"))
        t.add_row("head kill -9: partitions journaled at the kill",
                  ", ".join(map(str, f["head_restart_journaled_at_kill"])))
        t.add_row("head kill -9: GPU-worker key loads caused by the restart",
                  ", ".join(map(str, f["head_restart_key_loads"])))
    Console().print(t)
    print(f"load average at start: {f['load_average_at_start']}")
