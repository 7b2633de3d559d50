"""The deadline watch: one thread that wakes at the nearest deadline and reports it passed.

The engine registers each unfinished job with a deadline (``watch``); when the deadline passes
and the job has not finished, ``on_passed(job)`` runs in the watch's thread (the engine
applies the kind's miss policy there). Jobs that finish first are simply skipped when their
time comes, so nothing needs unregistering.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

from cuzk.engine.jobs import Job

log = logging.getLogger(__name__)


class DeadlineWatch:
    def __init__(self, on_passed: Callable[[Job], None], clock: Callable[[], float] = time.time):
        self._on_passed = on_passed
        self._clock = clock
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Job]] = []
        self._seq = itertools.count()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self._cond:
            if self._thread is not None or self._stopped:
                return
            self._thread = threading.Thread(target=self._run, name="cuzk-deadlines", daemon=True)
        self._thread.start()

    def watch(self, job: Job) -> None:
        if job.deadline is None:
            return
        with self._cond:
            heapq.heappush(self._heap, (job.deadline, next(self._seq), job))
            self._cond.notify()

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def pending(self) -> int:
        """Watched jobs not yet finished (tests)."""
        with self._cond:
            return sum(1 for _, _, j in self._heap if not j.terminal)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stopped:
                        return
                    while self._heap and self._heap[0][2].terminal:
                        heapq.heappop(self._heap)  # finished in time: nothing to do
                    if self._heap:
                        left = self._heap[0][0] - self._clock()
                        if left <= 0:
                            job = heapq.heappop(self._heap)[2]
                            break
                        self._cond.wait(min(left, 1.0))  # re-read the clock at least once a second
                    else:
                        self._cond.wait()
            try:
                self._on_passed(job)
            except Exception:  # never let one job's handling stop the watch
                log.exception("handling the passed deadline of job %s failed", job.id)
