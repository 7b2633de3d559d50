"""A two-node Ray cluster on this machine (tests and ``cuzk bench cluster``;
docs/cluster-design.md section 4).

Node A (the head): one CPU, resource ``cuzk_cpu_host``. Node B: one CPU and one *logical* GPU
with no device behind it (the CPU prover, or the scripted one, plays the GPU). Start it only
inside a private network namespace with nothing but loopback up (``unshare -n``): elsewhere Ray
binds the machine's own interface.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

MB = 1 << 20
STORE_BYTES = 300 * MB


def only_loopback() -> bool:
    """True when every network interface here is ``lo`` (inside ``unshare -n``)."""
    import socket

    # the kernel's answer for this process's namespace (/sys/class/net shows the namespace
    # sysfs was mounted in, not this one)
    return [name for _, name in socket.if_nameindex()] == ["lo"]


@contextmanager
def two_nodes() -> Iterator[Any]:
    """A started ``ray.cluster_utils.Cluster`` with this process connected as its driver."""
    if not only_loopback():
        raise RuntimeError("a local test cluster starts only inside `unshare -n` (lo only)")
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


def add_gpu_node(cluster: Any) -> Any:
    return cluster.add_node(num_cpus=1, num_gpus=1, object_store_memory=STORE_BYTES,
                            node_ip_address="127.0.0.1")


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
            add_gpu_node(cluster)
            cluster.wait_for_nodes()
            return cluster
        except Exception:
            if cluster is not None:
                cluster.shutdown()
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")
