"""Whole-MSM scheduling for the CPU prover: the five MSMs of a proof on a pool sized to the cores.

Each MSM runs whole on one worker (the native MSM releases the GIL): splitting MSMs into point
chunks costs more work in total, so with five MSMs and few cores the cheapest schedule is
longest first, B2 (G2, about three times a G1 point each) then C, A, B1, with H queued as soon
as its NTT, computed meanwhile on the calling thread, ends. When a worker takes the last task
and others are idle, that MSM is split by window ranges among them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

G2_COST = 3.0  # an Fp2 multiply is three Fp multiplies


def cores() -> int:
    """CPU cores this process may use (``CUZK_MSM_THREADS`` overrides, for 1-core figures)."""
    env = os.environ.get("CUZK_MSM_THREADS")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


@dataclass
class Task:
    """One MSM: ``run(threads)`` returns its point; ``cost`` orders the queue (longest first)."""

    name: str
    cost: float
    run: Callable[[int], Any]


class LongestFirst:
    """Runs tasks on ``workers`` threads, the costliest queued task first; tasks may be added
    while others run, until :meth:`close`."""

    def __init__(self, workers: int) -> None:
        self._cond = threading.Condition()
        self._queue: list[Task] = []
        self._closed = False
        self._idle = 0
        self.results: dict[str, Any] = {}
        self.order: list[str] = []  # the order tasks started in (tests check the schedule)
        self._errors: list[BaseException] = []
        self._threads = [
            threading.Thread(target=self._work, name=f"cuzk-msm-{i}", daemon=True)
            for i in range(max(1, workers))
        ]
        for t in self._threads:
            t.start()

    def add(self, task: Task, last: bool = False) -> None:
        """Queue a task; ``last`` also closes the pool in the same step, so an idle worker that
        takes it knows nothing else will come and lends its peers to it."""
        with self._cond:
            self._queue.append(task)
            self._closed = self._closed or last
            if last:
                self._cond.notify_all()
            else:
                self._cond.notify()

    @property
    def idle(self) -> int:
        """Workers waiting for a task."""
        with self._cond:
            return self._idle

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def join(self) -> dict[str, Any]:
        """Wait for every task (after :meth:`close`); re-raises the first task's error."""
        self.close()
        for t in self._threads:
            t.join()
        if self._errors:
            raise self._errors[0]
        return self.results

    def _take(self) -> tuple[Task, int] | None:
        with self._cond:
            while not self._queue and not self._closed:
                self._idle += 1
                self._cond.wait()
                self._idle -= 1
            if not self._queue:
                return None
            task = max(self._queue, key=lambda t: t.cost)
            self._queue.remove(task)
            self.order.append(task.name)
            threads = 1
            if self._closed and not self._queue:
                threads += self._idle  # they leave now: nothing else will come
            return task, threads

    def _work(self) -> None:
        while True:
            picked = self._take()
            if picked is None:
                return
            task, threads = picked
            try:
                value = task.run(threads)
            except BaseException as e:  # handed to join()
                with self._cond:
                    self._errors.append(e)
                continue
            with self._cond:
                self.results[task.name] = value
