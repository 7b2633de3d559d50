"""Tracer provider from OTEL_* variables: in-process by default, OTLP only when asked."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from cuzk.telemetry.tracing import build_tracer_provider, exporters_from_env, extract_context


def test_nothing_configured_exports_nothing_but_ids_exist():
    assert exporters_from_env({}) == []
    provider = build_tracer_provider("cuzk", env={})
    span = provider.get_tracer("t").start_span("x")
    assert span.get_span_context().is_valid
    span.end()
    assert provider.resource.attributes["service.name"] == "cuzk"


def test_otlp_exporter_by_protocol_variable():
    """The protocol is OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL's, http/protobuf by default (the
    port of the endpoint decides nothing: see test_telemetry_otel_env)."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
        OTLPSpanExporter as Grpc,
    )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as Http,
    )

    (http,) = exporters_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert isinstance(http, Http)
    (forced,) = exporters_from_env({"OTEL_TRACES_EXPORTER": "otlp",
                                    "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert isinstance(forced, Grpc)
    for exp in (http, forced):
        exp.shutdown()
    (console,) = exporters_from_env({"OTEL_TRACES_EXPORTER": "console"})
    assert isinstance(console, ConsoleSpanExporter)


def test_service_name_env_wins(monkeypatch):
    monkeypatch.setenv("OTEL_SERVICE_NAME", "prover-7")
    provider = build_tracer_provider("cuzk")
    assert provider.resource.attributes["service.name"] == "prover-7"


def test_extract_context_forms():
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert extract_context(None) is None
    from opentelemetry import trace

    for carrier in ({"traceparent": tp}, {"Traceparent": tp}, tp):
        ctx = extract_context(carrier)
        assert trace.get_current_span(ctx).get_span_context().trace_id == int(
            "4bf92f3577b34da6a3ce929d0e0e4736", 16)
    with pytest.raises(TypeError):
        extract_context(42)
