"""What orchestrators and scrapers ask: ``/metrics``, liveness (``/healthz``) and readiness
(``/readyz``: would a submit now be taken?)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cuzk import __version__
from cuzk.api.handling import ApiContext, ApiError, call, endpoint


def routes(ctx: ApiContext) -> list[Route]:
    engine, admission, engine_metrics = ctx.engine, ctx.admission, ctx.metrics

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
        # Ready = a submit now would be taken: started, not draining, journal writable and
        # still the file this server holds (the engine refuses submits otherwise), and
        # max_requests_in_flight not reached.
        reason = await call(engine.readiness)
        if reason is None and admission.submits_refused():
            reason = (
                f"handling {admission.limit} requests, server.max_requests_in_flight: a submit"
                " now would be refused"
            )
        if reason is not None:
            return JSONResponse({"status": "not ready", "reason": reason}, status_code=503)
        return JSONResponse({"status": "ready"})

    return [
        Route("/metrics", serve_metrics, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
    ]
