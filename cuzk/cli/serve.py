"""``cuzk serve``: the proving server (engine + HTTP API under uvicorn)."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

import uvicorn

from cuzk.config import Config, ConfigError, load_config

log = logging.getLogger("cuzk.serve")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve",
        help="run the proving server",
        description="Run the proving engine behind its HTTP API. Without --config it runs on"
        " built-in defaults (backend auto: CUDA when usable, else CPU; the bundled circuits;"
        " 127.0.0.1:9820). Every setting can be overridden with CUZK_<SECTION>_<KEY>"
        " variables; cuzk/default_config.toml documents them all.",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="TOML configuration file (default: $CUZK_CONFIG, else built-in defaults)",
    )
    p.add_argument("--listen", metavar="HOST:PORT", default=None, help="overrides [server] listen")
    p.add_argument(
        "--print-config",
        action="store_true",
        help="print the effective configuration as JSON and exit",
    )
    p.set_defaults(func=run)


def load(args: argparse.Namespace) -> Config:
    path = args.config or os.environ.get("CUZK_CONFIG") or None
    return load_config(path, overrides={"server.listen": args.listen})


def run(args: argparse.Namespace) -> int:
    try:
        config = load(args)
    except ConfigError as e:
        print(f"cuzk serve: {e}", file=sys.stderr)
        return 2
    if args.print_config:
        print(json.dumps(config.to_dict(), indent=2))
        return 0
    serve(config)
    return 0


def serve(config: Config) -> None:
    """Start the engine, serve until SIGINT/SIGTERM, then shut the engine down."""
    from cuzk.api.app import create_app
    from cuzk.engine import Engine
    from cuzk.telemetry.metrics import EngineMetrics
    from cuzk.telemetry.tracing import build_tracer_provider

    logging.getLogger("cuzk").setLevel(logging.INFO)
    if config.telemetry.otlp_endpoint and not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        # The tracing setup reads the standard variables; the config key is another way in.
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = config.telemetry.otlp_endpoint

    settings = config.engine_settings()
    # The application owns the OpenTelemetry SDK and the metrics; the engine speaks the API.
    provider = build_tracer_provider(settings.service_name) if settings.tracing_enabled else None
    engine = Engine(settings, tracer_provider=provider)
    metrics = EngineMetrics(engine) if config.telemetry.metrics else None
    engine.start()
    try:
        app = create_app(engine, config, metrics=metrics)
        server = _Server(
            uvicorn.Config(
                app,
                host=config.server.host,
                port=config.server.port,
                lifespan="off",
                access_log=False,
                timeout_graceful_shutdown=5,
            ),
            config,
            backend=str(getattr(engine.prover, "name", config.engine.backend)),
        )
        with _stop_on_sigterm():
            server.run()
    except (KeyboardInterrupt, _Stop):
        pass  # uvicorn re-raises the signal it stopped on once it has shut down
    finally:
        log.info("shutting down the engine")
        engine.shutdown(timeout=30)
        if provider is not None:
            provider.shutdown()  # flushes the spans still batched for export


class _Stop(Exception):
    """SIGTERM, as an exception, so the engine is shut down before the process exits."""


@contextlib.contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    """uvicorn handles SIGTERM, then re-raises it with the handler it found installed; with the
    default handler that would kill the process before the engine's shutdown runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise _Stop()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Server(uvicorn.Server):
    """Logs the address actually bound (port 0 picks one) once uvicorn is listening."""

    def __init__(self, uconfig: uvicorn.Config, config: Config, backend: str) -> None:
        super().__init__(uconfig)
        self.cuzk_config = config
        self.backend = backend

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        if not self.started:
            return
        c = self.cuzk_config
        for srv in self.servers:
            for sock in srv.sockets:
                host, port = sock.getsockname()[:2]
                shown = f"[{host}]" if ":" in host else host
                log.info(
                    "cuzk listening on http://%s:%d (backend %s; proof kinds: %s)",
                    shown,
                    port,
                    self.backend,
                    ", ".join(c.proof_kinds),
                )
