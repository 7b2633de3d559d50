"""What every route shares: refusals before the engine is called (:class:`ApiError`), the one
mapping of engine errors to HTTP statuses (:func:`endpoint`), running engine calls off the event
loop (:func:`call`), and reading and parsing bodies and queries. Routes live in
``cuzk.api.routes``; ``cuzk.api.app`` composes them."""

from __future__ import annotations

import functools
import json
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from opentelemetry.propagators.textmap import TextMapPropagator
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from cuzk.api.limits import Admission
from cuzk.api.signals import parse_json_int
from cuzk.api.validation import PROOF_QUERY, SUBMIT, WITNESS_QUERY, RequestInvalid
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
from cuzk.protocol import DEADLINE_REJECTED_STATUS, CircuitInfo
from cuzk.protocol_requests import SubmitRequest, WitnessSubmitQuery
from cuzk.telemetry.metrics import EngineMetrics

if TYPE_CHECKING:
    from cuzk.engine import Engine

log = logging.getLogger("cuzk.api")

Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class ApiContext:
    """What the route groups are built over: one per app, made by ``create_app``."""

    engine: Engine
    config: Config
    metrics: EngineMetrics | None  # what /metrics serves (None: telemetry.metrics = false)
    admission: Admission
    long_polls: anyio.CapacityLimiter  # long-polls wait on threads of their own
    inbound: TextMapPropagator  # how a submit's trace context is read from its headers


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


async def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run an engine call in a worker thread: it never stalls the event loop."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


def endpoint(fn: Handler) -> Handler:
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
    """The circuit entry of ``kind``; 404 naming the kinds there are when it is not one."""
    for entry in circuits:
        if entry["proof_kind"] == kind:
            return entry
    names = ", ".join(c["proof_kind"] for c in circuits) or "none"
    raise ApiError(404, f"unknown proof kind {kind!r} (available: {names})")


# --------------------------------------------------------------------------- request parsing


def _check_declared_length(request: Request, limit: int, limit_text: str) -> None:
    """Refuse a body by its declared Content-Length before a byte is read: 400 when the header
    is not a number, 413 when it passes ``limit`` (``limit_text`` names the limit)."""
    declared = request.headers.get("content-length")
    if declared is None:
        return
    if not declared.strip().isdigit():
        raise ApiError(400, f"invalid Content-Length header: {declared!r}")
    if int(declared) > limit:
        raise ApiError(413, f"request body of {int(declared)} bytes is larger than {limit_text}")


async def read_body(request: Request, limit: int, what: str = "server.max_body_bytes") -> bytes:
    """Read a body, refusing it with 413 as soon as it passes ``limit`` bytes (``what`` names
    the limit).

    The limit is enforced on the declared Content-Length before reading and again on the bytes
    actually received (chunked bodies have no length), so an oversize body is never buffered.
    """
    _check_declared_length(request, limit, f"the limit of {limit} bytes ({what})")
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


WRITE_BATCH_BYTES = 1 << 20
"""A streamed body is written to its file in batches of this many bytes (one thread hop each)."""


async def read_body_to_file(request: Request, path: Path, limit: int, what: str) -> int:
    """Stream a body into ``path``, never holding more than a batch of it, refusing it with
    413 as soon as it passes ``limit`` bytes (``what`` says where the limit comes from), on
    its declared Content-Length before a byte is read and again on the bytes received.
    Returns its size. A file that cannot be written is a 503 naming the directory."""
    _check_declared_length(request, limit, what)
    size = 0
    pending: list[bytes] = []
    pending_bytes = 0
    try:
        with open(path, "wb") as f:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise ApiError(413, f"request body is larger than {what}")
                pending.append(chunk)
                pending_bytes += len(chunk)
                if pending_bytes >= WRITE_BATCH_BYTES:
                    await anyio.to_thread.run_sync(f.write, b"".join(pending))
                    pending, pending_bytes = [], 0
            if pending:
                await anyio.to_thread.run_sync(f.write, b"".join(pending))
    except ClientDisconnect:
        raise ApiError(400, "client disconnected while sending the request body") from None
    except OSError as e:
        raise Unavailable(
            f"cannot store the request body in {path.parent} ({e.strerror or e}); free space"
            " there or fix its permissions", retry_after=10.0) from None
    return size


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


def parse_witness_query(request: Request) -> WitnessSubmitQuery:
    """The query of ``POST /v1/proofs/witness`` (400 saying every way it is not one)."""
    params = request.query_params
    twice = sorted({k for k in params if len(params.getlist(k)) > 1})
    if twice:
        raise ApiError(400, f"{', '.join(map(repr, twice))} given more than once")
    try:
        return WITNESS_QUERY.validate(dict(params))
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
