"""OpenTelemetry SDK setup from the standard ``OTEL_*`` variables (the application's side).

``cuzk serve`` builds the TracerProvider here and hands it to the engine, which speaks only
the OpenTelemetry API (``cuzk.engine.spans``). Spans are recorded in-process (trace ids feed
exemplars and the status view) and leave the process only when ``OTEL_TRACES_EXPORTER`` or an
OTLP endpoint variable asks for it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
)

from cuzk.engine.spans import extract_context

__all__ = ["build_tracer_provider", "exporters_from_env", "extract_context"]


def _otlp_exporter(env: Mapping[str, str]) -> SpanExporter:
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL"
    )
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT", ""
    )
    if protocol is None:
        # The spec default is http/protobuf; an endpoint on the gRPC port means gRPC.
        protocol = "grpc" if endpoint.rstrip("/").endswith(":4317") else "http/protobuf"
    # The exporters read endpoint, headers, timeout, compression from the environment.
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[assignment]
            OTLPSpanExporter,
        )
    return OTLPSpanExporter()


def exporters_from_env(env: Mapping[str, str] | None = None) -> list[SpanExporter]:
    """Exporters the environment asks for; none when nothing is configured."""
    env = os.environ if env is None else env
    names = env.get("OTEL_TRACES_EXPORTER")
    if names is None:
        wants_otlp = bool(
            env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        )
        names = "otlp" if wants_otlp else "none"
    out: list[SpanExporter] = []
    for name in (n.strip().lower() for n in names.split(",")):
        if name == "otlp":
            out.append(_otlp_exporter(env))
        elif name == "console":
            out.append(ConsoleSpanExporter())
        elif name in ("none", ""):
            continue
        else:
            raise ValueError(f"OTEL_TRACES_EXPORTER: unsupported exporter {name!r}")
    return out


def build_tracer_provider(
    service_name: str = "cuzk",
    env: Mapping[str, str] | None = None,
    processors: Sequence[SpanProcessor] = (),
) -> TracerProvider:
    """A TracerProvider honouring OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER.

    ``service_name`` applies only when OTEL_SERVICE_NAME is not set.
    """
    env = os.environ if env is None else env
    attrs = {} if env.get("OTEL_SERVICE_NAME") else {"service.name": service_name}
    provider = TracerProvider(resource=Resource.create(attrs))  # sampler: OTEL_TRACES_SAMPLER
    for exporter in exporters_from_env(env):
        provider.add_span_processor(BatchSpanProcessor(exporter))
    for proc in processors:
        provider.add_span_processor(proc)
    return provider
