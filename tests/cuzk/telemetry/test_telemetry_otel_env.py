"""Each OTEL_* variable cuzk honours, as the specification says, read from the ``env`` given
(never the process's by accident), with an OTLP receiver on loopback for what goes on the wire.
docs/telemetry.md is the list these tests pin."""

from __future__ import annotations

import errno
import json
import os
import socket
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import entry_points

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from starlette.exceptions import StarletteDeprecationWarning

with warnings.catch_warnings():  # it nags that httpx should be httpx2; irrelevant here
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from starlette.testclient import TestClient

from cuzk.api.app import create_app
from cuzk.cli.serve import otel_environment
from cuzk.config import Config, TelemetryConfig
from cuzk.engine.engine import Engine
from cuzk.engine.settings import EngineSettings, ProofKindSettings
from cuzk.simulated_prover import ScriptedProver
from cuzk.telemetry.tracing import configure_tracing, exporters_from_env

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"


def installed(group: str, name: str) -> bool:
    return bool(entry_points(group=group, name=name))


@dataclass
class Receiver:
    url: str
    posts: list[tuple[str, str, bytes]] = field(default_factory=list)  # path, type, body
    arrived: threading.Event = field(default_factory=threading.Event)


def _serve(host: str, port: int) -> tuple[ThreadingHTTPServer, Receiver]:
    receiver = Receiver("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            receiver.posts.append((self.path, self.headers.get("Content-Type", ""), body))
            receiver.arrived.set()
            self.send_response(200)
            self.send_header("Content-Type", self.headers.get("Content-Type", ""))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    receiver.url = f"http://{host}:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server, rec = _serve("127.0.0.1", 0)
    yield rec
    server.shutdown()
    server.server_close()


def _export_one_span(env: dict[str, str]) -> tuple[str, ...]:
    """Build tracing from ``env``, end one span, flush; the problems it reported."""
    tracing = configure_tracing("cuzk", env, export_processor=SimpleSpanProcessor)
    tracing.provider.get_tracer("t").start_span("probe").end()
    tracing.provider.shutdown()
    return tracing.problems


def _engine(provider: TracerProvider) -> Engine:
    settings = EngineSettings(
        memory_budget_bytes=1 << 20,
        proof_kinds={"winning-post": ProofKindSettings("winning-post", 1, "critical")},
    )
    return Engine(settings, prover=ScriptedProver(), tracer_provider=provider)


@pytest.fixture(autouse=True)
def _no_otel_in_process_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every value comes from the ``env`` argument: none may leak in from the process."""
    for key in list(os.environ):
        if key.startswith("OTEL_"):
            monkeypatch.delenv(key)


# ------------------------------------------------------------------ resource: service.name


def test_service_name_from_resource_attributes_wins_over_the_default() -> None:
    env = {"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs,deployment.environment=prod%20eu"}
    attrs = configure_tracing("cuzk", env).provider.resource.attributes
    assert attrs["service.name"] == "from-attrs"
    assert attrs["deployment.environment"] == "prod eu"  # percent-decoded, as the spec says
    assert configure_tracing("cuzk", {}).provider.resource.attributes["service.name"] == "cuzk"


def test_service_name_variable_in_the_env_argument_is_honoured() -> None:
    """Issue 19: OTEL_SERVICE_NAME in ``env`` (not in os.environ) names the service, and it
    beats service.name in OTEL_RESOURCE_ATTRIBUTES."""
    assert "OTEL_SERVICE_NAME" not in os.environ
    env = {"OTEL_SERVICE_NAME": "prover-7", "OTEL_RESOURCE_ATTRIBUTES": "service.name=other"}
    assert configure_tracing("cuzk", env).provider.resource.attributes["service.name"] == (
        "prover-7")


def test_serve_passes_the_config_endpoint_without_changing_the_environment() -> None:
    config = Config(telemetry=TelemetryConfig(otlp_endpoint="http://collector:4318"))
    environ = {"PATH": "/bin"}
    env = otel_environment(config, environ)
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://collector:4318"
    assert environ == {"PATH": "/bin"}  # a copy, never the process's own
    mine = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://mine:4318"}
    assert otel_environment(config, mine)["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://mine:4318"


# ------------------------------------------------------------------ exporter and protocol


def test_http_protobuf_posts_protobuf_to_v1_traces(receiver: Receiver) -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
           "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
    assert _export_one_span(env) == ()
    ((path, ctype, body),) = receiver.posts
    assert path == "/v1/traces" and ctype == "application/x-protobuf"
    req = ExportTraceServiceRequest()
    req.ParseFromString(body)
    assert [s.name for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans] == [
        "probe"]


def test_http_json_sends_json_or_says_in_one_line_that_it_cannot(receiver: Receiver) -> None:
    """http/json never sends protobuf: with the JSON exporter installed the body is OTLP/JSON;
    without it, one line names the package and nothing is sent."""
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}
    problems = _export_one_span(env)
    if installed("opentelemetry_traces_exporter", "otlp_json_http"):
        assert problems == ()
        ((path, ctype, body),) = receiver.posts
        assert path == "/v1/traces" and ctype.startswith("application/json")
        doc = json.loads(body)
        spans = [s["name"] for rs in doc["resourceSpans"] for ss in rs["scopeSpans"]
                 for s in ss["spans"]]
        assert spans == ["probe"]
    else:
        assert len(problems) == 1 and "opentelemetry-exporter-otlp-json-http" in problems[0]
        assert receiver.posts == []


def test_the_protocol_comes_from_the_variable_not_the_port() -> None:
    """No project rule: an endpoint on port 4317 is still http/protobuf unless the protocol
    variable says grpc."""
    (on_4317,) = exporters_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"})
    assert isinstance(on_4317, Http)
    (grpc,) = exporters_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
                                  "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"})
    assert isinstance(grpc, Grpc)
    for exporter in (on_4317, grpc):
        exporter.shutdown()


def test_nothing_is_exported_unless_asked() -> None:
    """A quiet default for ``make serve``: no exporter variable, no endpoint, no export."""
    assert exporters_from_env({}) == []
    assert exporters_from_env({"OTEL_TRACES_EXPORTER": "none",
                               "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) == []


def test_explicit_otlp_uses_the_specification_default_endpoint() -> None:
    """OTEL_TRACES_EXPORTER=otlp and no endpoint: http://localhost:4318/v1/traces."""
    try:
        server, rec = _serve("127.0.0.1", 4318)
    except OSError as e:
        if e.errno != errno.EADDRINUSE:
            raise
        pytest.skip("127.0.0.1:4318 is taken on this machine (a collector running?)")
    try:
        if socket.getaddrinfo("localhost", 4318)[0][0] == socket.AF_INET6:
            with socket.socket(socket.AF_INET6) as s:  # ::1 must refuse, not swallow, the post
                if s.connect_ex(("::1", 4318)) == 0:
                    pytest.skip("[::1]:4318 is taken on this machine")
        assert _export_one_span({"OTEL_TRACES_EXPORTER": "otlp"}) == ()
        assert rec.arrived.wait(10)
        assert rec.posts[0][:2] == ("/v1/traces", "application/x-protobuf")
    finally:
        server.shutdown()
        server.server_close()


def test_an_exporter_that_is_not_installed_is_one_line_not_a_traceback() -> None:
    assert not installed("opentelemetry_traces_exporter", "zipkin")
    problems: list[str] = []
    assert exporters_from_env({"OTEL_TRACES_EXPORTER": "zipkin"}, problems) == []
    assert problems == ["OTEL_TRACES_EXPORTER: 'zipkin' is not available"
                        " (install opentelemetry-exporter-zipkin); ignored"]
    problems.clear()
    (_console,) = exporters_from_env({"OTEL_TRACES_EXPORTER": "nosuch, console"}, problems)
    assert len(problems) == 1 and "'nosuch'" in problems[0]


# ------------------------------------------------------------------ sampler


def test_always_off_gives_no_trace_id_for_a_trace_that_does_not_exist() -> None:
    tracing = configure_tracing("cuzk", {"OTEL_TRACES_SAMPLER": "always_off"})
    engine = _engine(tracing.provider)
    with engine, TestClient(create_app(engine, Config())) as client:
        job = client.post("/v1/proofs", json={"proof_kind": "winning-post",
                                              "inputs": [{"x": 1}]}).json()
        assert job["trace_id"] is None
        done = client.get(f"/v1/proofs/{job['id']}?wait=10").json()
        assert done["state"] == "succeeded" and done["trace_id"] is None


def test_an_unknown_sampler_is_one_line_and_the_default() -> None:
    tracing = configure_tracing("cuzk", {"OTEL_TRACES_SAMPLER": "sometimes"})
    assert len(tracing.problems) == 1 and "OTEL_TRACES_SAMPLER" in tracing.problems[0]
    span = tracing.provider.get_tracer("t").start_span("x")
    assert span.get_span_context().trace_flags.sampled  # parentbased_always_on
    span.end()


# ------------------------------------------------------------------ propagators


def _submit_with(headers: dict[str, str], env: dict[str, str]) -> tuple[dict, tuple[str, ...]]:
    tracing = configure_tracing("cuzk", env)
    engine = _engine(tracing.provider)
    app = create_app(engine, Config(), propagator=tracing.propagator)
    with engine, TestClient(app) as client:
        job = client.post("/v1/proofs", headers=headers,
                          json={"proof_kind": "winning-post", "inputs": [{"x": 2}]}).json()
        assert client.get(f"/v1/proofs/{job['id']}?wait=10").json()["state"] == "succeeded"
    return job, tracing.problems


def test_b3_header_continues_the_client_trace() -> None:
    """OTEL_PROPAGATORS=b3: a b3 header is the parent (a declared dependency, so CI has it);
    without the package, one line says what to install."""
    b3 = {"b3": f"{TRACE_ID}-{SPAN_ID}-1"}
    if not installed("opentelemetry_propagator", "b3"):
        if os.environ.get("CI") == "true":
            pytest.fail("opentelemetry-propagator-b3 is a dependency; CI must install it")
        job, problems = _submit_with(b3, {"OTEL_PROPAGATORS": "b3"})
        assert problems == ("OTEL_PROPAGATORS: 'b3' is not available"
                            " (install opentelemetry-propagator-b3); ignored",)
        assert job["trace_id"] != TRACE_ID
        return
    job, problems = _submit_with(b3, {"OTEL_PROPAGATORS": "b3"})
    assert problems == () and job["trace_id"] == TRACE_ID
    # b3 alone: a W3C header is not read.
    tp = {"traceparent": f"00-{TRACE_ID}-{SPAN_ID}-01"}
    assert _submit_with(tp, {"OTEL_PROPAGATORS": "b3"})[0]["trace_id"] != TRACE_ID


def test_default_propagators_read_traceparent_and_none_reads_nothing() -> None:
    tp = {"traceparent": f"00-{TRACE_ID}-{SPAN_ID}-01"}
    assert _submit_with(tp, {})[0]["trace_id"] == TRACE_ID
    assert _submit_with(tp, {"OTEL_PROPAGATORS": "none"})[0]["trace_id"] != TRACE_ID
