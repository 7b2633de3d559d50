"""The engine's status document (``GET /v1/status``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cuzk.api.handling import ApiContext, call, endpoint


def routes(ctx: ApiContext) -> list[Route]:
    @endpoint
    async def status(request: Request) -> Response:
        return JSONResponse(await call(ctx.engine.status))

    return [Route("/v1/status", status, methods=["GET"])]
