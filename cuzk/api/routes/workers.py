"""GPU workers: pause them (they finish what they hold and take no more) and resume them."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cuzk.api.handling import ApiContext, call, endpoint


def routes(ctx: ApiContext) -> list[Route]:
    engine = ctx.engine

    @endpoint
    async def pause_workers(request: Request) -> Response:
        await call(engine.pause_workers)
        return JSONResponse({"workers_paused": True})

    @endpoint
    async def resume_workers(request: Request) -> Response:
        await call(engine.resume_workers)
        return JSONResponse({"workers_paused": False})

    return [
        Route("/v1/workers/pause", pause_workers, methods=["POST"]),
        Route("/v1/workers/resume", resume_workers, methods=["POST"]),
    ]
