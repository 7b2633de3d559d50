"""``cuzk serve``: the proving server (engine + HTTP API under uvicorn)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
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
    return serve(config)


def serve(config: Config) -> int:
    """Start the engine (recovering the journal), serve until SIGINT/SIGTERM, drain, exit 0.

    Returns 2 without serving when the journal cannot be used (the message says why).
    """
    from cuzk.api.app import create_app
    from cuzk.engine import Engine
    from cuzk.engine.journal import JournalError

    logging.getLogger("cuzk").setLevel(logging.INFO)
    if config.telemetry.otlp_endpoint and not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        # The tracing setup reads the standard variables; the config key is another way in.
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = config.telemetry.otlp_endpoint

    settings = config.engine_settings()
    try:
        engine = Engine(settings)
    except JournalError as e:
        print(f"cuzk serve: cannot start: {e}", file=sys.stderr)
        return 2
    if engine.journal is not None:
        log.info("journal: %s", engine.journal.path)
    else:
        log.warning("journal: disabled (journal.enabled = false); accepted jobs are lost on exit")
    engine.start()
    recovered = {k: n for k, n in engine.recovered().items() if n}
    if recovered:
        log.info(
            "recovered from the journal: %s",
            ", ".join(f"{n} {kind} {outcome}" for (kind, outcome), n in sorted(recovered.items())),
        )
    try:
        app = create_app(engine, config)
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
            engine=engine,
        )
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        log.info("shutting down the engine")
        engine.shutdown(timeout=5)
    return 0


class _Server(uvicorn.Server):
    """uvicorn with cuzk's shutdown: the first SIGTERM/SIGINT drains, a second exits at once.

    Draining keeps the listener open so clients are told (``/readyz`` 503, submits 503 with
    ``Retry-After``) while partitions in flight finish; open long-polls are answered with their
    job's state once the drain ends; then uvicorn stops and the engine shuts down.
    """

    def __init__(self, uconfig: uvicorn.Config, config: Config, backend: str, engine: Any) -> None:
        super().__init__(uconfig)
        self.cuzk_config = config
        self.backend = backend
        self.engine = engine
        self._signalled = False

    def handle_exit(self, sig: int, frame: Any) -> None:
        if self._signalled:  # the second signal: go now; what is journaled is on disk
            log.warning("second %s: exiting at once", signal.Signals(sig).name)
            logging.shutdown()
            os._exit(128 + sig)
        self._signalled = True
        timeout = self.cuzk_config.server.drain_timeout_s
        log.info(
            "%s: draining (up to %gs for partitions in flight; send it again to exit at once)",
            signal.Signals(sig).name,
            timeout,
        )
        threading.Thread(target=self._drain, args=(timeout,), name="cuzk-drain").start()

    def _drain(self, timeout: float) -> None:
        t0 = time.monotonic()
        try:
            finished = self.engine.drain(timeout)
        except Exception:
            log.exception("drain failed")
            finished = False
        log.info(
            "drain %s after %.2fs",
            "complete" if finished else "timed out (unfinished partitions resume at next start)",
            time.monotonic() - t0,
        )
        self.should_exit = True

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
