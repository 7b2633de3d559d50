"""A real engine (scripted prover, tiny memory budget) behind the real ASGI app."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.exceptions import StarletteDeprecationWarning

with warnings.catch_warnings():  # it nags that httpx should be httpx2; irrelevant here
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from starlette.testclient import TestClient

from cuzk.api.app import create_app
from cuzk.config import Config
from cuzk.engine.engine import Engine
from cuzk.engine.settings import EngineSettings, ProofKindSettings
from cuzk.engine.testing import ScriptedProver

KINDS = {"porep-c2": (3, "normal"), "winning-post": (1, "critical")}


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def prover() -> ScriptedProver:
    return ScriptedProver()


@pytest.fixture
def engine(prover: ScriptedProver, spans: InMemorySpanExporter) -> Iterator[Engine]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    settings = EngineSettings(
        backend="cpu",
        gpu_workers_per_device=2,
        synthesis_threads=1,
        finalizer_threads=1,
        memory_budget_bytes=1 << 20,
        proof_kinds={
            name: ProofKindSettings(name=name, partitions=n, priority=prio)
            for name, (n, prio) in KINDS.items()
        },
    )
    e = Engine(settings, prover=prover, tracer_provider=provider)
    e.start()
    yield e
    e.shutdown(timeout=5)


@pytest.fixture
def config() -> Config:
    return Config()


@pytest.fixture
def app(engine: Engine, config: Config):  # type: ignore[no-untyped-def]
    return create_app(engine, config)


@pytest.fixture
def client(app) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    with TestClient(app) as c:
        yield c
