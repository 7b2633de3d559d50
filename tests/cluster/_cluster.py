"""The two-node test cluster of cluster-design.md §4 (only ever started inside the namespace).

Node A (the head): one CPU, resource ``cuzk_cpu_host``. Node B: one CPU and one *logical* GPU
with no device behind it (the CPU prover, or the scripted one, plays the GPU).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

MB = 1 << 20
STORE_BYTES = 300 * MB


@contextmanager
def two_nodes() -> Iterator[Any]:
    """A started ``ray.cluster_utils.Cluster`` with this process connected as its driver."""
    assert os.environ.get("CUZK_TEST_NETNS") == "1", "Ray starts only inside the namespace"
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    # A dead node is noticed in about 5 s instead of about 15 s (the node tests remove one).
    os.environ.setdefault("RAY_health_check_period_ms", "1000")
    os.environ.setdefault("RAY_health_check_timeout_ms", "3000")
    os.environ.setdefault("RAY_health_check_failure_threshold", "5")
    import ray
    from ray.cluster_utils import Cluster

    cluster = _start(Cluster)
    try:
        ray.init(address=cluster.address, namespace="cuzk", log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def _start(cluster_cls: Any, attempts: int = 2) -> Any:
    """Start both nodes. Ray gives a raylet a fixed 30 s to register (``ray._private.node``),
    which a loaded 2-core machine can miss: one more attempt then, from scratch."""
    for attempt in range(attempts):
        cluster = None
        try:
            cluster = cluster_cls(initialize_head=True, connect=False, head_node_args={
                "num_cpus": 1, "resources": {"cuzk_cpu_host": 1},
                "object_store_memory": STORE_BYTES, "include_dashboard": False,
                "node_ip_address": "127.0.0.1"})
            cluster.add_node(num_cpus=1, num_gpus=1, object_store_memory=STORE_BYTES,
                             node_ip_address="127.0.0.1")
            cluster.wait_for_nodes()
            return cluster
        except Exception:
            if cluster is not None:
                cluster.shutdown()
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def gpu_node(cluster: Any) -> Any:
    """The worker node with the logical GPU."""
    return next(n for n in cluster.worker_nodes)


def add_gpu_node(cluster: Any) -> Any:
    return cluster.add_node(num_cpus=1, num_gpus=1, object_store_memory=STORE_BYTES,
                            node_ip_address="127.0.0.1")


def spilled_bytes() -> int:
    """Bytes Ray spilled from object stores to disk so far (must stay 0 in these tests)."""
    from ray._private.internal_api import memory_summary

    text = memory_summary(stats_only=True)
    for line in text.splitlines():
        if line.strip().startswith("Spilled"):
            # "Spilled 12 MiB, 3 objects, avg write throughput ..."
            amount, unit = line.split()[1:3]
            scale = {"MiB": MB, "GiB": 1 << 30, "KiB": 1 << 10, "B": 1}[unit.rstrip(",")]
            return int(float(amount) * scale)
    return 0
