"""``cuzk bench cluster``: bytes moved between nodes per partition with the real (CPU) prover.

Per proof kind, ``runs`` jobs of ``partitions`` partitions on the two-node cluster; each
partition's objects (witness, a/b/c, GPU output, proof) are read from Ray's owner table after
the job (:mod:`cuzk.cluster.transfers` says what counts as moved). A partition synthesized on
the GPU node moves little; one synthesized on the other node moves its witness and a/b/c to the
GPU node: the figures say how many partitions were of each sort.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any


def bytes_moved(kinds: list[str], runs: int, partitions: int,
                keys_dir: Path | None = None) -> dict[str, Any]:
    """``{"bytes_moved": {kind: figures}}`` on the cluster this process is the driver of."""
    import ray

    from cuzk.circuits.registry import bundled_circuits
    from cuzk.cli._bench_server import sample_inputs
    from cuzk.cluster.runtime import cluster_engine
    from cuzk.cluster.transfers import TransferLog
    from cuzk.engine.settings import EngineSettings, ProofKindSettings
    from cuzk.prover.keystore import DEFAULT_KEYS_DIR, ensure_zkey

    circuits = bundled_circuits()
    proof_kinds = {k: ProofKindSettings(k, partitions, "normal", zkey=ensure_zkey(
        k, Path(circuits[k].r1cs_path), keys_dir or DEFAULT_KEYS_DIR)) for k in kinds}
    settings = EngineSettings(backend="cpu", memory_budget_bytes=1 << 30,
                              tracing_enabled=False, proof_kinds=proof_kinds)
    engine = cluster_engine(settings, None, prefix="bench-bytes-")
    executor: Any = engine.prover
    head = ray.get_runtime_context().get_node_id()
    executor.transfers = log = TransferLog(head)
    gpu_node = next(a.node_id for a in executor.actors() if a.kind == "gpu")
    out: dict[str, Any] = {}
    engine.start()
    try:
        for kind in kinds:
            inputs = sample_inputs(kind)
            per_run: list[float] = []
            rows: list[dict[str, Any]] = []
            for _ in range(runs):
                job = engine.submit(kind, [inputs] * partitions)
                done = engine.wait(job.id, 600)
                if done.outcome != "succeeded":
                    raise RuntimeError(f"{kind} job failed: {done.error}")
                parts = log.read(job.id)
                per_run.append(statistics.mean(p.moved_bytes for p in parts))
                for p in parts:
                    made = {o.name: o.made_on for o in p.objects}
                    rows.append({"moved_bytes": p.moved_bytes,
                                 "synthesis_on_gpu_node": made.get("witness") == gpu_node,
                                 **{f"{o.name}_bytes": o.size for o in p.objects}})
            off = [r["moved_bytes"] for r in rows if not r["synthesis_on_gpu_node"]]
            on = [r["moved_bytes"] for r in rows if r["synthesis_on_gpu_node"]]
            out[kind] = {
                "partitions_per_job": partitions,
                "mean_bytes_per_partition_per_run": per_run,
                "synthesized_off_gpu_node": {"partitions": len(off), "bytes": off},
                "synthesized_on_gpu_node": {"partitions": len(on), "bytes": on},
                "object_bytes": {k.removesuffix("_bytes"): statistics.median(
                    r[k] for r in rows if k in r) for k in rows[0]
                    if k.endswith("_bytes") and k != "moved_bytes"},
            }
    finally:
        executor.transfers = None
        engine.shutdown(timeout=10)
        for a in executor.actors():
            ray.kill(a.handle, no_restart=True)
    return {"bytes_moved": out}


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
