"""Test-only helpers around the simulated prover: an engine wired for tests, its metrics, and a
bounded poll. Nothing under cuzk/ may import this module (tests/test_layering.py checks)."""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from cuzk.simulated_prover import ScriptedProver


def wait_until(pred: Callable[[], bool], timeout: float = 10.0, interval: float = 0.002) -> bool:
    """Poll ``pred`` until true or ``timeout``; returns the last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return bool(pred())


def make_test_engine(
    kinds: Mapping[str, Any],
    prover: ScriptedProver | None = None,
    **settings: Any,
) -> tuple[Any, ScriptedProver, Any]:
    """An engine over a ScriptedProver with an in-memory span exporter, not yet started.

    kinds: name -> (partitions, priority), or a ProofKindSettings (deadline policies).
    Returns (engine, prover, exporter).
    """
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from cuzk.engine.engine import Engine
    from cuzk.engine.settings import EngineSettings, ProofKindSettings

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings.setdefault("memory_budget_bytes", 1_000_000)
    # The scenarios count their GPU workers; the reserved lane is tested where it is named
    # (tests/cuzk/engine/test_engine_reserved_gpu.py).
    settings.setdefault("reserved_gpu_workers_per_device", 0)
    es = EngineSettings(
        proof_kinds={n: k if isinstance(k, ProofKindSettings) else ProofKindSettings(n, *k)
                     for n, k in kinds.items()},
        **settings,
    )
    prover = prover or ScriptedProver()
    engine = Engine(es, prover, tracer_provider=provider)
    if es.metrics_enabled:
        metrics_of(engine)  # subscribed before the first event, as cuzk serve does
    return engine, prover, exporter


_METRICS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def metrics_of(engine: Any) -> Any:
    """The ``cuzk.telemetry.metrics.EngineMetrics`` attached to ``engine`` (attached on the
    first call; ``make_test_engine`` attaches it at once)."""
    from cuzk.telemetry.metrics import EngineMetrics

    metrics = _METRICS.get(engine)
    if metrics is None:
        metrics = _METRICS[engine] = EngineMetrics(engine, nvml=False)
    return metrics
