"""Spans recorded inside a worker actor: each actor process its own TracerProvider.

The head passes its ``OTEL_*`` variables to every actor (``actor_env``, an argument of the
actor's constructor, which sets them first), so the actors export to where the head
exports. Each actor's resource adds a ``service.instance.id`` of its own (one per process: a
restarted actor is a new instance) and the node it runs on. A step's span is a child of the
partition span whose W3C ``traceparent`` came with the work (docs/cluster-design.md section 2,
"Traces"); Ray's own tracing hook is not used (private, and it adds a span to every call).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

from opentelemetry import trace
from opentelemetry.trace import Link, Span

from cuzk.engine.spans import extract_context, span_context_of, traceparent_of

__all__ = ["ActorTracer", "actor_env", "carrier_of", "instance_env", "step_attributes"]

TRACER_NAME = "cuzk.cluster.actor"


def actor_env(environ: Mapping[str, str], enabled: bool = True) -> dict[str, str]:
    """The variables the head hands its actors: every ``OTEL_*`` one it has; with tracing off
    at the head, ``OTEL_SDK_DISABLED=true`` so the actors record nothing either."""
    env = {k: v for k, v in environ.items() if k.startswith("OTEL_")}
    if not enabled:
        env["OTEL_SDK_DISABLED"] = "true"
    return env


def instance_env(environ: Mapping[str, str], instance_id: str, worker_id: str, role: str,
                 node_id: str) -> dict[str, str]:
    """``environ`` with this actor process named in ``OTEL_RESOURCE_ATTRIBUTES``: its
    ``service.instance.id`` (after the head's own, which it replaces), its node and worker."""
    env = dict(environ)
    own = {"service.instance.id": instance_id, "cuzk.node.id": node_id,
           "cuzk.worker.id": worker_id, "cuzk.worker.role": role}
    extra = ",".join(f"{k}={quote(v, safe='')}" for k, v in own.items())
    head = env.get("OTEL_RESOURCE_ATTRIBUTES", "").strip().strip(",")
    env["OTEL_RESOURCE_ATTRIBUTES"] = f"{head},{extra}" if head else extra
    return env


class ActorTracer:
    """The step spans of one actor process, exported where ``OTEL_*`` says."""

    def __init__(self, worker_id: str, role: str, node_id: str,
                 environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        self.node_id = node_id
        self.worker_id = worker_id
        self.instance_id = f"{worker_id}-{uuid.uuid4().hex[:12]}"  # one per process
        self.provider: Any = None
        self.tracer: trace.Tracer = trace.NoOpTracer()
        if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            return
        from cuzk.telemetry.tracing import configure_tracing

        env = instance_env(environ, self.instance_id, worker_id, role, node_id)
        self.provider = configure_tracing("cuzk", env).provider
        self.tracer = self.provider.get_tracer(TRACER_NAME)

    @contextmanager
    def step(self, name: str, carrier: Mapping[str, str] | None, attributes: Mapping[str, Any],
             link: Mapping[str, str] | None = None) -> Iterator[Span]:
        """The span of one step, a child of the span in the W3C ``carrier`` (the partition's),
        with the node and worker that ran it, linked to the span in ``link`` (finalize to its
        GPU phase); an exception inside is recorded on it."""
        parent = extract_context(carrier) if carrier else None
        linked = span_context_of((link or {}).get("traceparent"))
        links = [Link(linked)] if linked is not None else []
        attrs = {**attributes, "cuzk.node.id": self.node_id, "cuzk.worker.id": self.worker_id}
        span = self.tracer.start_span(name, context=parent, attributes=attrs, links=links)
        try:
            yield span
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            span.end()

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Export what is buffered now (tests; an actor killed by the OS loses its buffer)."""
        if self.provider is None:
            return True
        return bool(self.provider.force_flush(int(timeout_s * 1000)))


def carrier_of(span: Span | str | None) -> dict[str, str]:
    """A W3C carrier (``{"traceparent": ...}``) for a span or a traceparent; empty for none."""
    tp = span if isinstance(span, str) or span is None else traceparent_of(span)
    return {"traceparent": tp} if tp else {}


def step_attributes(proof_kind: str, job_id: str, partition: int) -> dict[str, Any]:
    """The attributes the engine puts on its own step spans (job id on spans only)."""
    return {"cuzk.job.id": job_id, "cuzk.proof_kind": proof_kind,
            "cuzk.partition.index": partition}
