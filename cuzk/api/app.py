"""The HTTP API: a thin Starlette layer over the engine, composed here from its route groups
(``cuzk.api.routes``: jobs, status, circuits and keys, workers, health) and the front end
(authentication, admission limits, the OpenAPI document, JSON for every routing error).

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

import logging
from typing import TYPE_CHECKING

import anyio
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cuzk.api.auth import BearerAuth, resolve_token
from cuzk.api.front_metrics import FrontEndMetrics
from cuzk.api.handling import ApiContext, error_response, where
from cuzk.api.limits import Admission, InFlightLimit
from cuzk.api.openapi_front import front_end_document
from cuzk.api.routes import circuits, health, jobs, status, workers
from cuzk.config import Config
from cuzk.telemetry.metrics import EngineMetrics

if TYPE_CHECKING:
    from cuzk.engine import Engine

log = logging.getLogger("cuzk.api")


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
    server = config.server
    admission = Admission(
        server.max_requests_in_flight, server.max_long_polls, server.max_long_polls_per_client
    )
    ctx = ApiContext(
        engine=engine, config=config, metrics=engine_metrics, admission=admission,
        # Long-polls wait on threads of their own (one each, as many as may wait), so they
        # can never starve submits of threads.
        long_polls=anyio.CapacityLimiter(server.max_long_polls), inbound=inbound,
    )  # fmt: skip

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
        *jobs.routes(ctx),
        *status.routes(ctx),
        *circuits.routes(ctx),
        *workers.routes(ctx),
        *health.routes(ctx),
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
