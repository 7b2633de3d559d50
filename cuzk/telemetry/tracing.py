"""OpenTelemetry SDK setup from the standard ``OTEL_*`` variables (the application's side).

``cuzk serve`` builds the TracerProvider and the inbound propagator here and hands them to the
engine and the HTTP app, which speak only the OpenTelemetry API. The variables are read from
the ``env`` mapping given (``os.environ`` by default), never written back to the process, and
each component is found the way the SDK's own auto-configuration finds it: by name, among the
installed packages' entry points (``opentelemetry_traces_exporter``,
``opentelemetry_traces_sampler``, ``opentelemetry_propagator``), so an installed exporter,
sampler or propagator package works without code here. Resource attributes go through the
SDK's ``Resource.create``.

Two choices differ from the Python SDK's auto-configuration, both the specification's:
``OTEL_TRACES_EXPORTER=otlp`` with no protocol means ``http/protobuf`` (the SDK picks gRPC),
and spans are recorded in-process (trace ids feed exemplars and the status view) but leave the
process only when ``OTEL_TRACES_EXPORTER`` or an OTLP endpoint variable asks for it, so a bare
``make serve`` stays quiet.

A value this installation cannot honour (an exporter, protocol, sampler or propagator whose
package is not installed, or a name nobody defines) is one warning line naming the variable and
what to install, and that setting is ignored; never a traceback. See docs/telemetry.md.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any
from urllib.parse import unquote

from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, Sampler

from cuzk.engine.spans import extract_context

__all__ = [
    "Tracing",
    "build_propagator",
    "build_tracer_provider",
    "configure_tracing",
    "exporters_from_env",
    "extract_context",
]

log = logging.getLogger(__name__)

# OTEL_EXPORTER_OTLP_PROTOCOL -> the exporter's entry point name and the package that has it.
OTLP_PROTOCOLS = {
    "http/protobuf": ("otlp_proto_http", "opentelemetry-exporter-otlp-proto-http"),
    "grpc": ("otlp_proto_grpc", "opentelemetry-exporter-otlp-proto-grpc"),
    "http/json": ("otlp_json_http", "opentelemetry-exporter-otlp-json-http"),
}
DEFAULT_PROTOCOL = "http/protobuf"  # the specification's default
DEFAULT_ENDPOINTS = {"grpc": "http://localhost:4317", "http": "http://localhost:4318"}
DEFAULT_PROPAGATORS = "tracecontext,baggage"
# Packages for names the specification defines (for the "install ..." hint).
KNOWN_PACKAGES = {
    ("opentelemetry_traces_exporter", "zipkin"): "opentelemetry-exporter-zipkin",
    ("opentelemetry_propagator", "b3"): "opentelemetry-propagator-b3",
    ("opentelemetry_propagator", "b3multi"): "opentelemetry-propagator-b3",
    ("opentelemetry_propagator", "jaeger"): "opentelemetry-propagator-jaeger",
    ("opentelemetry_propagator", "ottrace"): "opentelemetry-propagator-ot-trace",
    ("opentelemetry_propagator", "xray"): "opentelemetry-propagator-aws-xray",
}


@dataclass(frozen=True)
class Tracing:
    """What the application installs: the provider, the inbound propagator, and one line for
    each configured value that could not be honoured (already logged as a warning)."""

    provider: TracerProvider
    propagator: TextMapPropagator
    problems: tuple[str, ...] = field(default=())


class _Problems(list[str]):
    def add(self, line: str) -> None:
        log.warning("%s", line)
        self.append(line)


def _names(value: str | None) -> list[str]:
    return [n.strip() for n in (value or "").split(",") if n.strip()]


def _load(group: str, name: str, variable: str, problems: _Problems) -> Any | None:
    """The object an installed package registers as ``name`` in ``group``, or None with one
    line saying what to install."""
    found = entry_points(group=group, name=name)
    for ep in found:
        try:
            return ep.load()
        except Exception as e:  # a broken package: say so in one line, keep serving
            problems.add(f"{variable}: {name!r} could not be loaded ({type(e).__name__}: {e});"
                         " ignored")
            return None
    package = KNOWN_PACKAGES.get((group, name))
    hint = f"install {package}" if package else "no installed package provides it"
    problems.add(f"{variable}: {name!r} is not available ({hint}); ignored")
    return None


def _env_resource(env: Mapping[str, str]) -> Resource:
    """OTEL_RESOURCE_ATTRIBUTES (``key=value,...``, values percent-decoded) and
    OTEL_SERVICE_NAME, which wins for ``service.name``, from ``env``."""
    attrs: dict[str, str] = {}
    for item in (env.get("OTEL_RESOURCE_ATTRIBUTES") or "").split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            attrs[key.strip()] = unquote(value.strip())
    if env.get("OTEL_SERVICE_NAME"):
        attrs[SERVICE_NAME] = env["OTEL_SERVICE_NAME"]
    return Resource(attrs)


def build_resource(default_service_name: str, env: Mapping[str, str]) -> Resource:
    """The SDK's resource (``telemetry.sdk.*``, detectors) with ``default_service_name`` as the
    lowest-precedence ``service.name`` and a fresh UUID as ``service.instance.id`` (one per
    process, as the semantic conventions advise: a cluster's head and each actor process
    export under one service name); OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME from
    ``env`` win (the SDK's detectors read the process environment too; ``env`` wins key by
    key)."""
    defaults = {SERVICE_NAME: default_service_name, SERVICE_INSTANCE_ID: str(uuid.uuid4())}
    return Resource.create(defaults).merge(_env_resource(env))


def _sampler(env: Mapping[str, str], problems: _Problems) -> Sampler | None:
    """OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG as the SDK reads them; None: the
    specification's default (parentbased_always_on)."""
    name = (env.get("OTEL_TRACES_SAMPLER") or "").strip()
    if not name:
        return None
    factory = _load("opentelemetry_traces_sampler", name, "OTEL_TRACES_SAMPLER", problems)
    if factory is None:
        return None
    raw = env.get("OTEL_TRACES_SAMPLER_ARG")
    arg: float | str | None = raw
    if name in ("traceidratio", "parentbased_traceidratio"):
        try:
            arg = float(raw) if raw is not None else 1.0
        except ValueError:
            problems.add(f"OTEL_TRACES_SAMPLER_ARG: {raw!r} is not a number; using 1.0")
            arg = 1.0
    try:
        sampler = factory(arg)
    except Exception as e:  # e.g. a ratio outside [0, 1]
        problems.add(f"OTEL_TRACES_SAMPLER: {name} with argument {raw!r} failed ({e});"
                     " using parentbased_always_on")
        return None
    return sampler if isinstance(sampler, Sampler) else None


def _otlp_endpoint(env: Mapping[str, str], protocol: str) -> str:
    """The traces endpoint by the specification: the per-signal variable as is; the general one
    with ``/v1/traces`` appended for HTTP; else the default for the protocol."""
    if traces := env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return traces
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if protocol == "grpc":
        return base or DEFAULT_ENDPOINTS["grpc"]
    return (base or DEFAULT_ENDPOINTS["http"]).rstrip("/") + "/v1/traces"


def _otlp_exporter(env: Mapping[str, str], problems: _Problems) -> SpanExporter | None:
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or DEFAULT_PROTOCOL).strip()
    if protocol not in OTLP_PROTOCOLS:
        problems.add(f"OTEL_EXPORTER_OTLP_PROTOCOL: {protocol!r} is not an OTLP protocol"
                     f" ({', '.join(OTLP_PROTOCOLS)}); spans are not exported over OTLP")
        return None
    name, package = OTLP_PROTOCOLS[protocol]
    if not entry_points(group="opentelemetry_traces_exporter", name=name):
        problems.add(f"OTEL_EXPORTER_OTLP_PROTOCOL: {protocol} needs {package}, which is not"
                     " installed; spans are not exported over OTLP")
        return None
    cls = _load("opentelemetry_traces_exporter", name, "OTEL_TRACES_EXPORTER", problems)
    if cls is None:
        return None
    # Headers, timeout, compression and certificates: the exporter reads its own variables.
    exporter: SpanExporter = cls(endpoint=_otlp_endpoint(env, protocol))
    return exporter


def exporters_from_env(
    env: Mapping[str, str] | None = None, problems: list[str] | None = None
) -> list[SpanExporter]:
    """Exporters OTEL_TRACES_EXPORTER asks for. Unset: OTLP when an OTLP endpoint variable is
    set, else none (spans stay in-process). ``problems`` collects one line per unusable name."""
    env = os.environ if env is None else env
    out_problems = _Problems()
    names = env.get("OTEL_TRACES_EXPORTER")
    if names is None:
        wants_otlp = bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                          or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        names = "otlp" if wants_otlp else "none"
    out: list[SpanExporter] = []
    chosen = [n.lower() for n in _names(names)]
    if "none" not in chosen:
        for name in chosen:
            exporter: SpanExporter | None
            if name == "otlp":
                exporter = _otlp_exporter(env, out_problems)
            else:
                cls = _load("opentelemetry_traces_exporter", name, "OTEL_TRACES_EXPORTER",
                            out_problems)
                exporter = cls() if cls is not None else None
            if exporter is not None:
                out.append(exporter)
    if problems is not None:
        problems.extend(out_problems)
    return out


def build_propagator(
    env: Mapping[str, str] | None = None, problems: list[str] | None = None
) -> TextMapPropagator:
    """OTEL_PROPAGATORS (default ``tracecontext,baggage``; ``none``: no propagation) as one
    composite propagator; an unavailable name is left out with one warning line."""
    env = os.environ if env is None else env
    out_problems = _Problems()
    names = _names(env.get("OTEL_PROPAGATORS") or DEFAULT_PROPAGATORS)
    propagators: list[TextMapPropagator] = []
    if "none" not in [n.lower() for n in names]:
        for name in names:
            cls = _load("opentelemetry_propagator", name, "OTEL_PROPAGATORS", out_problems)
            if cls is not None:
                propagators.append(cls())
    if problems is not None:
        problems.extend(out_problems)
    return CompositePropagator(propagators)


def configure_tracing(
    default_service_name: str = "cuzk",
    env: Mapping[str, str] | None = None,
    processors: Sequence[SpanProcessor] = (),
    export_processor: Callable[[SpanExporter], SpanProcessor] = BatchSpanProcessor,
) -> Tracing:
    """Provider and propagator from ``env`` (``os.environ`` by default); ``default_service_name``
    applies only when neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES names one."""
    env = os.environ if env is None else env
    problems = _Problems()
    # The default sampler is given, not left to the SDK, which would read os.environ.
    sampler = _sampler(env, problems) or ParentBased(ALWAYS_ON)
    provider = TracerProvider(resource=build_resource(default_service_name, env),
                              sampler=sampler)
    exporter_problems: list[str] = []
    for exporter in exporters_from_env(env, exporter_problems):
        provider.add_span_processor(export_processor(exporter))
    for proc in processors:
        provider.add_span_processor(proc)
    propagator_problems: list[str] = []
    propagator = build_propagator(env, propagator_problems)
    every = (*problems, *exporter_problems, *propagator_problems)
    return Tracing(provider, propagator, every)


def build_tracer_provider(
    service_name: str = "cuzk",
    env: Mapping[str, str] | None = None,
    processors: Sequence[SpanProcessor] = (),
) -> TracerProvider:
    """The provider :func:`configure_tracing` builds (``service_name`` is the default name)."""
    return configure_tracing(service_name, env, processors).provider
