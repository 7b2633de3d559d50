"""Step spans recorded inside a worker actor (cuzk.cluster.actor_tracing), without Ray: the
W3C carrier parents them, each actor process is its own service instance, the head's OTEL_*
travel to the actors, and an engine over a backend that records its own step spans records
none of them itself."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cuzk.cluster.actor_tracing import ActorTracer, actor_env, carrier_of
from cuzk.engine.backend import STEP
from cuzk.engine.engine import Engine
from cuzk.engine.settings import EngineSettings, ProofKindSettings
from cuzk.simulated_prover import ScriptedProver


def _tracer(worker: str, env: dict[str, str]) -> tuple[ActorTracer, InMemorySpanExporter]:
    tracer = ActorTracer(worker, "gpu", "node-1", env)
    exporter = InMemorySpanExporter()
    tracer.provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer, exporter


def test_step_span_is_a_child_of_the_carrier_with_node_link_and_own_instance():
    head = TracerProvider()
    parent = head.get_tracer("t").start_span("cuzk.partition")
    env = {"OTEL_RESOURCE_ATTRIBUTES": "service.instance.id=the-head,deployment=prod",
           "OTEL_TRACES_EXPORTER": "none"}
    tracer, exporter = _tracer("gpu-n-0", env)
    with tracer.step("cuzk.gpu", carrier_of(parent), {"cuzk.job.id": "j"}) as gpu:
        pass
    with tracer.step("cuzk.finalize", carrier_of(parent), {}, link=carrier_of(gpu)):
        pass
    gpu_span, fin = exporter.get_finished_spans()
    pctx = parent.get_span_context()
    for s in (gpu_span, fin):
        assert s.context.trace_id == pctx.trace_id and s.parent.span_id == pctx.span_id
        assert s.attributes["cuzk.node.id"] == "node-1"
        assert s.attributes["cuzk.worker.id"] == "gpu-n-0"
    assert [link.context.span_id for link in fin.links] == [gpu_span.context.span_id]
    res = gpu_span.resource.attributes
    assert res["service.instance.id"] == tracer.instance_id != "the-head"
    assert res["deployment"] == "prod" and res["cuzk.worker.role"] == "gpu"
    other, _ = _tracer("gpu-n-0", env)  # the same worker restarted: a new instance
    assert other.instance_id != tracer.instance_id


def test_a_failed_step_records_the_error_and_reraises():
    tracer, exporter = _tracer("cpu-n-0", {"OTEL_TRACES_EXPORTER": "none"})
    try:
        with tracer.step("cuzk.synthesis", {}, {}):
            raise ValueError("bad witness")
    except ValueError:
        pass
    (span,) = exporter.get_finished_spans()
    assert not span.status.is_ok and span.events[0].name == "exception"
    assert span.parent is None  # no carrier: a root span, never a crash


def test_actors_get_the_heads_otel_variables_or_are_told_tracing_is_off():
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "HOME": "/root",
               "CUZK_SERVER_TOKEN": "secret"}
    assert actor_env(environ) == {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    off = actor_env(environ, enabled=False)
    assert off["OTEL_SDK_DISABLED"] == "true"
    tracer = ActorTracer("gpu-n-0", "gpu", "node-1", off)
    assert tracer.provider is None
    with tracer.step("cuzk.gpu", {}, {}) as span:
        assert not span.get_span_context().is_valid


class _RemoteSpans(ScriptedProver):
    """A scripted prover that says it records its step spans itself (as the cluster does)."""

    def __init__(self) -> None:
        super().__init__()
        self.remote_step_spans = True
        self.traceparents: list[str | None] = []

    def gpu_phase(self, key: Any, synthesis: Any, device: str) -> Any:
        ctx = STEP.get()
        self.traceparents.append(ctx.traceparent if ctx else None)
        return super().gpu_phase(key, synthesis, device)


def test_engine_records_no_step_span_for_a_backend_that_records_its_own():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = EngineSettings(
        backend="cpu", memory_budget_bytes=1 << 20,
        proof_kinds={"winning-post": ProofKindSettings("winning-post", 1, "critical")})
    prover = _RemoteSpans()
    engine = Engine(settings, prover=prover, tracer_provider=provider).start()
    try:
        job = engine.submit("winning-post", [{"tag": "x"}])
        assert engine.wait(job.id, 30).outcome == "succeeded"
        assert engine.spans.open_spans() == []
    finally:
        engine.shutdown(timeout=10)
    names = sorted(s.name for s in exporter.get_finished_spans()
                   if s.attributes.get("cuzk.job.id") == job.id)
    assert "cuzk.gpu" not in names and "cuzk.synthesis" not in names
    assert "cuzk.finalize" not in names and names.count("cuzk.partition") == 1
    (partition,) = [s for s in exporter.get_finished_spans() if s.name == "cuzk.partition"]
    # the step is told the partition span: the span it records is that span's child
    (tp,) = prover.traceparents
    assert tp is not None and tp.split("-")[2] == format(partition.context.span_id, "016x")
