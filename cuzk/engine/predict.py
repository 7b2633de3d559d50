"""Finish-time predictions: streaming per-kind phase durations, and the queue played forward.

``PhaseEstimates`` keeps, per proof kind, the median of the last ``WINDOW`` measurements of
each partition phase (``synthesizing`` without its memory wait, ``proving``, ``finalizing``;
a median, so one stalled measurement does not move every prediction). It
starts from the figures the journal kept from the last run, else from the kind's configured
``phase_seconds``, else from the prover's prior (``ProverBackend.phase_prior``: the key's sizes
at this machine's measured rates), else knows nothing: a kind without a figure is never
predicted (no hard-coded constant stands in for a measurement). Every figure keeps its
``source`` (``SOURCES``); anything but ``measured`` is a prior until the phase is measured in
this process, and only measurements go to the journal for the next start. Once some kinds with
a prior are measured, the priors of the others are scaled per phase by the median of measured
over prior among those (what the prior's model leaves out, such as witness generation, or a
calibration run on a busy machine, is then corrected from this machine's own proofs).

``predict`` plays the engine's queues forward from now: synthesis threads and GPU workers
take the unfinished partitions in the scheduler's order (cuzk.engine.scheduling; a reserved
synthesis thread and a reserved GPU worker take only critical and high work), each for its
estimated duration less the time it has already spent in its current phase. It ignores memory
waits and treats a kind without figures as taking no time, so it is optimistic under memory
pressure; the benchmark prints its error against the measured finish.
"""

from __future__ import annotations

import heapq
import logging
import math
import statistics
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, get_args

from cuzk.engine.backend import PhasePrior
from cuzk.engine.scheduling import RESERVED_SYNTHESIS_THREADS, takes_reserved
from cuzk.protocol import PREDICTED_PHASES, EstimateSource

log = logging.getLogger(__name__)

__all__ = ["PREDICTED_PHASES", "SOURCES", "Item", "PhaseEstimates", "Priors", "predict",
           "seed_from"]
WINDOW = 31
"""Measurements per (kind, phase) whose median is the estimate."""
MEASURED, JOURNAL, CONFIGURED, PRIOR = "measured", "journal", "configured", "prior"
SOURCES: tuple[str, ...] = get_args(EstimateSource)
"""Where a figure came from: measured in this process; measured by the last run (the
journal's); configured (``phase_seconds``); the prover's prior from the key's sizes."""
assert SOURCES == (MEASURED, JOURNAL, CONFIGURED, PRIOR)


class PhaseEstimates:
    """Per proof kind and phase: the median of the latest measured seconds (thread-safe)."""

    def __init__(self, window: int = WINDOW) -> None:
        if window < 1:
            raise ValueError("window must be >= 1")
        self.window = window
        self._lock = threading.Lock()
        self._mean: dict[tuple[str, str], float] = {}  # the current estimate
        self._recent: dict[tuple[str, str], deque[float]] = {}
        self._count: dict[tuple[str, str], int] = {}
        self._source: dict[tuple[str, str], str] = {}
        self._raw_prior: dict[tuple[str, str], float] = {}  # the prover's, unscaled
        self._scale: dict[str, float] = {}  # phase -> measured / prior, over measured kinds

    def seed(self, kind: str, phase: str, seconds: float, source: str = CONFIGURED) -> None:
        """A starting figure (``source``: the journal's, configured, or a prior); the first
        seed of a (kind, phase) stays until a measurement replaces it."""
        if source not in SOURCES or source == MEASURED:
            raise ValueError(f"a seed's source is one of {SOURCES[1:]}, not {source!r}")
        if phase in PREDICTED_PHASES and math.isfinite(seconds) and seconds >= 0:
            with self._lock:
                if source == PRIOR:
                    self._raw_prior[(kind, phase)] = float(seconds)
                    seconds *= self._scale.get(phase, 1.0)
                if (kind, phase) not in self._mean:
                    self._mean[(kind, phase)] = float(seconds)
                    self._source[(kind, phase)] = source

    def observe(self, kind: str, phase: str, seconds: float) -> None:
        """One measured phase; anything not a finite non-negative number is ignored."""
        if phase not in PREDICTED_PHASES or not math.isfinite(seconds) or seconds < 0:
            return
        key = (kind, phase)
        with self._lock:
            recent = self._recent.setdefault(key, deque(maxlen=self.window))
            recent.append(float(seconds))  # the first measurement replaces a seed
            self._mean[key] = statistics.median_low(recent)  # a measured value
            self._count[key] = self._count.get(key, 0) + 1
            self._source[key] = MEASURED
            if key in self._raw_prior:
                self._rescale(phase)

    def _rescale(self, phase: str) -> None:
        """Under the lock: the phase's scale from the kinds measured that had a prior, applied
        to the kinds still on theirs."""
        ratios = [self._mean[k] / raw for k, raw in self._raw_prior.items()
                  if k[1] == phase and raw > 0 and self._source.get(k) == MEASURED]
        if not ratios:
            return
        scale = self._scale[phase] = statistics.median_low(ratios)
        for k, raw in self._raw_prior.items():
            if k[1] == phase and self._source.get(k) == PRIOR:
                self._mean[k] = raw * scale

    def get(self, kind: str, phase: str) -> float | None:
        with self._lock:
            return self._mean.get((kind, phase))

    def known(self, kind: str) -> bool:
        """A figure for every predicted phase of the kind."""
        with self._lock:
            return all((kind, ph) in self._mean for ph in PREDICTED_PHASES)

    def prior(self, kind: str) -> bool:
        """Whether a prediction of the kind still rests on a figure not measured in this
        process (the journal's, configured, or the prover's prior)."""
        with self._lock:
            return any(self._source.get((kind, ph)) != MEASURED for ph in PREDICTED_PHASES)

    def sources(self) -> dict[str, dict[str, tuple[float, str]]]:
        """kind -> phase -> (seconds, source): every figure and where it came from."""
        out: dict[str, dict[str, tuple[float, str]]] = {}
        with self._lock:
            for (kind, phase), v in self._mean.items():
                out.setdefault(kind, {})[phase] = (v, self._source[(kind, phase)])
        return out

    def figures(self) -> dict[str, dict[str, float]]:
        """kind -> phase -> seconds measured here or by the last run: what the journal keeps
        for the next start (a configured figure or a prior is not a measurement)."""
        out: dict[str, dict[str, float]] = {}
        with self._lock:
            for (kind, phase), v in self._mean.items():
                if self._source[(kind, phase)] in (MEASURED, JOURNAL):
                    out.setdefault(kind, {})[phase] = v
        return out

    def measured(self, kind: str, phase: str) -> int:
        with self._lock:
            return self._count.get((kind, phase), 0)


@dataclass(frozen=True, slots=True)
class Item:
    """One unsettled partition: its job, kind, scheduler key, phase and seconds in it."""

    job: str
    kind: str
    priority: str
    key: tuple[Any, ...]
    phase: str
    elapsed: float = 0.0


def _left(est: float, elapsed: float) -> float:
    return max(0.0, est - max(0.0, elapsed))


def predict(
    now: float,
    items: Iterable[Item],
    estimates: PhaseEstimates,
    gpu_workers: int,
    synthesis_threads: int,
    reserved_gpu_workers: int = 0,
) -> tuple[dict[str, float | None], dict[str, float]]:
    """(job -> predicted finish or None when a kind of it has no figures, priority -> GPU
    seconds of backlog). ``now`` and the finish times are on one clock (the caller's).
    ``gpu_workers`` take any class; ``reserved_gpu_workers`` more take critical and high work
    only (played like the reserved synthesis thread)."""
    figs: dict[str, tuple[float, float, float] | None] = {}

    def durations(kind: str) -> tuple[float, float, float] | None:
        if kind not in figs:
            vals = [estimates.get(kind, ph) for ph in PREDICTED_PHASES]
            figs[kind] = None if any(v is None for v in vals) else \
                (max(0.0, vals[0] or 0.0), max(0.0, vals[1] or 0.0), max(0.0, vals[2] or 0.0))
        return figs[kind]

    finish: dict[str, float] = {}
    unknown: set[str] = set()
    backlog: dict[str, float] = {}
    gpu_busy: list[float] = []  # when each worker holding a partition frees
    urgent_gpu: list[float] = []  # critical/high proving: on the reserved worker(s) first
    synth_busy: list[float] = []  # threads of any class
    urgent_busy: list[float] = []  # critical/high: on the reserved thread(s) first
    to_synth: list[Item] = []
    ready: list[tuple[tuple[Any, ...], float, Item]] = []  # (key, ready time, item) for the GPU

    def done(item: Item, t: float) -> None:
        finish[item.job] = max(finish.get(item.job, t), t)

    def add(priority: str, seconds: float) -> None:
        backlog[priority] = backlog.get(priority, 0.0) + seconds

    for it in sorted(items, key=lambda i: i.key):
        d = durations(it.kind)
        if d is None:
            unknown.add(it.job)
            d = (0.0, 0.0, 0.0)
        s, g, f = d
        if it.phase in ("queued_synthesis", "waiting_memory"):
            to_synth.append(it)
            add(it.priority, g)
        elif it.phase in ("synthesizing", "loading_key"):
            # loading_key: memory granted, its key loading; the whole synthesis is still ahead
            t = now + (s if it.phase == "loading_key" else _left(s, it.elapsed))
            (urgent_busy if takes_reserved(it.key) else synth_busy).append(t)
            ready.append((it.key, t, it))
            add(it.priority, g)
        elif it.phase == "queued_gpu":
            ready.append((it.key, now, it))
            add(it.priority, g)
        elif it.phase == "proving":
            left = _left(g, it.elapsed)
            (urgent_gpu if takes_reserved(it.key) else gpu_busy).append(now + left)
            done(it, now + left + f)
            add(it.priority, left)
        elif it.phase == "finalizing":
            done(it, now + _left(f, it.elapsed))
    n_reserved = RESERVED_SYNTHESIS_THREADS  # besides the ``synthesis_threads`` of any class
    urgent_busy.sort()
    reserved = _slots(now, urgent_busy[:n_reserved], n_reserved) if n_reserved else []
    synth = _slots(now, synth_busy + urgent_busy[n_reserved:], synthesis_threads)
    for it in to_synth:  # already in scheduler order
        s = (durations(it.kind) or (0.0, 0.0, 0.0))[0]
        pool = synth
        if reserved and takes_reserved(it.key) and reserved[0] <= synth[0]:
            pool = reserved  # the reserved thread is free no later
        start = heapq.heappop(pool)
        heapq.heappush(pool, start + s)
        ready.append((it.key, start + s, it))
    n_rgpu = max(0, reserved_gpu_workers)
    urgent_gpu.sort()
    rgpu = _slots(now, urgent_gpu[:n_rgpu], n_rgpu) if n_rgpu else []
    gpu = _slots(now, gpu_busy + urgent_gpu[n_rgpu:], gpu_workers)
    for _key, t, it in sorted(ready, key=lambda r: r[0]):
        _s, g, f = durations(it.kind) or (0.0, 0.0, 0.0)
        pool = gpu
        if rgpu and takes_reserved(it.key) and max(rgpu[0], t) <= max(gpu[0], t):
            pool = rgpu  # the reserved worker can start it no later
        start = max(heapq.heappop(pool), t)
        heapq.heappush(pool, start + g)
        done(it, start + g + f)
    out: dict[str, float | None] = {
        job: (None if job in unknown else t) for job, t in finish.items()}
    for job in unknown:
        out[job] = None
    return out, backlog


def _slots(now: float, busy: list[float], n: int) -> list[float]:
    """A heap of when each of ``n`` threads is next free (more busy ones than ``n``, as in a
    drain, queue behind each other)."""
    heap = sorted(busy)[:max(1, n)]
    heap += [now] * (max(1, n) - len(heap))
    for extra in sorted(busy)[max(1, n):]:
        t = heapq.heappop(heap)
        heapq.heappush(heap, max(t, extra))
    heapq.heapify(heap)
    return heap


def seed_from(estimates: PhaseEstimates, table: Mapping[str, Mapping[str, float]],
              source: str = JOURNAL) -> None:
    """Seed every (kind, phase) figure of ``table`` (the journal's, by default)."""
    for kind, phases in table.items():
        for phase, seconds in phases.items():
            try:
                estimates.seed(kind, phase, float(seconds), source)
            except (TypeError, ValueError):
                continue


class Priors:
    """Asks the prover for each kind's prior (``ProverBackend.phase_prior``) and seeds the
    estimates with it, below the journal's and the configured figures: the first job of a
    kind never measured is admitted (or refused) on a prediction, not blind. A prior or a
    failure is final; None ("cannot tell now": a cluster head whose GPU workers have not
    answered yet) is asked again at the kind's next ``ensure`` (the prover keeps its own
    answers, so asking again is cheap). Thread-safe; a second caller for the same kind waits
    for the first's answer, callers for other kinds do not."""

    def __init__(self, estimates: PhaseEstimates,
                 ask: Callable[[str], PhasePrior | None]) -> None:
        self._estimates = estimates
        self._ask = ask
        self._lock = threading.Lock()
        self._kind_locks: dict[str, threading.Lock] = {}
        self._done: dict[str, str | None] = {}  # kind -> basis (None: the prover had none)

    def ensure(self, kind: str) -> None:
        with self._lock:
            if kind in self._done:
                return
            kind_lock = self._kind_locks.setdefault(kind, threading.Lock())
        with kind_lock:
            self._ensure(kind)

    def _ensure(self, kind: str) -> None:
        with self._lock:
            if kind in self._done:
                return
        if self._estimates.known(kind):  # the journal's or configured figures cover it
            with self._lock:
                self._done[kind] = None
            return
        try:
            prior = self._ask(kind)
        except Exception as e:  # a missing file says so at load; no prior meanwhile
            log.warning("no prior phase durations for %s: %s", kind, e)
            with self._lock:
                self._done[kind] = None
            return
        if prior is None:
            return  # asked again next time
        for phase, seconds in prior.seconds.items():
            self._estimates.seed(kind, phase, seconds, PRIOR)
        log.info("%s: prior phase seconds %s (%s)", kind,
                 {ph: round(v, 4) for ph, v in prior.seconds.items()}, prior.basis)
        with self._lock:
            self._done[kind] = prior.basis

    def basis(self, kind: str) -> str | None:
        """How the kind's prior was worked out (None: it has none)."""
        with self._lock:
            return self._done.get(kind)
