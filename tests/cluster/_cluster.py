"""The two-node test cluster (``cuzk.cluster.local``), and what the tests read from Ray."""

from __future__ import annotations

from typing import Any

from cuzk.cluster.local import MB, STORE_BYTES, add_gpu_node, two_nodes

__all__ = ["MB", "STORE_BYTES", "add_gpu_node", "gpu_node", "spilled_bytes", "two_nodes"]


def gpu_node(cluster: Any) -> Any:
    """The worker node with the logical GPU."""
    return next(n for n in cluster.worker_nodes)


def spilled_bytes() -> int:
    """Bytes Ray spilled from object stores to disk so far (must stay 0 in these tests)."""
    import ray
    from ray._private.internal_api import memory_summary

    # this driver's cluster by address: without one Ray looks for "the" local cluster in /tmp
    # and finds other processes' clusters on a shared machine (the network namespace does not
    # hide /tmp/ray), or a stale one it cannot reach
    text = memory_summary(address=ray.get_runtime_context().gcs_address, stats_only=True)
    for line in text.splitlines():
        if line.strip().startswith("Spilled"):
            # "Spilled 12 MiB, 3 objects, avg write throughput ..."
            amount, unit = line.split()[1:3]
            scale = {"MiB": MB, "GiB": 1 << 30, "KiB": 1 << 10, "B": 1}[unit.rstrip(",")]
            return int(float(amount) * scale)
    return 0
