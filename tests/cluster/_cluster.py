"""The test cluster (``cuzk.cluster.local``), shared by every module of this directory, and
what the tests read from Ray."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from cuzk.cluster import local
from cuzk.cluster.local import MB, STORE_BYTES, add_gpu_node

__all__ = ["MB", "STORE_BYTES", "add_gpu_node", "gpu_node", "shutdown_shared", "spilled_bytes",
           "two_nodes"]

_SHARED: list[tuple[AbstractContextManager[Any], Any]] = []


@contextmanager
def two_nodes() -> Iterator[Any]:
    """The run's two-node cluster, started on first use and shared by every module after it
    (starting one costs 30-80 s on a loaded 2-core machine); ``shutdown_shared`` ends it. A
    module leaves it as it found it: its head kills the actors it placed."""
    if not _SHARED:
        ctx = local.two_nodes()
        _SHARED.append((ctx, ctx.__enter__()))
    yield _SHARED[0][1]


def shutdown_shared() -> None:
    if _SHARED:
        ctx, _ = _SHARED.pop()
        ctx.__exit__(None, None, None)


def gpu_node(cluster: Any) -> Any:
    """The worker node with the logical GPU."""
    return next(n for n in cluster.worker_nodes)


def spilled_bytes() -> int:
    """Bytes Ray spilled from object stores to disk so far (must stay 0 in these tests)."""
    import ray
    from ray._private.internal_api import memory_summary

    # this cluster's address, not /tmp/ray/ray_current_cluster: that file names whichever
    # cluster on the machine started last (other test runs, other users)
    text = memory_summary(address=ray.get_runtime_context().gcs_address, stats_only=True)
    for line in text.splitlines():
        if line.strip().startswith("Spilled"):
            # "Spilled 12 MiB, 3 objects, avg write throughput ..."
            amount, unit = line.split()[1:3]
            scale = {"MiB": MB, "GiB": 1 << 30, "KiB": 1 << 10, "B": 1}[unit.rstrip(",")]
            return int(float(amount) * scale)
    return 0
