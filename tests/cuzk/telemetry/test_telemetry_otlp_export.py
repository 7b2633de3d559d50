"""Spans really leave the process over OTLP/HTTP when the standard OTEL_* variables say so."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from cuzk.engine.engine import Engine
from cuzk.engine.settings import EngineSettings, ProofKindSettings
from cuzk.simulated_prover import ScriptedProver
from cuzk.telemetry.tracing import build_tracer_provider


class _Collector(BaseHTTPRequestHandler):
    received: ClassVar[list[ExportTraceServiceRequest]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/v1/traces":
            req = ExportTraceServiceRequest()
            req.ParseFromString(body)
            type(self).received.append(req)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector():
    _Collector.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Collector.received
    server.shutdown()


def test_spans_are_exported_over_otlp_http(collector, monkeypatch):
    endpoint, received = collector
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "prover-under-test")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_on")
    settings = EngineSettings(
        backend="cpu",
        memory_budget_bytes=1 << 20,
        proof_kinds={"winning-post": ProofKindSettings("winning-post", 1, "critical")},
    )
    provider = build_tracer_provider(settings.service_name)  # as cuzk serve wires it
    engine = Engine(settings, prover=ScriptedProver(), tracer_provider=provider).start()
    job = engine.submit("winning-post", [{"tag": "x"}])
    assert engine.wait(job.id, 10).state == "succeeded"
    engine.shutdown(timeout=10)
    provider.shutdown()  # flushes the batch processor

    spans = {}
    services = set()
    for req in received:
        for rs in req.resource_spans:
            for attr in rs.resource.attributes:
                if attr.key == "service.name":
                    services.add(attr.value.string_value)
            for ss in rs.scope_spans:
                for span in ss.spans:
                    spans.setdefault(span.name, []).append(span)
    assert services == {"prover-under-test"}
    for name in ("cuzk.job", "cuzk.partition", "cuzk.synthesis", "cuzk.gpu", "cuzk.finalize"):
        assert len(spans.get(name, [])) == 1, (name, sorted(spans))
    (job_span,) = spans["cuzk.job"]
    assert job_span.trace_id.hex() == job.trace_id
    job_attrs = {a.key: a.value.string_value for a in job_span.attributes}
    assert job_attrs["cuzk.job.id"] == job.id
    assert job_attrs["cuzk.proof_kind"] == "winning-post"
