"""A loopback OTLP/HTTP receiver: where the head and every worker actor export their spans in
the cluster tests, so a test sees the spans of all processes as a collector would."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class ExportedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    links: tuple[str, ...]  # span ids
    start_ns: int
    end_ns: int


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class SpanSink:
    """Every span exported to ``endpoint`` (``OTEL_EXPORTER_OTLP_ENDPOINT``) so far."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: list[ExportedSpan] = []
        self.endpoint = ""

    def add(self, body: bytes) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        out = []
        for rs in req.resource_spans:
            resource = {a.key: _value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    out.append(ExportedSpan(
                        s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(),
                        {a.key: _value(a.value) for a in s.attributes}, resource,
                        tuple(link.span_id.hex() for link in s.links),
                        s.start_time_unix_nano, s.end_time_unix_nano))
        with self._lock:
            self._spans.extend(out)

    def spans(self) -> list[ExportedSpan]:
        with self._lock:
            return list(self._spans)

    def wait_for(self, ready: Callable[[list[ExportedSpan]], bool],
                 timeout: float = 30.0) -> list[ExportedSpan]:
        """The spans once ``ready(spans)`` holds; AssertionError after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            if ready(spans):
                return spans
            assert time.monotonic() < deadline, sorted((s.name, s.attributes) for s in spans)
            time.sleep(0.05)

    def env(self) -> dict[str, str]:
        """The OTEL_* variables that send a process's spans here (100 ms batches)."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_SERVICE_NAME": "cuzk"}


@contextmanager
def span_sink() -> Iterator[SpanSink]:
    """A receiver on 127.0.0.1 (an ephemeral port), stopped on exit."""
    sink = SpanSink()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path == "/v1/traces":
                sink.add(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    sink.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="otlp-sink", daemon=True)
    thread.start()
    try:
        yield sink
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
