"""The deadline bench (``cuzk bench deadlines``): a compressed Filecoin day on the simulated
prover, old order against new.

Model (seconds of the Filecoin day; ``--scale`` real seconds per model second, default 1/100,
so a 30 s epoch takes 0.3 s and an hour 36 s):

- winning-post: at random epochs (each epoch with probability ``WINNING_P``), deadline 20 s
  after the epoch starts;
- window-post: 48 deadlines a day (one every 30 min), the challenge known 10 min before the
  window opens, so 40 min from challenge to close; a miner's sectors are spread unevenly over its
  deadlines, so each deadline has a number of one-partition jobs drawn from
  ``WINDOW_PARTITIONS`` (0: an empty deadline, curio#437). Each partition is submitted when its
  vanilla proof has been read from storage: most within ``WINDOW_READ_S`` of the challenge, but
  a fraction ``WINDOW_STRAGGLER_P`` sits on a slow storage path and arrives 25-35 min after the
  challenge, that is after the next deadline's challenge and, often, after that deadline's first
  partitions: within the high class, window-post work then arrives out of deadline order (what
  arrival order gets wrong), with 5-15 min left to its close. The old order has no
  cancel-on-miss, so a window-post past its deadline keeps its place and its GPU time ahead of
  the next deadline's work (curio#193);
- background: porep-c2 (10 partitions) and snap-update (16 partitions), Poisson arrivals that
  bring the offered GPU load to 70 %, 90 % or 110 % of the GPU workers' capacity.

Per-partition phase costs (``COSTS``, model seconds, each call drawn +-20 % around them) are the
scripted prover's; nothing is measured on a GPU. The host memory budget holds about
``MEMORY_PARTITIONS`` partitions' working memory besides the keys, so synthesis runs ahead of
the GPUs only so far (memory waits are real).

Each configuration runs in one process on the same arrivals, once per order (``--orders``):
``old``, today's order (priority, then arrival; deadlines ignored: no miss policy, no
admission), ``new``, the deadline scheduler (earliest deadline first within a class,
cancel-on-miss, admission, synthesis preemption) and ``new-nopreempt``, the same without
synthesis preemption (what preemption buys). Two priority settings: ``bundled`` (winning-post
critical, window-post high, background normal) and ``flat`` (every kind normal, as an operator
who never set priorities has). Printed per run: deadlines missed per kind (a job that finished
late or was cut at its deadline), winning-post latency p50/p99 (submit to outcome, cut jobs
included), GPU busy fraction, background throughput, prediction error (median / p95 of
|predicted - actual finish|, predicted at submit), refusals, and the p99 time a critical
partition waited for a synthesis thread or for memory (the most that preempting lower-priority
synthesis could give back). The JSON (``--json``) has, per missed job, its submit lag and the
longest time one of its partitions spent in each phase.

The harness: the engine's deadlines and the scripted prover's sleeps are on the real clock, so
the driver submits on it too, each job at its planned (scaled) time, with the deadline its plan
gives (the epoch's or the window's, not relative to when the driver got round to it). On a
loaded machine the driver can fall behind; every submit's lag (planned time to the submit's
return, when the job is queued: a stall of the driver's thread anywhere in between counts) is
measured and printed (p99/max). A deadline job submitted more than ``LAG_BOUND_S`` model
seconds late has lost slack the scheduler never had: if such a job missed, or a submit came
after its deadline, the run is marked ``valid: NO`` (its misses may be the driver's), and the
misses among late submits are counted apart.

``run_bench`` returns the figures and hands each configuration's runs to ``report`` as they
end; ``cuzk.cli.bench_deadlines`` prints them.
"""

from __future__ import annotations

import math
import random
import statistics
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cuzk.bench import Echo, quiet
from cuzk.engine.backend import PartitionMemory
from cuzk.engine.engine import Engine
from cuzk.engine.scheduling import ARRIVAL, DEADLINE, Order
from cuzk.engine.settings import EngineSettings, ProofKindSettings
from cuzk.errors import DeadlineInfeasible, InputError

# Model seconds per partition: (synthesis, GPU, finalize).
COSTS: dict[str, tuple[float, float, float]] = {
    "winning-post": (0.5, 2.0, 0.2),
    "window-post": (2.0, 6.0, 0.3),
    "porep-c2": (3.0, 10.0, 0.5),
    "snap-update": (1.0, 4.0, 0.3),
}
PARTITIONS = {"winning-post": 1, "window-post": 1, "porep-c2": 10, "snap-update": 16}
BUNDLED_PRIORITY = {"winning-post": "critical", "window-post": "high", "porep-c2": "normal",
                    "snap-update": "normal"}
POLICIES = {  # (on_deadline_miss, deadline_admission), as the bundled kinds have them
    "winning-post": ("cancel", "reject"), "window-post": ("cancel", "accept"),
    "porep-c2": ("continue", "accept"), "snap-update": ("continue", "accept"),
}
DEADLINE_KINDS = ("winning-post", "window-post")
BACKGROUND = ("porep-c2", "snap-update")
EPOCH_S = 30.0
WINNING_DEADLINE_S = 20.0
WINNING_P = 0.2
WINDOW_EVERY_S = 1800.0  # 48 deadlines a day
WINDOW_SPAN_S = 2400.0  # challenge to close: 10 min before the window opens, then its 30 min
WINDOW_PARTITIONS = (0, 8, 16, 24, 32)  # per deadline, drawn; 0 is an empty deadline
WINDOW_READ_S = 600.0  # most vanilla proofs are read within 10 min of the challenge
WINDOW_STRAGGLER_P = 0.1  # a partition on a slow storage path ...
WINDOW_STRAGGLER_S = (1500.0, 2100.0)  # ... arrives 25-35 min after its challenge
GPU_WORKERS = 2
SYNTH_THREADS = 4
MEMORY_PARTITIONS = 12
JITTER = 0.2
LOADS = (0.7, 0.9, 1.1)
ORDERS: dict[str, tuple[Order, bool]] = {  # name: (order, synthesis preemption)
    "old": (ARRIVAL, False), "new": (DEADLINE, True), "new-nopreempt": (DEADLINE, False)}
LAG_BOUND_S = 2.0  # model seconds a submit may trail its plan: a tenth of winning-post's 20 s


@dataclass(frozen=True)
class Arrival:
    at: float  # model seconds from start
    kind: str
    deadline: float | None  # model seconds from start


def gpu_seconds(kind: str) -> float:
    return COSTS[kind][1] * PARTITIONS[kind]


def arrivals(hours: float, load: float, seed: int) -> list[Arrival]:
    """The day's submissions: deadline work, then background filling the load."""
    rng = random.Random(seed)
    span = hours * 3600.0
    out: list[Arrival] = []
    t = 0.0
    while t < span:  # winning-post at random epochs
        if rng.random() < WINNING_P:
            out.append(Arrival(t + rng.uniform(0, 1.0), "winning-post",
                               t + WINNING_DEADLINE_S))
        t += EPOCH_S
    challenge = 60.0 - WINDOW_EVERY_S  # the day starts with a deadline's stragglers under way
    while challenge < span:
        close = challenge + WINDOW_SPAN_S
        for _ in range(rng.choice(WINDOW_PARTITIONS)):
            late = rng.random() < WINDOW_STRAGGLER_P
            at = challenge + (rng.uniform(*WINDOW_STRAGGLER_S) if late
                              else rng.uniform(0.0, WINDOW_READ_S))
            if 0.0 <= at < span:
                out.append(Arrival(at, "window-post", close))
        challenge += WINDOW_EVERY_S
    deadline_gpu = sum(gpu_seconds(a.kind) for a in out)
    want = load * GPU_WORKERS * span - deadline_gpu
    mean_bg = statistics.mean(gpu_seconds(k) for k in BACKGROUND)
    rate = max(0.0, want / mean_bg / span)  # background jobs per model second
    t = rng.expovariate(rate) if rate else span
    while t < span:
        out.append(Arrival(t, rng.choice(BACKGROUND), None))
        t += rng.expovariate(rate)
    return sorted(out, key=lambda a: a.at)


def scripted(scale: float) -> Any:
    from cuzk.simulated_prover import ScriptedKind, ScriptedProver

    mib = 1 << 20
    prover = ScriptedProver({k: ScriptedKind(host_bytes=8 * mib,
                                             estimate=PartitionMemory(mib, mib // 2, 0))
                             for k in COSTS})

    def cost(step: int) -> Callable[[Mapping[str, Any]], float]:
        def delay(inputs: Mapping[str, Any]) -> float:
            tag = str(inputs.get("tag", ""))
            jitter = 1.0 + JITTER * (2 * (zlib.crc32(f"{tag}/{step}".encode()) / 2**32) - 1)
            return COSTS[str(inputs["kind"])][step] * jitter * scale
        return delay

    prover.delay("synthesize", cost(0))
    prover.delay("gpu", cost(1))
    prover.delay("finalize", cost(2))
    return prover


def settings(order: Order, flat: bool, preempt: bool = True) -> EngineSettings:
    mib = 1 << 20
    kinds = {
        k: ProofKindSettings(k, PARTITIONS[k], "normal" if flat else BUNDLED_PRIORITY[k],
                             on_deadline_miss=POLICIES[k][0], deadline_admission=POLICIES[k][1])
        for k in COSTS
    }
    return EngineSettings(
        backend="cpu", gpu_workers_per_device=GPU_WORKERS, synthesis_threads=SYNTH_THREADS,
        finalizer_threads=2, memory_budget_bytes=len(COSTS) * 8 * mib + MEMORY_PARTITIONS * mib,
        proof_kinds=kinds, metrics_enabled=False, tracing_enabled=False, scheduler=order,
        preempt_synthesis=preempt, record_intervals=True)


@dataclass
class Run:
    name: str
    wall_model_s: float = 0.0
    submitted: dict[str, int] = field(default_factory=dict)
    missed: dict[str, int] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)
    at_risk: dict[str, int] = field(default_factory=dict)  # admitted although predicted late
    winning_latency: list[float] = field(default_factory=list)
    busy: float = 0.0
    background_gpu_s: float = 0.0
    error: dict[str, list[float]] = field(default_factory=dict)
    critical_wait: list[float] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)  # each submit's lag behind the plan
    passed_at_submit: int = 0  # deadline already gone when the lagging driver submitted
    missed_late_submit: int = 0  # misses among jobs the driver submitted past LAG_BOUND_S
    missed_detail: list[dict[str, Any]] = field(default_factory=list)

    @property
    def late_submits(self) -> int:
        return sum(1 for x in self.lags if x > LAG_BOUND_S)

    @property
    def valid(self) -> bool:
        """Whether no miss may be the driver's doing: none of the missed jobs was submitted more
        than LAG_BOUND_S after its planned time, and no submit came after its deadline."""
        return self.missed_late_submit == 0 and self.passed_at_submit == 0

    def figures(self) -> dict[str, Any]:
        return {
            "submitted": self.submitted, "missed": self.missed, "rejected": self.rejected,
            "admitted_at_risk": self.at_risk,
            "winning_p50_s": pct(self.winning_latency, 50),
            "winning_p99_s": pct(self.winning_latency, 99),
            "gpu_busy": round(self.busy, 4),
            "background_gpu_s_per_s": round(self.background_gpu_s / self.wall_model_s, 4)
            if self.wall_model_s else 0.0,
            "prediction_abs_error_s": {k: {"p50": pct(v, 50), "p95": pct(v, 95), "n": len(v)}
                                       for k, v in sorted(self.error.items())},
            "critical_wait_p99_s": pct(self.critical_wait, 99),
            "driver_lag_p99_s": pct(self.lags, 99),
            "driver_lag_max_s": round(max(self.lags, default=0.0), 3),
            "late_submits": self.late_submits,
            "passed_at_submit": self.passed_at_submit,
            "missed_after_late_submit": self.missed_late_submit,
            "valid": self.valid,
            "missed_detail": self.missed_detail,
        }


def pct(xs: Sequence[float], q: float) -> float:
    if not xs:
        return math.nan
    s = sorted(xs)
    k = (len(s) - 1) * q / 100.0
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return round(s[lo] + (s[hi] - s[lo]) * (k - lo), 3)


def run_once(name: str, order: Order, flat: bool, plan: Sequence[Arrival], hours: float,
             scale: float, preempt: bool = True) -> Run:
    """One engine over the plan, in real time scaled by ``scale``; figures in model seconds."""
    engine = Engine(settings(order, flat, preempt), scripted(scale))
    engine.start()
    out = Run(name)
    try:
        for kind in COSTS:  # warm up: keys resident, one measured job per kind
            engine.preload(kind)
            n = PARTITIONS[kind]
            job = engine.submit(kind, [{"kind": kind, "tag": f"warm{kind}{i}"} for i in range(n)])
            engine.wait(job.id, 600)
        # Busy of the workers any class may take: the reserved one idles by design.
        regular = [w for w in engine.workers if not w.reserved]
        busy0 = sum(w.view(False).busy_seconds for w in regular)
        t0_wall = time.time()
        t0 = time.monotonic()
        jobs: list[tuple[Arrival, Any, float | None, float]] = []
        for i, a in enumerate(plan):
            left = t0 + a.at * scale - time.monotonic()
            if left > 0:
                time.sleep(left)
            out.submitted[a.kind] = out.submitted.get(a.kind, 0) + 1
            dl = None if a.deadline is None else t0_wall + a.deadline * scale
            parts = [{"kind": a.kind, "tag": f"{i}.{p}"} for p in range(PARTITIONS[a.kind])]
            try:
                job = engine.submit(a.kind, parts, deadline=dl)
            except DeadlineInfeasible:
                out.rejected[a.kind] = out.rejected.get(a.kind, 0) + 1
                continue
            except InputError:  # the driver fell behind past the deadline: the harness's fault
                out.passed_at_submit += 1
                continue
            finally:  # lag: plan to the submit's return (the job queued), the driver's stalls
                lag = max(0.0, (time.monotonic() - t0) / scale - a.at)  # and the call's own
                out.lags.append(lag)
            predicted = engine.predicted_finish(job.id) if dl is not None else None
            if job.admitted_at_risk:
                out.at_risk[a.kind] = out.at_risk.get(a.kind, 0) + 1
            jobs.append((a, job, predicted, lag))
        end = t0 + hours * 3600.0 * scale
        for a, job, _, _ in jobs:  # deadline work settles (by its deadline under the new order)
            if a.deadline is not None:
                job.wait(max(0.0, t0 + (a.deadline * 1.5) * scale - time.monotonic()) + 5.0)
        stop = max(end, time.monotonic())
        if stop > time.monotonic():
            time.sleep(stop - time.monotonic())
        wall = time.monotonic() - t0
        out.wall_model_s = wall / scale
        busy = sum(w.view(False).busy_seconds for w in regular) - busy0
        out.busy = busy / (wall * len(regular))
        for a, job, predicted, lag in jobs:
            info = job.view()
            if job.deadline is not None:
                late = (info.finished_at is None and time.time() > job.deadline) or \
                    job.deadline_missed
                if late:
                    out.missed[a.kind] = out.missed.get(a.kind, 0) + 1
                    out.missed_late_submit += lag > LAG_BOUND_S
                    phases = {ph for p in info.partitions for ph in p.phase_ms}
                    out.missed_detail.append({  # where a missed job's time went (model s)
                        "kind": a.kind, "submit_lag_s": round(lag, 3),
                        "deadline_after_submit_s": round(
                            (job.deadline - job.submitted_at) / scale, 3),
                        "duration_s": round(info.duration_s / scale, 3), "phases_s": {
                            ph: round(max(p.phase_ms.get(ph, 0.0) for p in info.partitions)
                                      / 1000.0 / scale, 3) for ph in sorted(phases)}})
                if predicted is not None and info.finished_at is not None and \
                        info.state == "succeeded":
                    out.error.setdefault(a.kind, []).append(
                        abs(info.finished_at - predicted) / scale)
            if a.kind == "winning-post" and info.finished_at is not None:
                out.winning_latency.append(info.duration_s / scale)
                for p in info.partitions:
                    waited = p.phase_ms.get("queued_synthesis", 0.0) + \
                        p.phase_ms.get("waiting_memory", 0.0)
                    out.critical_wait.append(waited / 1000.0 / scale)
            if a.kind in BACKGROUND:
                done = sum(1 for p in info.partitions if p.phase == "done")
                out.background_gpu_s += done * COSTS[a.kind][1]
        return out
    finally:
        engine.shutdown(5)


def run_bench(hours: float = 1.0, scale: float = 1 / 100, seed: int = 1,
              loads: Sequence[float] = LOADS, scenarios: Sequence[str] = ("bundled", "flat"),
              orders: Sequence[str] = tuple(ORDERS),
              echo: Echo = quiet,
              report: Callable[[str, Sequence[Run]], None] | None = None) -> dict[str, Any]:
    """Every configuration (scenario x load x order) on its day's plan; ``echo`` gets a line
    before each run, ``report`` each configuration's runs (key ``scenario/load``) at its end."""
    figures: dict[str, Any] = {"hours": hours, "scale": scale, "seed": seed, "runs": {}}
    for scenario in scenarios:
        for load in loads:
            plan = arrivals(hours, load, seed)
            results = []
            for name in orders:
                order, preempt = ORDERS[name]
                echo(f"  {scenario} priorities, load {load:.0%}, {name} order: "
                     f"{len(plan)} jobs over {hours * 3600 * scale:.0f} s ...")
                results.append(run_once(name, order, scenario == "flat", plan, hours, scale,
                                        preempt))
            key = f"{scenario}/{load:.0%}"
            figures["runs"][key] = {r.name: r.figures() for r in results}
            if report is not None:
                report(key, results)
    return figures
