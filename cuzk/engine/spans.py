"""Engine spans over the OpenTelemetry API alone (the engine never imports the SDK).

The application hands the engine a TracerProvider (``cuzk serve`` builds one from the
``OTEL_*`` environment with ``cuzk.telemetry.tracing``); without one the engine uses the API's
global provider, which records nothing until an application installs the SDK.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, Span, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACER_NAME = "cuzk.engine"
_PROPAGATOR = TraceContextTextMapPropagator()


def extract_context(carrier: Any) -> otel_context.Context | None:
    """A parent context from a Context, a Span, or a header mapping with ``traceparent``."""
    if carrier is None:
        return None
    if isinstance(carrier, otel_context.Context):
        return carrier
    if isinstance(carrier, Span):
        return trace.set_span_in_context(carrier)
    if isinstance(carrier, Mapping):
        headers = {str(k).lower(): v for k, v in carrier.items()}
        return _PROPAGATOR.extract(headers)
    if isinstance(carrier, str):
        return _PROPAGATOR.extract({"traceparent": carrier})
    raise TypeError(f"cannot take a trace context from {type(carrier).__name__}")


def traceparent_of(span: TrackedSpan | Span | None) -> str | None:
    """The W3C ``traceparent`` of a span (stored in the journal), None for an invalid span."""
    if isinstance(span, TrackedSpan):
        span = span.span
    if span is None or not span.get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, trace.set_span_in_context(span))
    return carrier.get("traceparent")


def span_context_of(traceparent: str | None) -> trace.SpanContext | None:
    """The span context a stored ``traceparent`` names (a recovered job links to it)."""
    if not traceparent:
        return None
    sc = trace.get_current_span(_PROPAGATOR.extract({"traceparent": traceparent}))
    ctx = sc.get_span_context()
    return ctx if ctx.is_valid else None


def trace_id_of(span: TrackedSpan | Span | None) -> str | None:
    """32-hex trace id, or None for an invalid (tracing off) span."""
    if isinstance(span, TrackedSpan):
        span = span.span
    if span is None:
        return None
    ctx = span.get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None


class TrackedSpan:
    """An engine span and whether it has ended (a no-op span object is shared, so wrap it)."""

    __slots__ = ("ended", "name", "span")

    def __init__(self, name: str, span: Span) -> None:
        self.name = name
        self.span = span
        self.ended = False

    def set_attribute(self, key: str, value: Any) -> None:
        self.span.set_attribute(key, value)

    @property
    def trace_id(self) -> str | None:
        return trace_id_of(self.span)

    @property
    def sampled(self) -> bool:
        """Whether the sampler kept this span's trace (only such trace ids may be exemplars)."""
        ctx = self.span.get_span_context()
        return bool(ctx.is_valid and ctx.trace_flags.sampled)


class SpanBook:
    """Starts and ends engine spans with explicit parents, and counts the ones still open.

    Engine work hops threads, so spans are parented explicitly rather than through the
    current context. ``open_spans`` lets tests prove nothing is left open.

    ``remote_steps``: the prover's steps record their own spans where they run
    (``ProverBackend.remote_step_spans``), so :meth:`start_step` records nothing here.
    """

    def __init__(self, provider: trace.TracerProvider | None, enabled: bool = True,
                 remote_steps: bool = False) -> None:
        self.remote_steps = remote_steps
        if not enabled:
            provider = trace.NoOpTracerProvider()
        elif provider is None:
            provider = trace.get_tracer_provider()  # whatever the application installed
        self.enabled = enabled
        self.tracer = provider.get_tracer(TRACER_NAME)
        self._lock = threading.Lock()
        self._open: dict[int, TrackedSpan] = {}

    def start(
        self,
        name: str,
        parent: TrackedSpan | otel_context.Context | None,
        attributes: Mapping[str, Any] | None = None,
        links: Sequence[TrackedSpan | trace.SpanContext] = (),
    ) -> TrackedSpan:
        if isinstance(parent, TrackedSpan):
            ctx: otel_context.Context | None = trace.set_span_in_context(parent.span)
        else:
            ctx = parent
        span = self.tracer.start_span(
            name,
            context=ctx,
            attributes=dict(attributes or {}),
            links=[
                Link(c)
                for c in (t.span.get_span_context() if isinstance(t, TrackedSpan) else t
                          for t in links)
                if c.is_valid
            ],
        )
        tracked = TrackedSpan(name, span)
        with self._lock:
            self._open[id(tracked)] = tracked
        return tracked

    def start_step(
        self,
        name: str,
        parent: TrackedSpan | None,
        attributes: Mapping[str, Any] | None = None,
        links: Sequence[TrackedSpan | trace.SpanContext] = (),
    ) -> TrackedSpan:
        """A step's span (``cuzk.synthesis``, ``cuzk.gpu``, ``cuzk.finalize``). With
        ``remote_steps`` a stand-in that records nothing and carries ``parent``'s context: its
        traceparent (``StepContext.traceparent``) names the partition span, the parent of the
        span the step records in its own process; one span per step, never two."""
        if not self.remote_steps:
            return self.start(name, parent, attributes, links)
        ctx = parent.span.get_span_context() if parent is not None else \
            trace.INVALID_SPAN_CONTEXT
        tracked = TrackedSpan(name, NonRecordingSpan(ctx))
        with self._lock:
            self._open[id(tracked)] = tracked
        return tracked

    def end(self, tracked: TrackedSpan, error: BaseException | None = None) -> None:
        """End a span once; later calls do nothing, so cleanup paths can be simple."""
        with self._lock:
            if tracked.ended:
                return
            tracked.ended = True
            self._open.pop(id(tracked), None)
        if error is not None:
            tracked.span.record_exception(error)
            tracked.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        tracked.span.end()

    def open_spans(self) -> list[str]:
        with self._lock:
            return sorted(t.name for t in self._open.values())
