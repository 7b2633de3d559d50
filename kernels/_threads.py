"""A small shared thread pool for splitting nogil numba kernels across cores."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def cpu_count() -> int:
    """Cores this process may use (affinity-aware)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


MIN_PARALLEL_ROWS = 1 << 12  # below this many rows, threads cost more than they save


def threads_for_rows(threads: int | None, rows: int) -> int:
    """Threads for a row-split kernel over ``rows`` rows: ``threads`` (None: every core), but
    at least MIN_PARALLEL_ROWS rows each, and one below that."""
    t = cpu_count() if threads is None else max(1, int(threads))
    return max(1, min(t, rows // MIN_PARALLEL_ROWS))


def _get_pool() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=max(2, cpu_count()), thread_name_prefix="cuzk-kern"
            )
        return _pool


def run_parallel(tasks: Sequence[tuple[Callable[..., Any], tuple]]) -> list[Any]:
    """Run ``fn(*args)`` for each task; the calling thread runs the first, the pool the rest.

    Pool tasks never wait on the pool themselves, so concurrent callers cannot deadlock.
    """
    if not tasks:
        return []
    pool = _get_pool()
    futures: list[Future] = [pool.submit(fn, *args) for fn, args in tasks[1:]]
    first_fn, first_args = tasks[0]
    results = [first_fn(*first_args)]
    results.extend(f.result() for f in futures)
    return results
