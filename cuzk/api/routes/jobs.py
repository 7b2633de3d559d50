"""Jobs: submit a proof, read (or long-poll) it, cancel it."""

from __future__ import annotations

import time
from typing import Any

import anyio.to_thread
from opentelemetry import trace
from opentelemetry.context import Context
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cuzk.api.handling import (
    ApiContext,
    ApiError,
    call,
    endpoint,
    kind_known,
    log,
    parse_json,
    parse_submit,
    parse_wait,
    parse_witness_query,
    read_body,
    read_body_to_file,
)
from cuzk.api.input_bounds import (
    WITNESS_CHECK_BYTES,
    kind_body_limit,
    parse_reservation,
    witness_body_limit,
)
from cuzk.api.signals import check_signal_values
from cuzk.protocol import TERMINAL_STATES, WITNESS_MEDIA_TYPE, WITNESS_SUBMIT_PATH
from cuzk.protocol_requests import deadline_seconds

WAIT_SLICE_S = 1.0
"""A long-poll waits in slices so a client that went away frees its thread within a second."""


def routes(ctx: ApiContext) -> list[Route]:
    engine = ctx.engine
    body_limit = ctx.config.server.max_body_bytes
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
        job = await call(
            engine.submit,
            kind,
            inputs,
            request_id=body.get("request_id"),
            priority=body.get("priority"),
            trace_context=inbound_trace(request),
            deadline=None if deadline is None else deadline_seconds(deadline),
        )
        return accepted(job.to_dict())

    def inbound_trace(request: Request) -> Context | None:
        """Whatever the configured propagators read (traceparent, b3, ...); None: a new
        trace."""
        trace_context: Context | None = ctx.inbound.extract(request.headers)
        if not trace.get_current_span(trace_context).get_span_context().is_valid:
            return None
        return trace_context

    def accepted(data: dict[str, Any]) -> Response:
        return JSONResponse(data, status_code=202, headers={"Location": f"/v1/proofs/{data['id']}"})

    @endpoint
    async def submit_witness(request: Request) -> Response:
        """A job proven from the body's .wtns files (one per partition), streamed to a file
        in the witness store and checked there; never held in memory."""
        query = parse_witness_query(request)
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != WITNESS_MEDIA_TYPE:
            raise ApiError(
                415,
                f"a witness submit's body is the partitions' .wtns files back to back, sent as"
                f" Content-Type: {WITNESS_MEDIA_TYPE} (got {media or 'none'!r}); inputs go to"
                " POST /v1/proofs as JSON")
        kind = query["proof_kind"]
        entry = kind_known(kind, await call(engine.circuits))
        shape = await call(engine.witness_shape, kind)
        partitions = entry["partitions"]
        bound = witness_body_limit(partitions, shape.n_vars, shape.n8)
        what = (
            f"proof kind {kind!r} can take ({bound} bytes: {partitions} .wtns file"
            f"{'s' if partitions != 1 else ''} of {shape.n_vars} variables)")
        deadline = query.get("deadline")
        reservation = await call(engine.reserve_request_memory, WITNESS_CHECK_BYTES)
        try:
            with engine.witnesses.staging() as staged:
                await read_body_to_file(request, staged, bound, what)
                job = await call(
                    engine.submit,
                    kind,
                    [],
                    request_id=query.get("request_id"),
                    priority=query.get("priority"),
                    trace_context=inbound_trace(request),
                    deadline=None if deadline is None else deadline_seconds(deadline),
                    witness_body=staged,
                )
        finally:
            reservation.close()
        return accepted(dict(job.to_dict()))

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
                engine.wait, job_id, min(WAIT_SLICE_S, remaining), limiter=ctx.long_polls
            )
        return JSONResponse(job.to_dict())

    @endpoint
    async def cancel_proof(request: Request) -> Response:
        job = await call(engine.cancel, request.path_params["job_id"])
        return JSONResponse(job.to_dict())

    return [
        Route("/v1/proofs", submit, methods=["POST"]),
        Route(WITNESS_SUBMIT_PATH, submit_witness, methods=["POST"]),
        Route("/v1/proofs/{job_id}", get_proof, methods=["GET"]),
        Route("/v1/proofs/{job_id}", cancel_proof, methods=["DELETE"]),
    ]
