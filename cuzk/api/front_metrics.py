"""Counters for what the front end refuses, so an operator can see a slow-client flood, a
connection storm or a client with a wrong token on the dashboard rather than in the logs.

Reasons are a fixed set (never a client address or path), each exported from zero.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

CLOSE_REASONS = (
    "header_timeout", "body_timeout", "write_timeout", "too_many_connections", "malformed_request"
)
REFUSE_REASONS = ("unauthorized", "too_many_requests", "too_many_long_polls")


class FrontEndMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        # Metrics off: count into a private registry nobody serves.
        registry = registry if registry is not None else CollectorRegistry()
        self.connections_closed = Counter(
            "cuzk_http_connections_closed_total",
            "Connections the server closed because a client was too slow to send its request"
            " (header_timeout, body_timeout) or to read its response (write_timeout), was one too"
            " many (too_many_connections) or sent malformed HTTP (malformed_request)",
            ["reason"],
            registry=registry,
        )
        self.requests_refused = Counter(
            "cuzk_http_requests_refused_total",
            "Requests refused before any route ran: a missing or wrong bearer token"
            " (unauthorized), server.max_requests_in_flight reached (too_many_requests),"
            " server.max_long_polls or max_long_polls_per_client reached (too_many_long_polls)",
            ["reason"],
            registry=registry,
        )
        for reason in CLOSE_REASONS:
            self.connections_closed.labels(reason)
        for reason in REFUSE_REASONS:
            self.requests_refused.labels(reason)

    def connection_closed(self, reason: str) -> None:
        self.connections_closed.labels(reason).inc()

    def request_refused(self, reason: str) -> None:
        self.requests_refused.labels(reason).inc()
