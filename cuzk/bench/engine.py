"""The engine bench (``cuzk bench engine``): a backlog of mixed jobs through the real engine.

Three configurations run in one process on the same backlog: split proving with telemetry on
(what ``cuzk serve`` runs: an SDK tracer provider and the Prometheus metrics subscribed to the
engine's events), the same without split proving (the GPU worker waits for finalization) and
split proving with metrics and tracing off. Telemetry on/off runs alternate ``repeats``
times and the median is reported, so drift on a shared machine hits both alike.

Busy fraction: for each worker, the share of the time the GPU queue held at least one
partition during which that worker held a lease. Anything below 1.0 there is the engine's own
hand-off overhead (target >= 0.99).

Device utilisation: a lease is not a kernel (docs/operations.md, CuzkGpuStarvedByHost). Where
NVML answers for the prover's CUDA devices, each device's utilisation is sampled every 0.1 s
from the first submit to the last result and its mean printed beside the busy fractions (and
in the JSON, ``device_utilization``); elsewhere it reads "n/a (no NVML)" (JSON null).

``run_engine_bench`` returns an ``EngineBench``; ``cuzk.cli.bench`` prints it.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cuzk.bench import Echo, quiet
from cuzk.engine.backend import PartitionMemory, ProverBackend
from cuzk.engine.engine import Engine
from cuzk.engine.settings import EngineSettings, default_proof_kinds
from cuzk.telemetry.metrics import EngineMetrics
from cuzk.telemetry.nvml import UtilizationSampler
from cuzk.telemetry.tracing import build_tracer_provider

# Relative cost of each bundled kind for the scripted prover (the largest circuit costs most).
SCRIPTED_SCALE = {"winning-post": 0.5, "window-post": 1.5, "snap-update": 1.0, "porep-c2": 2.0}
MIX = {"winning-post": 4, "window-post": 3, "snap-update": 1, "porep-c2": 1}


@dataclass
class RunResult:
    name: str
    wall_s: float
    jobs: int
    partitions: int
    latency_s: dict[str, list[float]] = field(default_factory=dict)
    busy_fraction: dict[str, float] = field(default_factory=dict)
    failed: int = 0
    # Mean NVML utilisation per device over the backlog; None where NVML does not answer.
    device_utilization: dict[str, float] | None = None

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.wall_s if self.wall_s else 0.0

    @property
    def partitions_per_s(self) -> float:
        return self.partitions / self.wall_s if self.wall_s else 0.0

    def summary(self) -> dict[str, Any]:
        lat = {}
        for kind, xs in sorted(self.latency_s.items()):
            lat[kind] = {"p50_s": pct(xs, 50), "p95_s": pct(xs, 95), "n": len(xs)}
        return {
            "name": self.name,
            "wall_s": round(self.wall_s, 4),
            "jobs_per_s": round(self.jobs_per_s, 3),
            "partitions_per_s": round(self.partitions_per_s, 3),
            "latency": lat,
            "busy_fraction": {k: round(v, 4) for k, v in self.busy_fraction.items()},
            "device_utilization": None if self.device_utilization is None else {
                k: round(v, 4) for k, v in self.device_utilization.items()},
            "failed": self.failed,
        }


def pct(xs: Sequence[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = (len(s) - 1) * q / 100.0
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return round(s[lo] + (s[hi] - s[lo]) * (k - lo), 4)


def overlap(a: Sequence[tuple[float, float]], b: Sequence[tuple[float, float]]) -> float:
    """Total length of the intersection of two sorted lists of disjoint intervals."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def scripted_prover(scale: float = 1.0) -> ProverBackend:
    """A prover double that sleeps like a pipeline whose GPU phase is the bottleneck."""
    from cuzk.simulated_prover import ScriptedKind, ScriptedProver

    est = PartitionMemory(1 << 20, 600 << 10, 0)
    prover = ScriptedProver({k: ScriptedKind(host_bytes=8 << 20, estimate=est)
                             for k in SCRIPTED_SCALE})

    def cost(base: float) -> Callable[[Mapping[str, Any]], float]:
        return lambda inputs: base * scale * SCRIPTED_SCALE.get(str(inputs.get("kind")), 1.0)

    prover.delay("synthesize", cost(0.003))
    prover.delay("gpu", cost(0.008))
    prover.delay("finalize", cost(0.008))
    return prover


def _real_inputs(settings: EngineSettings) -> dict[str, dict] | None:
    data = Path(__file__).resolve().parent.parent / "circuits" / "data"  # cuzk/circuits/data
    out = {}
    for kind in settings.proof_kinds:
        path = data / kind / "input.json"
        if not path.exists():
            return None
        out[kind] = json.loads(path.read_text())
    return out


def _backlog(settings: EngineSettings, jobs: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    kinds = [k for k in MIX if k in settings.proof_kinds] or list(settings.proof_kinds)
    weights = [MIX.get(k, 1) for k in kinds]
    return [rng.choices(kinds, weights)[0] for _ in range(jobs)]


def run_once(
    name: str,
    settings: EngineSettings,
    prover: ProverBackend,
    backlog: Sequence[str],
    inputs: Mapping[str, Mapping[str, Any]] | None,
    timeout: float = 3600.0,
    nvml: Any = None,
) -> RunResult:
    """One engine, one backlog submitted at once, measured from first submit to last result.

    Telemetry is wired as ``cuzk serve`` wires it when the settings enable it. NVML
    utilisation of the prover's CUDA devices is sampled over the same span where it answers
    (``nvml``: the pynvml module; tests pass a fake)."""
    provider = build_tracer_provider(settings.service_name) if settings.tracing_enabled else None
    engine = Engine(replace(settings, record_intervals=True), prover, tracer_provider=provider)
    metrics = EngineMetrics(engine, nvml=False) if settings.metrics_enabled else None
    engine.start()
    try:
        for kind in set(backlog):
            engine.preload(kind)  # key loading is not what this measures
        sampler = UtilizationSampler.open(prover, nvml=nvml)
        if sampler is not None:
            sampler.start()
        t0 = time.monotonic()
        jobs = []
        try:
            for i, kind in enumerate(backlog):
                n = settings.proof_kinds[kind].partitions
                base = dict(inputs[kind]) if inputs else {"kind": kind}
                parts = [base if inputs else {**base, "tag": f"{i}.{p}"} for p in range(n)]
                jobs.append(engine.submit(kind, parts))
            for job in jobs:
                engine.wait(job.id, timeout)
            wall = time.monotonic() - t0
        finally:
            if sampler is not None:
                sampler.stop()
        result = RunResult(name, wall, len(jobs), sum(len(j.partitions) for j in jobs),
                           device_utilization=None if sampler is None else sampler.means())
        for job in jobs:
            result.latency_s.setdefault(job.proof_kind, []).append(job.duration_s())
            result.failed += job.state != "succeeded"
        queue_iv = list(engine.pipeline.gpu_queue.intervals or [])
        held = sum(b - a for a, b in queue_iv)
        for w in engine.workers:
            if w.reserved:  # critical/high work only: idle by design while others queue
                continue
            busy = overlap(queue_iv, w.intervals or [])
            result.busy_fraction[w.id] = busy / held if held else 1.0
        return result
    finally:
        engine.shutdown(30)
        if metrics is not None:
            metrics.close()
        if provider is not None:
            provider.shutdown()


@dataclass
class EngineBench:
    """The runs of one bench: split proving with telemetry on, without split proving, and split
    proving with telemetry off (each the median of its repeats), and what they give."""

    prover: str
    backlog: list[str]
    on_runs: list[RunResult]
    off_runs: list[RunResult]
    nosplit_runs: list[RunResult]

    @staticmethod
    def _median(runs: list[RunResult]) -> RunResult:
        return sorted(runs, key=lambda r: r.wall_s)[len(runs) // 2]

    @property
    def on(self) -> RunResult:
        return self._median(self.on_runs)

    @property
    def off(self) -> RunResult:
        return self._median(self.off_runs)

    @property
    def nosplit(self) -> RunResult:
        return self.nosplit_runs[0]

    @property
    def kinds(self) -> list[str]:
        return sorted(set(self.backlog))

    @property
    def split_speedup(self) -> float:
        on, nosplit = self.on, self.nosplit
        return on.jobs_per_s / nosplit.jobs_per_s if nosplit.jobs_per_s else float("nan")

    @property
    def telemetry_overhead(self) -> float:
        on, off = self.on, self.off
        return 1.0 - on.jobs_per_s / off.jobs_per_s if off.jobs_per_s else float("nan")

    @property
    def min_busy_fraction(self) -> float:
        return min(self.on.busy_fraction.values(), default=float("nan"))

    def figures(self) -> dict[str, Any]:
        """The figures as JSON (``--json``)."""
        on = self.on
        return {
            "prover": self.prover,
            "jobs": len(self.backlog),
            "runs": {"split_telemetry_on": on.summary(), "no_split": self.nosplit.summary(),
                     "telemetry_off": self.off.summary()},
            "all_runs": [r.summary() for r in self.on_runs + self.off_runs + self.nosplit_runs],
            "split_speedup": self.split_speedup,
            "telemetry_overhead": self.telemetry_overhead,
            "min_busy_fraction": self.min_busy_fraction,
            # The split+telemetry run's, beside min_busy_fraction; null without NVML.
            "device_utilization": on.summary()["device_utilization"],
        }


def run_engine_bench(
    *,
    settings: EngineSettings | None = None,
    prover: str = "auto",
    jobs: int = 40,
    seed: int = 0,
    repeats: int = 3,
    scale: float = 1.0,
    echo: Echo = quiet,
    nvml: Any = None,
) -> EngineBench:
    """Run the benchmark; ``echo`` gets a line that says what runs before the runs start.

    prover: "real" (cuzk.prover on the configured backend), "scripted" (the simulated prover:
    measures the engine, not the maths) or "auto" (real when the prover and the bundled
    circuits' inputs are available, scripted otherwise). scale multiplies scripted step times.
    nvml: the pynvml module to sample device utilisation with (tests pass a fake); by default
    pynvml where it is installed and answers.
    """
    if settings is None:
        settings = EngineSettings(proof_kinds=default_proof_kinds(), finalizer_threads=4)
    inputs = None
    which = prover
    if prover in ("auto", "real"):
        inputs = _real_inputs(settings)
        try:
            import cuzk.prover as real

            usable = inputs is not None and hasattr(real, "synthesize")
        except Exception:
            usable = False
        if not usable and prover == "real":
            raise RuntimeError("the real prover or the bundled circuit inputs are missing")
        which = "real" if usable else "scripted"
    if which == "scripted":
        inputs = None
        settings = replace(settings, memory_budget_bytes=settings.memory_budget_bytes or 8 << 30)

    def make() -> ProverBackend:
        if which == "real":
            from cuzk.prover.real_prover import RealProver

            return RealProver(settings)
        return scripted_prover(scale)

    backlog = _backlog(settings, jobs, seed)
    kinds = sorted(set(backlog))
    echo(f"cuzk bench engine: {len(backlog)} jobs "
         f"({', '.join(f'{k} x{backlog.count(k)}' for k in kinds)}), prover={which}, "
         f"{settings.gpu_workers_per_device} GPU workers/device, repeats={repeats}")
    bench = EngineBench(which, backlog, [], [], [])
    for _ in range(max(1, repeats)):
        bench.on_runs.append(run_once("split+telemetry", settings, make(), backlog, inputs,
                                      nvml=nvml))
        bench.off_runs.append(run_once(
            "split, telemetry off",
            replace(settings, metrics_enabled=False, tracing_enabled=False),
            make(), backlog, inputs, nvml=nvml))
    bench.nosplit_runs.append(run_once(
        "no split", replace(settings, split_proving=False), make(), backlog, inputs,
        nvml=nvml))
    return bench


__all__ = ["EngineBench", "RunResult", "run_engine_bench", "run_once"]
