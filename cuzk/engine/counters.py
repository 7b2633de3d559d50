"""Monotonic event counters kept by the engine (the metrics collector and status read them)."""

from __future__ import annotations

import threading
from collections.abc import Hashable


class Counters:
    """``lock`` (re-entrant) lets a caller make a counter step and the state change it counts
    one step for readers that hold it too: a job concluded and counted completed, or seen
    before both (the engine's snapshot reads job states and counters under it)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._lock = self.lock
        self._values: dict[str, dict[Hashable, int]] = {}

    def inc(self, name: str, key: Hashable, n: int = 1) -> None:
        with self._lock:
            table = self._values.setdefault(name, {})
            table[key] = table.get(key, 0) + n

    def ensure(self, name: str, key: Hashable) -> None:
        """Make a series exist at zero so dashboards see it before the first event."""
        with self._lock:
            self._values.setdefault(name, {}).setdefault(key, 0)

    def get(self, name: str) -> dict[Hashable, int]:
        with self._lock:
            return dict(self._values.get(name, {}))
