"""The HTTP API: a thin Starlette layer over the engine.

Every engine call runs in a worker thread, so a slow submit (witness checks), a key preload or
a long-poll never stalls the event loop. Requests are validated completely before the engine is
called (bodies and queries by the protocol's pydantic shapes, ``cuzk.api.validation``), and
every problem is answered with a 4xx JSON body ``{"error": "..."}`` that says what is wrong, so
bad input never reaches (or disturbs) the engine.

Status codes: 202 submit accepted (the same job again for a repeated ``request_id``); 400
malformed JSON, a body that is not an object, missing/unknown/mistyped fields, the wrong number
of partition inputs, a bad ``?wait``; 404 unknown job id, unknown proof kind (on submit too,
since the kind names a resource), unknown route; 405 wrong method; 409 a ``request_id`` that
names a job with a different body; 413 body over ``server.max_body_bytes`` (refused while
reading); 422 inputs the witness generator rejects; 503 (with ``Retry-After``) while draining
or when the journal cannot be written, and (body ``reason: "deadline"``, no ``Retry-After``)
for a deadline that cannot be met under ``deadline_admission = reject``; 507 a partition
larger than the whole memory budget;
500 a corrupt server-side file (naming it) or anything unexpected. In front of the routes: 401
without the bearer token when one is configured (``cuzk.api.auth``), 503 past
``server.max_requests_in_flight`` and 429 past the long-poll bounds (``cuzk.api.limits``); below
them, 408 and closed connections for slow clients (``cuzk.api.server``).
"""

from __future__ import annotations

import functools
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from opentelemetry import trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context import Context
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cuzk import __version__
from cuzk.api.auth import BearerAuth, resolve_token
from cuzk.api.front_metrics import FrontEndMetrics
from cuzk.api.input_bounds import kind_body_limit, parse_reservation
from cuzk.api.limits import Admission, InFlightLimit
from cuzk.api.openapi_front import front_end_document
from cuzk.api.signals import check_signal_values, parse_json_int
from cuzk.api.validation import PROOF_QUERY, SUBMIT, RequestInvalid
from cuzk.config import Config
from cuzk.errors import (
    CuzkError,
    DeadlineInfeasible,
    FormatError,
    InputError,
    MemoryRequestTooLarge,
    Unavailable,
)
from cuzk.logsafe import loggable
from cuzk.protocol import DEADLINE_REJECTED_STATUS, TERMINAL_STATES, CircuitInfo
from cuzk.protocol_requests import SubmitRequest, deadline_seconds
from cuzk.telemetry.metrics import EngineMetrics

if TYPE_CHECKING:
    from cuzk.engine import Engine

log = logging.getLogger("cuzk.api")

_WAIT_SLICE_SECONDS = 1.0
"""A long-poll waits in slices so a client that went away frees its thread within a second."""


class ApiError(Exception):
    """A request the API refuses before touching the engine."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def where(request: Request) -> str:
    """The request's path as a log line may show it (the client chose it: escaped)."""
    return loggable(request.url.path)


def error_response(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def server_file_fault(e: FormatError) -> JSONResponse:
    """500 naming the server-side file (and section, when known) that is wrong."""
    body: dict[str, Any] = {"error": f"server-side file fault: {e}", "file": e.path}
    section = getattr(e, "section", None)
    if section is not None:
        body["section"] = section
    body["problem"] = e.problem
    return JSONResponse(body, status_code=500)


# --------------------------------------------------------------------------- request parsing


async def read_body(request: Request, limit: int, what: str = "server.max_body_bytes") -> bytes:
    """Read a body, refusing it with 413 as soon as it passes ``limit`` bytes (``what`` names
    the limit).

    The limit is enforced on the declared Content-Length before reading and again on the bytes
    actually received (chunked bodies have no length), so an oversize body is never buffered.
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise ApiError(400, f"invalid Content-Length header: {declared!r}")
        if int(declared) > limit:
            raise ApiError(
                413,
                f"request body of {int(declared)} bytes is larger than the limit of {limit}"
                f" bytes ({what})",
            )
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(
                    413, f"request body is larger than the limit of {limit} bytes ({what})"
                )
            chunks.append(chunk)
    except ClientDisconnect:
        raise ApiError(400, "client disconnected while sending the request body") from None
    return b"".join(chunks)


def parse_json(body: bytes) -> Any:
    """Parse a JSON body; every problem is a 400 that says where."""
    if not body.strip():
        raise ApiError(400, "request body is empty; expected a JSON object")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ApiError(400, f"request body is not valid UTF-8 (byte {e.start})") from None

    def no_constants(name: str) -> Any:
        raise ValueError(f"malformed JSON: {name} is not a JSON value")

    try:
        return json.loads(text, parse_constant=no_constants, parse_int=parse_json_int)
    except json.JSONDecodeError as e:
        raise ApiError(
            400, f"malformed JSON: {e.msg} at line {e.lineno} column {e.colno}"
        ) from None
    except ValueError as e:
        raise ApiError(400, str(e)) from None
    except RecursionError:
        raise ApiError(400, "malformed JSON: nested too deeply") from None


def parse_submit(body: Any) -> SubmitRequest:
    """A ``POST /v1/proofs`` body as the protocol's ``SubmitRequest`` (400 saying every way it
    is not one)."""
    try:
        return SUBMIT.validate(body)
    except RequestInvalid as e:
        raise ApiError(400, str(e)) from None


def parse_wait(request: Request) -> float:
    """The ``?wait=`` long-poll in seconds (0 when absent)."""
    params = request.query_params
    if len(params.getlist("wait")) > 1:
        raise ApiError(400, "'wait' given more than once")
    try:
        return PROOF_QUERY.validate(dict(params)).get("wait", 0.0)
    except RequestInvalid as e:
        raise ApiError(400, str(e)) from None


# --------------------------------------------------------------------------- the app


def create_app(
    engine: Engine,
    config: Config | None = None,
    metrics: EngineMetrics | None = None,
    propagator: TextMapPropagator | None = None,
) -> Starlette:
    """Build the ASGI app over a started engine; the caller owns the engine's lifetime.

    ``metrics``: the registry ``/metrics`` serves; when ``telemetry.metrics`` is on and none
    is given, the app subscribes its own to the engine. ``propagator``: how a submit's trace
    context is read from its headers (``cuzk serve`` builds it from OTEL_PROPAGATORS); W3C
    trace context and baggage by default.
    """
    config = config or Config()
    inbound = propagator or CompositePropagator(
        [TraceContextTextMapPropagator(), W3CBaggagePropagator()])
    if metrics is None and config.telemetry.metrics:
        metrics = EngineMetrics(engine)
    engine_metrics = metrics
    body_limit = config.server.max_body_bytes
    server = config.server
    admission = Admission(
        server.max_requests_in_flight, server.max_long_polls, server.max_long_polls_per_client
    )
    # Long-polls wait on threads of their own (one each, as many as may wait), so they can
    # never starve submits of threads.
    long_polls = anyio.CapacityLimiter(server.max_long_polls)

    async def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    def endpoint(
        fn: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        """Map refusals and engine errors to JSON responses: 4xx for input, 5xx otherwise."""

        @functools.wraps(fn)
        async def wrapped(request: Request) -> Response:
            try:
                return await fn(request)
            except ApiError as e:
                return error_response(e.status, e.message)
            except FormatError as e:
                # Clients never send files: a corrupt key or circuit is the server's fault.
                log.error("server file fault on %s %s: %s", request.method, where(request), e)
                return server_file_fault(e)
            except InputError as e:
                response = error_response(getattr(e, "http_status", 400), str(e))
                if getattr(e, "job_id", None):  # 409: where the existing job is
                    response.headers["Location"] = f"/v1/proofs/{e.job_id}"  # type: ignore[attr-defined]
                return response
            except DeadlineInfeasible as e:
                return JSONResponse({
                    "error": str(e), "reason": "deadline", "proof_kind": e.proof_kind,
                    "deadline": e.deadline, "predicted_finish": e.predicted_finish,
                    "slack_s": e.slack_s}, status_code=DEADLINE_REJECTED_STATUS)
            except Unavailable as e:
                response = error_response(503, str(e))
                if e.retry_after is not None:
                    response.headers["Retry-After"] = str(math.ceil(e.retry_after))
                return response
            except MemoryRequestTooLarge as e:
                return error_response(507, str(e))
            except CuzkError as e:
                log.exception("engine error on %s %s", request.method, where(request))
                return error_response(500, str(e))
            except Exception as e:
                log.exception("internal error on %s %s", request.method, where(request))
                return error_response(500, f"internal error: {type(e).__name__}: {e}")

        return wrapped

    def kind_known(kind: str, circuits: list[CircuitInfo]) -> CircuitInfo:
        for entry in circuits:
            if entry["proof_kind"] == kind:
                return entry
        names = ", ".join(c["proof_kind"] for c in circuits) or "none"
        raise ApiError(404, f"unknown proof kind {kind!r} (available: {names})")

    kind_limits: dict[str, int] = {}

    async def submit_body_limits() -> dict[str, int]:
        """Per configured kind, the largest body its inputs can need (``input_bounds``), at
        most server.max_body_bytes; computed once (kinds are fixed while the engine runs)."""
        if not kind_limits:
            for entry in await call(engine.circuits):
                kind = entry["proof_kind"]
                try:
                    elements = await call(engine.input_elements, kind)
                except Exception:  # no circuit to read: the submit will say what is wrong
                    log.debug("no input size for %s", kind, exc_info=True)
                    elements = None
                bound = body_limit
                if elements is not None:
                    bound = min(body_limit, kind_body_limit(entry["partitions"], elements))
                kind_limits[kind] = bound
        return kind_limits

    @endpoint
    async def submit(request: Request) -> Response:
        limits = await submit_body_limits()
        largest = max(limits.values(), default=body_limit)
        what = (
            "server.max_body_bytes" if largest == body_limit
            else "the most any configured proof kind's inputs can take"
        )
        raw = await read_body(request, largest, what)
        reservation = await call(engine.reserve_request_memory, parse_reservation(len(raw)))
        try:
            return await accept(request, raw, limits)
        finally:
            reservation.close()

    async def accept(request: Request, raw: bytes, limits: dict[str, int]) -> Response:
        """Parse, check and submit a body already read, while its memory is reserved."""
        body = parse_submit(parse_json(raw))
        kind, inputs = body["proof_kind"], body["inputs"]
        deadline = body.get("deadline")
        entry = kind_known(kind, await call(engine.circuits))
        bound = limits.get(kind, body_limit)
        if len(raw) > bound:
            raise ApiError(
                413,
                f"request body of {len(raw)} bytes is larger than proof kind {kind!r} can need"
                f" ({bound} bytes for {entry['partitions']} partition input"
                f"{'s' if entry['partitions'] != 1 else ''})",
            )
        check_signal_values(inputs)
        partitions = entry["partitions"]
        if len(inputs) != partitions:
            raise ApiError(
                400,
                f"proof kind {kind!r} takes {partitions} partition input"
                f"{'s' if partitions != 1 else ''} (one object per partition in 'inputs'),"
                f" got {len(inputs)}",
            )
        # Whatever the configured propagators read (traceparent, b3, ...); none: a new trace.
        trace_context: Context | None = inbound.extract(request.headers)
        if not trace.get_current_span(trace_context).get_span_context().is_valid:
            trace_context = None
        job = await call(
            engine.submit,
            kind,
            inputs,
            request_id=body.get("request_id"),
            priority=body.get("priority"),
            trace_context=trace_context,
            deadline=None if deadline is None else deadline_seconds(deadline),
        )
        data = job.to_dict()
        return JSONResponse(data, status_code=202, headers={"Location": f"/v1/proofs/{data['id']}"})

    @endpoint
    async def get_proof(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        wait = parse_wait(request)
        job = await call(engine.get, job_id)
        deadline = time.monotonic() + wait
        drained = getattr(engine, "drained", None)  # shutting down: answer with the state now
        while job.to_dict()["state"] not in TERMINAL_STATES:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or await request.is_disconnected():
                break
            if drained is not None and drained.is_set():
                break
            job = await anyio.to_thread.run_sync(
                engine.wait, job_id, min(_WAIT_SLICE_SECONDS, remaining), limiter=long_polls
            )
        return JSONResponse(job.to_dict())

    @endpoint
    async def cancel_proof(request: Request) -> Response:
        job = await call(engine.cancel, request.path_params["job_id"])
        return JSONResponse(job.to_dict())

    @endpoint
    async def status(request: Request) -> Response:
        return JSONResponse(await call(engine.status))

    @endpoint
    async def circuits(request: Request) -> Response:
        return JSONResponse({"circuits": await call(engine.circuits)})

    async def key_entry(kind: str) -> CircuitInfo:
        return kind_known(kind, await call(engine.circuits))

    @endpoint
    async def preload_key(request: Request) -> Response:
        kind = request.path_params["proof_kind"]
        kind_known(kind, await call(engine.circuits))
        result = await call(engine.preload, kind)
        return JSONResponse({**await key_entry(kind), **(result or {})})

    @endpoint
    async def evict_key(request: Request) -> Response:
        kind = request.path_params["proof_kind"]
        kind_known(kind, await call(engine.circuits))
        result = await call(engine.evict, kind)
        return JSONResponse({**await key_entry(kind), **(result or {})})

    @endpoint
    async def verification_key(request: Request) -> Response:
        kind = request.path_params["proof_kind"]
        kind_known(kind, await call(engine.circuits))
        return JSONResponse(await call(engine.verification_key, kind))

    @endpoint
    async def sample_input(request: Request) -> Response:
        kind = request.path_params["proof_kind"]
        kind_known(kind, await call(engine.circuits))
        configured = config.proof_kinds.get(kind)
        path = configured.sample_input if configured is not None else None
        if path is None:
            raise ApiError(404, f"proof kind {kind!r} has no sample input (sample_input unset)")
        try:
            return JSONResponse(json.loads(await call(path.read_text)))
        except (OSError, ValueError) as e:
            raise ApiError(500, f"sample input of {kind!r} ({path}) is unreadable: {e}") from None

    @endpoint
    async def pause_workers(request: Request) -> Response:
        await call(engine.pause_workers)
        return JSONResponse({"workers_paused": True})

    @endpoint
    async def resume_workers(request: Request) -> Response:
        await call(engine.resume_workers)
        return JSONResponse({"workers_paused": False})

    @endpoint
    async def serve_metrics(request: Request) -> Response:
        if engine_metrics is None:
            raise ApiError(404, "metrics are disabled (telemetry.metrics = false)")
        from prometheus_client.exposition import choose_encoder

        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        payload = await call(encoder, engine_metrics.registry)
        return Response(payload, media_type=content_type)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "version": __version__})

    @endpoint
    async def readyz(request: Request) -> Response:
        # Ready = a submit now would be taken: started, not draining, journal writable (the
        # engine refuses submits otherwise), and max_requests_in_flight not reached.
        reason = await call(engine.readiness)
        if reason is None and admission.submits_refused():
            reason = (
                f"handling {admission.limit} requests, server.max_requests_in_flight: a submit"
                " now would be refused"
            )
        if reason is not None:
            return JSONResponse({"status": "not ready", "reason": reason}, status_code=503)
        return JSONResponse({"status": "ready"})

    token = resolve_token(config.server)
    schema = front_end_document(
        auth=token is not None, metrics_require_auth=config.server.metrics_require_auth
    )

    async def openapi(request: Request) -> Response:
        return JSONResponse(schema)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            message = f"no such route: {request.method} {request.url.path}"
            if request.url.path.endswith("/") and request.url.path != "/":
                message += " (routes have no trailing slash)"
        elif exc.status_code == 405:
            message = f"method {request.method} not allowed on {request.url.path}"
        else:
            message = str(exc.detail)
        return JSONResponse({"error": message}, status_code=exc.status_code, headers=exc.headers)

    routes = [
        Route("/v1/proofs", submit, methods=["POST"]),
        Route("/v1/proofs/{job_id}", get_proof, methods=["GET"]),
        Route("/v1/proofs/{job_id}", cancel_proof, methods=["DELETE"]),
        Route("/v1/status", status, methods=["GET"]),
        Route("/v1/circuits", circuits, methods=["GET"]),
        Route("/v1/circuits/{proof_kind}/verification_key", verification_key, methods=["GET"]),
        Route("/v1/circuits/{proof_kind}/sample_input", sample_input, methods=["GET"]),
        Route("/v1/keys/{proof_kind}/preload", preload_key, methods=["POST"]),
        Route("/v1/keys/{proof_kind}", evict_key, methods=["DELETE"]),
        Route("/v1/workers/pause", pause_workers, methods=["POST"]),
        Route("/v1/workers/resume", resume_workers, methods=["POST"]),
        Route("/metrics", serve_metrics, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
    ]
    front = FrontEndMetrics(engine_metrics.registry if engine_metrics is not None else None)
    middleware = [
        Middleware(
            InFlightLimit,
            admission=admission,
            on_refuse=front.request_refused,
        )
    ]
    if token is not None:
        middleware.append(
            Middleware(
                BearerAuth,
                token=token,
                metrics_require_auth=config.server.metrics_require_auth,
                on_refuse=front.request_refused,
            )
        )

    async def unexpected(request: Request, exc: Exception) -> Response:
        # Outside the endpoints' own mapping (a probe, the schema): still JSON, never text.
        log.error("internal error on %s %s", request.method, where(request), exc_info=exc)
        return error_response(500, f"internal error: {type(exc).__name__}")

    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: http_error, Exception: unexpected},
    )
    # No trailing-slash redirects: Starlette builds their Location from the client's Host
    # header, so a forged Host would be echoed back as an absolute URL (issue 19). Such a path
    # is a 404 that says what is wrong.
    app.router.redirect_slashes = False
    app.state.engine = engine
    app.state.front_metrics = front  # the server protocol counts the connections it cuts
    app.state.config = config
    app.state.admission = admission
    app.state.metrics = engine_metrics
    return app
