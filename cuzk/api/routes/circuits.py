"""Circuits and their keys: the kinds served, each one's verification key and sample input,
and making a proving key resident (preload) or not (evict)."""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cuzk.api.handling import ApiContext, ApiError, call, endpoint, kind_known
from cuzk.protocol import CircuitInfo


def routes(ctx: ApiContext) -> list[Route]:
    engine, config = ctx.engine, ctx.config

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

    return [
        Route("/v1/circuits", circuits, methods=["GET"]),
        Route("/v1/circuits/{proof_kind}/verification_key", verification_key, methods=["GET"]),
        Route("/v1/circuits/{proof_kind}/sample_input", sample_input, methods=["GET"]),
        Route("/v1/keys/{proof_kind}/preload", preload_key, methods=["POST"]),
        Route("/v1/keys/{proof_kind}", evict_key, methods=["DELETE"]),
    ]
