"""The cluster bench (``cuzk bench cluster``): what Ray costs the engine, on a two-node cluster
on this machine.

Figures, each over ``--runs`` runs on one cluster (range and median):

* Ray's overhead per partition: the median time of a one-partition job through the engine over
  the cluster minus the same through the engine in one process, both with the scripted prover
  and no step time (so only the dispatch is timed: three actor calls and their objects).
* Node loss (``cuzk.bench.cluster_recovery``): the GPU node removed mid-job and a new one added,
  ``--node-losses`` times: seconds to the job's success, jobs lost, duplicate proofs.
* Head restart (``cuzk.bench.cluster_recovery``): a real ``cuzk serve --cluster`` head on the CPU
  prover killed with SIGKILL while a job is partly journaled, and started again: seconds to
  ready and to the resumed job's success, and the key loads that cost the GPU worker.
* Bytes moved between nodes per partition (``bench_cluster_bytes``), with the real CPU prover
  for each of ``--bytes-kinds``: the witness, a/b/c, GPU output and proof of every partition, and
  the nodes Ray holds copies on (``cuzk.cluster.transfers`` says what counts as moved).
* GPU-worker busy fraction with scripted GPU phases of ``--gpu-ms`` (50 ms): busy seconds as the
  GPU worker's own leases count them, over the job's wall time, prefetch depth 2, small
  payloads. This is **scheduling capacity on one box**: both "nodes" share this machine's
  cores, so it says nothing about proving throughput, and no speed-up is claimed.

Ray starts only inside a private network namespace: without one the command
(``cuzk.cli.bench_cluster``) runs itself again under ``unshare -n`` (root, util-linux) with only
loopback up, and prints what ``measure`` returns.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ClusterOptions:
    """What ``cuzk bench cluster``'s options set (defaults there)."""

    runs: int = 3
    jobs: int = 30
    partitions: int = 40
    gpu_ms: float = 50.0
    synth_ms: float = 20.0
    node_losses: int = 10
    restart_partitions: int = 4
    bytes_kinds: tuple[str, ...] = ("winning-post",)
    bytes_partitions: int = 4
    keys_dir: Path | None = None
    only_head_restart: bool = False  # the head-restart drill alone (``--only-head-restart``)


def _one_partition_ms(engine: Any, jobs: int) -> float:
    times = []
    for i in range(jobs):
        t0 = time.perf_counter()
        job = engine.submit("one", [{"tag": f"o{i}"}])
        if engine.wait(job.id, 60).outcome != "succeeded":
            raise RuntimeError(f"job failed: {job.error}")
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def measure(options: ClusterOptions) -> dict[str, Any]:
    from cuzk.bench.cluster_bytes import bytes_moved
    from cuzk.cluster.local import two_nodes
    from cuzk.engine.engine import Engine
    from cuzk.engine.settings import EngineSettings, ProofKindSettings
    from cuzk.simulated_prover import ScriptedProver

    settings = EngineSettings(
        backend="cpu", memory_budget_bytes=1 << 30, tracing_enabled=False,
        proof_kinds={"one": ProofKindSettings("one", 1, "normal"),
                     "busy": ProofKindSettings("busy", options.partitions, "normal"),
                "loss": ProofKindSettings("loss", 10, "normal")})
    local_ms: list[float] = []
    ray_ms: list[float] = []
    busy: list[float] = []
    load = os.getloadavg()
    full = not options.only_head_restart
    if full:
        scripted: Any = ScriptedProver()
        inproc = Engine(settings, scripted).start()
        try:
            _one_partition_ms(inproc, 3)  # warm
            for _ in range(options.runs):
                local_ms.append(_one_partition_ms(inproc, options.jobs))
        finally:
            inproc.shutdown(timeout=10)
    restart: dict[str, Any] = {}
    losses: dict[str, Any] = {}
    moved: dict[str, Any] = {}
    kinds = list(options.bytes_kinds) if full else []
    with two_nodes() as cluster:
        if full:
            losses = _engine_figures(cluster, settings, options, ray_ms, busy)
        if kinds:
            moved = bytes_moved(kinds, options.runs, options.bytes_partitions, options.keys_dir)
        if options.restart_partitions > 0:
            restart = _head_restart(cluster, options)
    overhead = [r - min(local_ms) for r in ray_ms] if local_ms else []
    return {
        "runs": options.runs,
        "load_average_at_start": [round(x, 2) for x in load],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "in_process_ms_per_partition": local_ms,
        "cluster_ms_per_partition": ray_ms,
        "ray_overhead_ms_per_partition": overhead,
        "gpu_ms": options.gpu_ms,
        "partitions": options.partitions,
        "gpu_busy_fraction": busy,
        "label": "scheduling capacity on one box (both nodes share this machine's cores)",
        **losses,
        **moved,
        **restart,
    }


def _engine_figures(cluster: Any, settings: Any, options: ClusterOptions, ray_ms: list[float],
                    busy: list[float]) -> dict[str, Any]:
    """Ray's overhead per partition and the GPU worker's busy fraction (appended to ``ray_ms``
    and ``busy``), then the node-loss drill, whose figures are returned."""
    import ray

    from cuzk.bench.cluster_recovery import node_losses
    from cuzk.cluster.runtime import cluster_engine
    from cuzk.cluster.worker import ProverSpec

    losses: dict[str, Any] = {}
    spec = ProverSpec("scripted")
    engine = cluster_engine(settings, None, spec=spec, prefix="bench-")
    executor: Any = engine.prover
    if not executor.wait_for_cpu_workers(300):  # the figures below script them
        raise RuntimeError("the CPU workers did not answer within 300 s")
    engine.start()
    try:
        gpu = executor.gpu_actor("slot-0")
        _one_partition_ms(engine, 3)  # warm: keys, actors, connections
        for _ in range(options.runs):
            ray_ms.append(_one_partition_ms(engine, options.jobs))
        ray.get(gpu.script_delay.remote("gpu", options.gpu_ms / 1000.0))
        cpus = [a.handle for a in executor.actors() if a.kind == "cpu"]
        ray.get([c.script_delay.remote("synthesize", options.synth_ms / 1000.0)
                 for c in cpus])
        for _ in range(options.runs):
            before = ray.get(gpu.snapshot.remote())["busy_seconds"]
            t0 = time.perf_counter()
            job = engine.submit("busy", [{"tag": f"b{i}"} for i in range(options.partitions)])
            if engine.wait(job.id, 600).outcome != "succeeded":
                raise RuntimeError(f"busy job failed: {job.error}")
            wall = time.perf_counter() - t0
            after = ray.get(gpu.snapshot.remote())["busy_seconds"]
            busy.append((after - before) / wall)
        if options.node_losses > 0:
            ray.get([c.script_delay.remote("synthesize", 0.0) for c in cpus])
            losses = node_losses(engine, executor, cluster, options.node_losses, "loss", 10)
    finally:
        engine.shutdown(timeout=10)
        for a in executor.actors():
            ray.kill(a.handle, no_restart=True)
    return losses


def _head_restart(cluster: Any, options: ClusterOptions) -> dict[str, Any]:
    """The head-restart runs, with the GPU worker they leave behind killed at the end."""
    import tempfile

    import ray

    from cuzk.bench.cluster_recovery import head_restart
    from cuzk.cluster import NAMESPACE
    from cuzk.cluster.executor import short

    gpu_name = f"gpu-{short(next(iter(cluster.worker_nodes)).node_id)}-0"
    try:
        with tempfile.TemporaryDirectory(prefix="cuzk-bench-restart-") as tmp:
            return head_restart(cluster.address, gpu_name, options.runs,
                                options.restart_partitions, Path(tmp))
    finally:
        with contextlib.suppress(ValueError):  # ValueError: never placed
            ray.kill(ray.get_actor(gpu_name, namespace=NAMESPACE), no_restart=True)
