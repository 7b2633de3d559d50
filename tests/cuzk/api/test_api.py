"""The HTTP API through the real ASGI app over a real engine (scripted prover).

Every route is exercised, and every kind of bad input gets a 4xx JSON error that names the
problem while the engine's state, the other jobs and the metrics stay exactly as they were.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.routing import Route
from starlette.testclient import TestClient

from cuzk.api.app import create_app
from cuzk.config import Config, ServerConfig, TelemetryConfig
from cuzk.engine.engine import Engine
from cuzk.errors import WitnessError
from cuzk.protocol_requests import MAX_WAIT_SECONDS
from cuzk.simulated_prover import ScriptedProver

# Starlette's TestClient nags about httpx and per-request timeouts; neither matters here.
pytestmark = pytest.mark.filterwarnings("ignore::starlette.exceptions.StarletteDeprecationWarning")

BODY_LIMIT = 16 * 1024

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_SPAN_ID = "b7ad6b7169203331"


@pytest.fixture
def config() -> Config:
    """A small body limit, so the oversize cases are cheap."""
    return Config(server=ServerConfig(max_body_bytes=BODY_LIMIT))


def numeric(tag: str) -> str:
    """A tag as a decimal string: signal values must be field elements (the API checks)."""
    return str(int.from_bytes(tag.encode(), "big"))


def porep(tag: str = "p", **extra: Any) -> dict[str, Any]:
    inputs = [{"tag": numeric(f"{tag}{i}")} for i in range(3)]
    return {"proof_kind": "porep-c2", "inputs": inputs, **extra}


def wait_done(client: TestClient, job_id: str) -> dict[str, Any]:
    r = client.get(f"/v1/proofs/{job_id}", params={"wait": 10})
    assert r.status_code == 200, r.text
    return r.json()


def snapshot(client: TestClient) -> tuple[dict[str, Any], str]:
    """Everything a bad request must leave alone: the status snapshot and the metrics."""
    status = client.get("/v1/status").json()
    # Clock readings move on their own; everything else must stay put.
    status.pop("time")
    status.pop("uptime_s", None)
    for key in status["keys"]:
        key.pop("idle_s", None)
    # The process collector's readings (RSS, CPU seconds, fds) move on their own too.
    metrics = "\n".join(
        line for line in client.get("/metrics").text.splitlines() if not line.startswith("process_")
    )
    return status, metrics


# --------------------------------------------------------------------------- happy paths


def test_submit_then_long_poll_returns_proofs(client: TestClient) -> None:
    r = client.post("/v1/proofs", json=porep("a"))
    assert r.status_code == 202, r.text
    job = r.json()
    assert r.headers["location"] == f"/v1/proofs/{job['id']}"
    assert job["proof_kind"] == "porep-c2" and job["priority"] == "normal"
    assert len(job["partitions"]) == 3
    done = wait_done(client, job["id"])
    assert done["state"] == "succeeded"
    assert [p["public"] for p in done["proofs"]] == [[numeric(f"a{i}")] for i in range(3)]
    assert all(p["phase"] == "done" for p in done["partitions"])


def test_submit_is_idempotent_on_request_id(client: TestClient, prover: ScriptedProver) -> None:
    first = client.post("/v1/proofs", json=porep(request_id="req-1")).json()
    again = client.post("/v1/proofs", json=porep(request_id="req-1"))
    assert again.status_code == 202
    assert again.json()["id"] == first["id"]
    wait_done(client, first["id"])
    assert prover.calls["synthesize"] == 3  # the repeat started nothing


def test_priority_and_default_priority(client: TestClient) -> None:
    j = client.post(
        "/v1/proofs", json={"proof_kind": "winning-post", "inputs": [{"tag": "7"}]}
    ).json()
    assert j["priority"] == "critical"
    j = client.post("/v1/proofs", json=porep(priority="low")).json()
    assert j["priority"] == "low"


def test_traceparent_makes_the_job_span_its_child(
    client: TestClient, spans: InMemorySpanExporter
) -> None:
    header = f"00-{TRACE_ID}-{PARENT_SPAN_ID}-01"
    job = client.post("/v1/proofs", json=porep(), headers={"traceparent": header}).json()
    assert job["trace_id"] == TRACE_ID
    wait_done(client, job["id"])
    deadline = time.monotonic() + 5
    while not [s for s in spans.get_finished_spans() if s.name == "cuzk.job"]:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    (span,) = [s for s in spans.get_finished_spans() if s.name == "cuzk.job"]
    assert f"{span.context.trace_id:032x}" == TRACE_ID
    assert span.parent is not None and f"{span.parent.span_id:016x}" == PARENT_SPAN_ID


def test_without_traceparent_a_new_trace(client: TestClient) -> None:
    job = client.post("/v1/proofs", json=porep()).json()
    assert re.fullmatch(r"[0-9a-f]{32}", job["trace_id"]) and job["trace_id"] != TRACE_ID


def test_cancel(client: TestClient, engine: Engine) -> None:
    client.post("/v1/workers/pause")
    job = client.post("/v1/proofs", json=porep()).json()
    r = client.delete(f"/v1/proofs/{job['id']}")
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    assert client.get(f"/v1/proofs/{job['id']}").json()["state"] == "cancelled"
    client.post("/v1/workers/resume")


def test_wait_times_out_with_current_state(client: TestClient) -> None:
    assert client.post("/v1/workers/pause").json() == {"workers_paused": True}
    job = client.post("/v1/proofs", json=porep()).json()
    t0 = time.monotonic()
    r = client.get(f"/v1/proofs/{job['id']}", params={"wait": "0.3"})
    assert 0.25 <= time.monotonic() - t0 < 3
    assert r.status_code == 200 and r.json()["state"] in ("queued", "running")
    assert client.get("/v1/status").json()["paused"] is True
    assert client.post("/v1/workers/resume").json() == {"workers_paused": False}
    assert wait_done(client, job["id"])["state"] == "succeeded"


def test_status_and_circuits(client: TestClient) -> None:
    job = client.post("/v1/proofs", json=porep()).json()
    wait_done(client, job["id"])
    status = client.get("/v1/status").json()
    assert {"workers", "jobs", "memory", "keys", "counters"} <= set(status)
    assert [j["id"] for j in status["jobs"]] == [job["id"]]  # full id, full kind
    assert status["jobs"][0]["proof_kind"] == "porep-c2"
    assert len(status["workers"]) == 2
    circuits = client.get("/v1/circuits").json()["circuits"]
    by = {c["proof_kind"]: c for c in circuits}
    assert by["porep-c2"]["partitions"] == 3 and by["winning-post"]["priority"] == "critical"
    assert by["porep-c2"]["resident"] is True


def test_preload_and_evict(client: TestClient) -> None:
    r = client.post("/v1/keys/winning-post/preload")
    assert r.status_code == 200 and r.json()["resident"] is True
    assert r.json()["proof_kind"] == "winning-post"
    keys = {k["proof_kind"] for k in client.get("/v1/status").json()["keys"]}
    assert "winning-post" in keys
    r = client.delete("/v1/keys/winning-post")
    assert r.status_code == 200 and r.json()["proof_kind"] == "winning-post"
    keys = {k["proof_kind"] for k in client.get("/v1/status").json()["keys"]}
    assert "winning-post" not in keys


def test_metrics_text_and_openmetrics_with_exemplars(client: TestClient) -> None:
    header = f"00-{TRACE_ID}-{PARENT_SPAN_ID}-01"
    job = client.post("/v1/proofs", json=porep(), headers={"traceparent": header}).json()
    wait_done(client, job["id"])
    plain = client.get("/metrics")
    assert plain.status_code == 200
    assert plain.headers["content-type"].startswith("text/plain")
    assert 'cuzk_jobs_submitted_total{proof_kind="porep-c2"} 1.0' in plain.text
    assert "# {" not in plain.text  # no exemplars in the classic format
    om = client.get("/metrics", headers={"accept": "application/openmetrics-text; version=1.0.0"})
    assert om.headers["content-type"].startswith("application/openmetrics-text")
    assert om.text.endswith("# EOF\n")
    assert re.search(
        r'^cuzk_job_duration_seconds_bucket\{.*\} \S+ # \{trace_id="' + TRACE_ID, om.text, re.M
    )


def test_metrics_can_be_disabled(engine: Engine) -> None:
    app = create_app(engine, Config(telemetry=TelemetryConfig(metrics=False)))
    with TestClient(app) as c:
        r = c.get("/metrics")
    assert r.status_code == 404 and "telemetry.metrics" in r.json()["error"]


def test_health_and_readiness(client: TestClient, engine: Engine) -> None:
    assert client.get("/healthz").json()["status"] == "ok"
    assert client.get("/readyz").status_code == 200
    engine.shutdown(timeout=5)
    r = client.get("/readyz")
    assert r.status_code == 503 and r.json()["status"] == "not ready"


def test_openapi_covers_every_route_and_body(client: TestClient, app: Any) -> None:
    schema = client.get("/openapi.json").json()
    assert schema["openapi"].startswith("3.1")
    served: set[tuple[str, str]] = set()
    for route in app.routes:
        assert isinstance(route, Route)
        for method in route.methods or ():
            if method != "HEAD":
                served.add((route.path, method.lower()))
    documented = {
        (path, method)
        for path, item in schema["paths"].items()
        for method in item
        if method in ("get", "post", "put", "delete", "patch")
    }
    assert served == documented
    body = schema["paths"]["/v1/proofs"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"] == {"$ref": "#/components/schemas/SubmitRequest"}
    submit = schema["components"]["schemas"]["SubmitRequest"]
    assert set(submit["properties"]) == {"proof_kind", "inputs", "request_id", "priority",
                                         "deadline"}
    assert submit["additionalProperties"] is False

    def refs(node: Any) -> list[str]:
        if isinstance(node, dict):
            found = [node["$ref"]] if "$ref" in node else []
            return found + [r for v in node.values() for r in refs(v)]
        if isinstance(node, list):
            return [r for v in node for r in refs(v)]
        return []

    for ref in refs(schema):
        assert ref.split("/")[-1] in schema["components"]["schemas"], ref
    for (path, method), op in (
        ((p, m), item[m]) for p, item in schema["paths"].items() for m in item if m != "parameters"
    ):
        assert op["responses"], (path, method)
        for code, response in op["responses"].items():
            if code.startswith("4"):
                ref = response["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith("/Error"), (path, method, code)


# --------------------------------------------------------------------------- bad input

_OK_INPUTS = [{"tag": "1"}] * 3
INPUTS_ABOUT = (" (one object of circuit input signals per partition; as many as the kind's"
                " partitions)")
REQUEST_ID = ("'request_id' must be a non-empty string of at most 256 characters, got {}"
              " (idempotency key: a repeat returns the same job (a new attempt after failure))")
WAIT = ("'wait' must be a number from 0 to 300, got {} (long-poll: wait up to this many seconds"
        " for the job to finish)")

BAD_REQUESTS: list[tuple[str, str, str, dict[str, Any], int, str]] = [
    # (name, method, path, httpx kwargs, status, text the error must contain)
    ("malformed-json", "POST", "/v1/proofs", {"content": b'{"proof_kind": '}, 400,
     "malformed JSON: Expecting value at line 1 column 16"),
    ("trailing-garbage", "POST", "/v1/proofs", {"content": b"{} x"}, 400, "malformed JSON"),
    ("empty-body", "POST", "/v1/proofs", {"content": b""}, 400, "request body is empty"),
    ("body-array", "POST", "/v1/proofs", {"json": [1, 2]}, 400,
     "request body must be a JSON object, got array"),
    ("body-string", "POST", "/v1/proofs", {"json": "porep-c2"}, 400,
     "must be a JSON object, got string"),
    ("nan", "POST", "/v1/proofs",
     {"content": b'{"proof_kind": "porep-c2", "inputs": [{"a": NaN}, {}, {}]}'}, 400,
     "NaN is not a JSON value"),
    ("not-utf8", "POST", "/v1/proofs", {"content": b'{"proof_kind": "\xff"}'}, 400,
     "not valid UTF-8"),
    ("missing-kind", "POST", "/v1/proofs", {"json": {"inputs": _OK_INPUTS}}, 400,
     "missing required field: 'proof_kind'"),
    ("missing-inputs", "POST", "/v1/proofs", {"json": {"proof_kind": "porep-c2"}}, 400,
     "missing required field: 'inputs'"),
    ("unknown-field", "POST", "/v1/proofs",
     {"json": {"proof_kind": "porep-c2", "inputs": _OK_INPUTS, "colour": "red"}}, 400,
     "unknown field: 'colour' (allowed: proof_kind, inputs, request_id, priority, deadline)"),
    ("kind-not-string", "POST", "/v1/proofs", {"json": {"proof_kind": 7, "inputs": []}}, 400,
     "'proof_kind' must be a non-empty string, got 7"),
    ("inputs-not-array", "POST", "/v1/proofs",
     {"json": {"proof_kind": "porep-c2", "inputs": {"tag": "x"}}}, 400,
     "'inputs' must be an array of objects, got object" + INPUTS_ABOUT),
    ("input-not-object", "POST", "/v1/proofs",
     {"json": {"proof_kind": "porep-c2", "inputs": [{}, 5, {}]}}, 400,
     "'inputs[1]' must be an object, got 5" + INPUTS_ABOUT),
    ("unknown-kind", "POST", "/v1/proofs", {"json": {"proof_kind": "nope", "inputs": [{}]}},
     404, "unknown proof kind 'nope' (available: porep-c2, winning-post)"),
    ("too-few-partitions", "POST", "/v1/proofs",
     {"json": {"proof_kind": "porep-c2", "inputs": [{}, {}]}}, 400,
     "proof kind 'porep-c2' takes 3 partition inputs (one object per partition in 'inputs'),"
     " got 2"),
    ("too-many-partitions", "POST", "/v1/proofs",
     {"json": {"proof_kind": "winning-post", "inputs": [{}, {}]}}, 400,
     "takes 1 partition input (one object per partition in 'inputs'), got 2"),
    ("bad-priority", "POST", "/v1/proofs",
     {"json": {"proof_kind": "porep-c2", "inputs": _OK_INPUTS, "priority": "urgent"}}, 400,
     "'priority' must be one of critical, high, normal, low, got \"urgent\" (how urgent the"
     " job is; defaults to the proof kind's configured priority)"),
    ("empty-request-id", "POST", "/v1/proofs",
     {"json": {"proof_kind": "porep-c2", "inputs": _OK_INPUTS, "request_id": ""}}, 400,
     REQUEST_ID.format('""')),
    ("numeric-request-id", "POST", "/v1/proofs",
     {"json": {"proof_kind": "porep-c2", "inputs": _OK_INPUTS, "request_id": 5}}, 400,
     REQUEST_ID.format("5")),
    ("kind-lone-surrogate", "POST", "/v1/proofs",
     {"content": b'{"proof_kind": "\\ud800", "inputs": [{}]}'}, 400,
     "'proof_kind' is not Unicode text: it holds a lone UTF-16 surrogate"),
    ("many-problems", "POST", "/v1/proofs",
     {"json": {"proof_kind": "", "inputs": [], "priority": "soon", "deadline": 1}}, 400,
     "'proof_kind' must be a non-empty string, got \"\"; 'priority' must be one of critical,"
     " high, normal, low, got \"soon\" (how urgent the job is; defaults to the proof kind's"
     " configured priority); 'deadline' must be an RFC 3339 time string such as"
     " '2026-12-01T16:30:00Z', got 1"),
    ("long-request-id", "POST", "/v1/proofs",
     {"json": {"proof_kind": "porep-c2", "inputs": _OK_INPUTS, "request_id": "r" * 300}}, 400,
     "'request_id' is 300 characters; at most 256 are allowed"),
    ("request-id-other-kind", "POST", "/v1/proofs",
     {"json": {"proof_kind": "winning-post", "inputs": [{}], "request_id": "seed"}}, 409,
     "this request differs in proof kind 'winning-post' (was 'porep-c2')"),
    ("oversize", "POST", "/v1/proofs",
     {"json": {"proof_kind": "porep-c2", "inputs": [{"pad": "x" * BODY_LIMIT}, {}, {}]}}, 413,
     f"larger than the limit of {BODY_LIMIT} bytes (server.max_body_bytes)"),
    ("get-unknown-job", "GET", "/v1/proofs/no-such-job", {}, 404, "no job with id 'no-such-job'"),
    ("cancel-unknown-job", "DELETE", "/v1/proofs/no-such-job", {}, 404,
     "no job with id 'no-such-job'"),
    ("wait-not-number", "GET", "/v1/proofs/{job}?wait=soon", {}, 400,
     WAIT.format('"soon"')),
    ("wait-negative", "GET", "/v1/proofs/{job}?wait=-1", {}, 400, WAIT.format('"-1"')),
    ("wait-nan", "GET", "/v1/proofs/{job}?wait=nan", {}, 400, WAIT.format('"nan"')),
    ("wait-inf", "GET", "/v1/proofs/{job}?wait=inf", {}, 400, WAIT.format('"inf"')),
    ("wait-too-long", "GET", f"/v1/proofs/{{job}}?wait={MAX_WAIT_SECONDS + 1:g}", {}, 400,
     WAIT.format(f'"{MAX_WAIT_SECONDS + 1:g}"')),
    ("wait-twice", "GET", "/v1/proofs/{job}?wait=1&wait=2", {}, 400, "'wait' given more than"),
    ("wait-unknown-job", "GET", "/v1/proofs/no-such-job?wait=1", {}, 404, "no job with id"),
    ("preload-unknown-kind", "POST", "/v1/keys/nope/preload", {}, 404,
     "unknown proof kind 'nope'"),
    ("evict-unknown-kind", "DELETE", "/v1/keys/nope", {}, 404, "unknown proof kind 'nope'"),
    ("unknown-route", "GET", "/v1/nowhere", {}, 404, "no such route: GET /v1/nowhere"),
    ("wrong-method", "PUT", "/v1/proofs", {}, 405, "method PUT not allowed on /v1/proofs"),
]  # fmt: skip


@pytest.fixture
def settled(client: TestClient) -> dict[str, Any]:
    """An engine with history: one finished job (request_id "seed") and a resident key."""
    job = client.post("/v1/proofs", json=porep(request_id="seed")).json()
    return wait_done(client, job["id"])


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "expected"),
    [case[1:] for case in BAD_REQUESTS],
    ids=[case[0] for case in BAD_REQUESTS],
)
def test_bad_input_is_refused_and_disturbs_nothing(
    client: TestClient,
    settled: dict[str, Any],
    prover: ScriptedProver,
    method: str,
    path: str,
    kwargs: dict[str, Any],
    status: int,
    expected: str,
) -> None:
    before = snapshot(client)
    calls = dict(prover.calls)
    r = client.request(method, path.replace("{job}", settled["id"]), **kwargs)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    assert expected in r.json()["error"], r.json()
    assert set(r.json()) == {"error"}
    assert snapshot(client) == before
    assert prover.calls == calls
    assert client.get(f"/v1/proofs/{settled['id']}").json() == settled


def test_bad_requests_leave_a_running_job_alone(client: TestClient, prover: ScriptedProver) -> None:
    """A job held in its GPU phase while every bad request arrives still completes normally."""
    gate = prover.hold("gpu", numeric("busy0"))
    job = client.post("/v1/proofs", json=porep("busy")).json()
    assert gate.wait_entered()
    for _, method, path, kwargs, status, _ in BAD_REQUESTS:
        if "{job}" in path or "request_id" in json.dumps(kwargs.get("json", "")):
            continue
        assert client.request(method, path, **kwargs).status_code == status
    gate.release()
    assert wait_done(client, job["id"])["state"] == "succeeded"
    submitted = client.get("/v1/status").json()["counters"]["jobs_submitted"]
    assert submitted["porep-c2"] == 1


def test_engine_input_errors_map_to_their_status(
    client: TestClient, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A WitnessError from the engine (inputs its witness generator rejects) is a 422."""

    def reject(*args: Any, **kwargs: Any) -> Any:
        raise WitnessError("unknown input signal 'leef': the circuit has no such input")

    monkeypatch.setattr(engine, "submit", reject)
    r = client.post("/v1/proofs", json=porep())
    assert r.status_code == 422
    assert r.json() == {"error": "unknown input signal 'leef': the circuit has no such input"}


def test_unexpected_engine_error_is_a_500_with_a_message(
    client: TestClient, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom() -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(engine, "status", boom)
    r = client.get("/v1/status")
    assert r.status_code == 500 and "disk on fire" in r.json()["error"]


# --------------------------------------------------------------------------- async behaviour


def _async_client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://cuzk")


def test_oversize_body_refused_while_reading(app: Any) -> None:
    """A chunked body with no Content-Length is cut off at the limit, not read to its end."""
    sent = 0

    async def body() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(1000):
            sent += 1
            yield b" " * 1024

    async def go() -> httpx.Response:
        async with _async_client(app) as c:
            return await c.post("/v1/proofs", content=body())

    r = asyncio.run(go())
    assert r.status_code == 413 and "server.max_body_bytes" in r.json()["error"]
    assert sent <= BODY_LIMIT // 1024 + 2  # stopped right after the limit, not after 1000


def test_long_poll_does_not_block_the_event_loop(app: Any, engine: Engine) -> None:
    engine.pause_workers()

    async def go() -> tuple[float, float, dict[str, Any]]:
        async with _async_client(app) as c:
            job = (await c.post("/v1/proofs", json=porep())).json()
            t0 = time.monotonic()
            poll = asyncio.create_task(c.get(f"/v1/proofs/{job['id']}", params={"wait": 30}))
            await asyncio.sleep(0.2)
            health = await c.get("/healthz")
            status = await c.get("/v1/status")
            answered = time.monotonic() - t0
            assert health.status_code == 200 and status.status_code == 200
            assert not poll.done()
            engine.resume_workers()  # the job can finish now; the poll returns at once
            result = (await asyncio.wait_for(poll, 10)).json()
            return answered, time.monotonic() - t0, result

    answered, finished, result = asyncio.run(go())
    assert answered < 2.0
    assert finished < 10.0
    assert result["state"] == "succeeded"
