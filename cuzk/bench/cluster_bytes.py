"""The cluster bench's bytes moved between nodes per partition with the real (CPU) prover.

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

    from cuzk.bench.samples import sample_inputs
    from cuzk.circuits.registry import bundled_circuits
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
    if not executor.wait_for_cpu_workers(300):  # both nodes synthesize, as measured
        raise RuntimeError("the CPU workers did not answer within 300 s")
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
