"""Device memory high-water marks: a CuPy allocator that records the pool's peak use.

CuPy's memory pool reports what is in use now, not the most that ever was; installing
:meth:`PeakTracker.malloc` as the allocator (``cupy.cuda.set_allocator``) records the largest
``used_bytes()`` after every allocation, so a step's peak can be compared with its estimate.
Works with any pool that has ``malloc(size)`` and ``used_bytes()`` (tests use a fake one).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class PeakTracker:
    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.peak = int(pool.used_bytes())

    def malloc(self, size: int) -> Any:
        mem = self.pool.malloc(size)
        used = int(self.pool.used_bytes())
        if used > self.peak:
            self.peak = used
        return mem

    @contextmanager
    def step(self) -> Iterator[dict[str, int]]:
        """Measure one step: on exit ``peak_bytes`` is the most in use beyond the bytes in use
        when the step began (what the step itself needed at its peak)."""
        base = int(self.pool.used_bytes())
        outer = self.peak
        self.peak = base
        out: dict[str, int] = {"base_bytes": base}
        try:
            yield out
        finally:
            out["peak_bytes"] = self.peak - base
            self.peak = max(outer, self.peak)
