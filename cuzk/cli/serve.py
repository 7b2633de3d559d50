"""``cuzk serve``: the proving server (engine + HTTP API under uvicorn)."""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

import uvicorn

from cuzk.api.server import uvicorn_config
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
        "--cluster",
        metavar="ADDRESS",
        default=None,
        help="drive the Ray cluster at ADDRESS (host:port of `ray start --head`); overrides"
        " [cluster] address (docs/cluster.md)",
    )
    p.add_argument(
        "--print-config",
        action="store_true",
        help="print the effective configuration as JSON and exit",
    )
    p.set_defaults(func=run)


def load(args: argparse.Namespace) -> Config:
    path = args.config or os.environ.get("CUZK_CONFIG") or None
    return load_config(path, overrides={"server.listen": args.listen,
                                        "cluster.address": getattr(args, "cluster", None)})


def run(args: argparse.Namespace) -> int:
    try:
        config = load(args)
        if not args.print_config:
            check_exposure(config)
    except ConfigError as e:
        print(f"cuzk serve: {e}", file=sys.stderr)
        return 2
    if args.print_config:
        shown = config.to_dict()
        if shown["server"].get("auth_token"):
            shown["server"]["auth_token"] = "<redacted>"
        print(json.dumps(shown, indent=2))
        return 0
    try:
        return serve(config)
    except BrokenKey as e:
        print(f"cuzk serve: refusing to start: {e}", file=sys.stderr)
        return 2


class ClusterUnavailable(Exception):
    """``--cluster`` given but Ray is missing or the cluster cannot be reached."""


def _cluster_engine(config: Config, settings: Any, provider: Any,
                    otel_env: Mapping[str, str]) -> tuple[Any, Any]:
    """The engine over the Ray cluster at ``cluster.address``, and its file_sd writer. Ray is
    imported here and nowhere on the single-process path."""
    try:
        from cuzk.cluster.runtime import cluster_engine, executor_of
        from cuzk.cluster.service_discovery import SdWriter
    except ImportError as e:
        raise ClusterUnavailable(
            f"--cluster needs Ray ({e}): install the cluster extra; in the clone,"
            " .venv/bin/pip install -c constraints.txt -e '.[cluster]'") from None
    address = config.cluster.address
    log.info("cluster: connecting to the Ray cluster at %s", address)
    try:
        engine = cluster_engine(settings, address, gpu_slots=config.cluster.gpu_slots,
                                tracer_provider=provider, otel_env=otel_env,
                                connect_timeout_s=config.cluster.connect_timeout_s)
    except ConnectionError as e:
        text = str(e)
        raise ClusterUnavailable(text if text.startswith("cannot reach Ray at ") else
                                 f"cannot reach Ray at {address}: {text}") from None
    head = (f"{config.server.host}:{config.server.port}", "head")
    executor = executor_of(engine)
    writer = SdWriter(executor, config.cluster.sd_file, head).start()
    log.info("cluster: %d node(s); file_sd targets in %s", len(executor.nodes()),
             config.cluster.sd_file)
    return engine, writer


class BrokenKey(Exception):
    """A configured proving key failed its check at start."""


def check_configured_keys(engine: Any, config: Config) -> None:
    """Load every configured zkey now and check it against its circuit (curve, sizes, every
    point, the coefficients); it stays resident. A broken key stops the server before it
    accepts jobs it could never prove. Development keys (no zkey configured) are made and
    checked when first used, except for a kind that rejects deadlines it cannot meet (made and
    loaded now); their circuit's header (its curve: a bn128 build is refused) is read now."""
    from cuzk.errors import CuzkError

    development = [name for name, kind in config.proof_kinds.items() if kind.zkey is None]
    if development:
        log.info(
            "proof kinds proven with development keys (made on first use in %s; single-party"
            " setup, not for production): %s",
            config.engine.keys_dir,
            ", ".join(development),
        )
        from cuzk.prover.keystore import check_keys_dir

        try:  # told now, not in the first job of each kind
            check_keys_dir(config.engine.keys_dir)
        except CuzkError as e:
            raise BrokenKey(str(e)) from None
    from cuzk.formats.r1cs import read_r1cs

    for name, kind in config.proof_kinds.items():
        if kind.zkey is None:
            if not kind.bundled:  # its key is made on first use: the circuit's curve, now
                try:
                    read_r1cs(kind.r1cs, load_constraints=False)
                except CuzkError as e:
                    raise BrokenKey(f"proof kind {name}: {e}") from None
            if not key_needed_at_start(kind):
                continue
            log.info(
                "making the proving key of %s resident now: a deadline admitted with"
                " deadline_admission = reject leaves no time to make or load it on first use",
                name,
            )
        else:
            log.info("checking the proving key of %s: %s", name, kind.zkey)
        try:
            engine.preload(name)
        except CuzkError as e:
            text = str(e)
            prefix = f"proof kind {name}: "
            raise BrokenKey(text if text.startswith(prefix) else prefix + text) from None


def check_keys_when_a_gpu_joins(engine: Any, config: Config, stop: threading.Event,
                                poll_s: float = 1.0) -> threading.Thread | None:
    """Cluster head with no GPU worker yet (none joined, or each refused): the server listens
    (``/readyz`` 503 and the status say why, and deadline work is not admitted) and the keys
    are checked and made resident by this thread once one joins. None: one is there now, so
    the caller checks them before listening, as in one process."""
    why = engine.prover.gpu_unavailable()
    if why is None:
        return None
    log.warning("cluster: %s; listening anyway (/readyz answers 503 with this reason until a "
                "GPU worker joins, then the proving keys are checked)", why)

    def wait_then_check() -> None:
        while engine.prover.gpu_unavailable() is not None:
            if stop.wait(poll_s):
                return
        log.info("cluster: a GPU worker joined; checking the proving keys")
        try:
            check_configured_keys(engine, config)
        except BrokenKey as e:
            log.error("cluster: proving key check failed, jobs of that kind will fail: %s", e)
            return
        log.info("cluster: proving keys checked")

    thread = threading.Thread(target=wait_then_check, name="cuzk-keys-on-gpu", daemon=True)
    thread.start()
    return thread


def key_needed_at_start(kind: Any) -> bool:
    """A kind whose deadlines are promised at admission (``reject``) cannot pay for making or
    loading its key inside the first job's deadline, so its key is resident before serving."""
    return kind.deadline is not None and kind.deadline_admission == "reject"


BACKLOG = 2048
"""Pending connections the listener queues (uvicorn's default)."""


def bind_listener(host: str, port: int) -> socket.socket:
    """The server's listening socket, bound before anything slow runs (OSError: in use, not
    permitted, no such address)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=BACKLOG)


def is_loopback(host: str) -> bool:
    """Only addresses that cannot be reached from another machine count; a host name other than
    localhost might resolve to anything, so it does not."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(config: Config) -> str | None:
    """Refuse (ConfigError) a non-loopback listen without a token unless explicitly allowed;
    returns the token (None: authentication off). Reads the token file, so a bad one fails here."""
    from cuzk.api.auth import resolve_token

    token = resolve_token(config.server)
    if (
        token is None
        and not is_loopback(config.server.host)
        and not (config.server.allow_unauthenticated)
    ):
        raise ConfigError(
            [
                f"server.listen: {config.server.listen} is reachable from other machines and no"
                " token is set: anyone who can reach it could submit, cancel and evict. Set"
                " server.auth_token or server.auth_token_file (CUZK_SERVER_AUTH_TOKEN[_FILE]),"
                " or set server.allow_unauthenticated = true to serve it without authentication"
            ]
        )
    return token


def _auth_banner(config: Config, token: str | None) -> str:
    s = config.server
    if token is not None:
        open_paths = "/healthz, /readyz" + ("" if s.metrics_require_auth else ", /metrics")
        return f"authentication: bearer token required on every route but {open_paths}"
    if is_loopback(s.host):
        return "authentication: OFF (loopback listen; set server.auth_token to require one)"
    return (
        "authentication: OFF on a non-loopback address because server.allow_unauthenticated"
        " = true: anyone who can reach this port can submit, cancel and evict"
    )


def otel_environment(config: Config, environ: Mapping[str, str]) -> dict[str, str]:
    """The OTEL_* variables tracing is built from: the process's, plus ``telemetry.otlp_endpoint``
    as OTEL_EXPORTER_OTLP_ENDPOINT when that variable is not set. A copy: the process
    environment is never changed."""
    env = dict(environ)
    if config.telemetry.otlp_endpoint and not env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = config.telemetry.otlp_endpoint
    return env


def serve(config: Config) -> int:
    """Start the engine (recovering the journal), serve until SIGINT/SIGTERM, drain, exit 0.

    Returns 2 without serving when the journal cannot be used (the message says why).
    """
    from cuzk.engine import Engine
    from cuzk.engine.journal import JournalError
    from cuzk.errors import BackendUnavailable
    from cuzk.telemetry.metrics import EngineMetrics
    from cuzk.telemetry.tracing import configure_tracing

    logging.getLogger("cuzk").setLevel(logging.INFO)
    otel_env = otel_environment(config, os.environ)

    token = check_exposure(config)
    replay = config.telemetry.nvml_replay if config.telemetry.metrics else None
    if replay is not None:
        from cuzk.telemetry.nvml import load_recording

        try:
            load_recording(replay)
        except ValueError as e:
            print(f"cuzk serve: refusing to start: telemetry.nvml_replay: {e}", file=sys.stderr)
            return 2
    try:  # first: a port in use is told at once, not after the keys are checked
        listener = bind_listener(config.server.host, config.server.port)
    except OSError as e:
        why = os.strerror(e.errno) if e.errno else str(e)
        print(f"cuzk serve: cannot listen on {config.server.listen}: {why}", file=sys.stderr)
        return 2
    banner = _auth_banner(config, token)
    (log.warning if token is None and not is_loopback(config.server.host) else log.info)(banner)
    settings = config.engine_settings()
    # The application owns the OpenTelemetry SDK and the metrics; the engine speaks the API.
    # A value it cannot honour is one warning line (logged), never a traceback.
    tracing = None
    if settings.tracing_enabled:
        tracing = configure_tracing(settings.service_name, otel_env)
    provider = tracing.provider if tracing is not None else None
    sd_writer = None
    # Joining a cluster can take long (connecting, placing actors): SIGTERM stops it as Ctrl-C
    # does, until uvicorn installs its own handlers.
    previous_sigterm = signal.signal(signal.SIGTERM, _interrupt)
    try:
        if config.cluster.address:
            engine, sd_writer = _cluster_engine(config, settings, provider, otel_env)
        else:  # the prover (numba) and the API are imported once they are needed: --cluster
            from cuzk.prover.real_prover import RealProver  # without Ray is told at once

            engine = Engine(settings, RealProver(settings), tracer_provider=provider)
    except (JournalError, BackendUnavailable) as e:
        listener.close()
        print(f"cuzk serve: refusing to start: {e}", file=sys.stderr)
        return 2
    except ClusterUnavailable as e:
        listener.close()
        print(f"cuzk serve: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # SIGINT or SIGTERM while joining the cluster
        listener.close()
        print("cuzk serve: stopped while starting", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
    if engine.journal is not None:
        log.info("journal: %s", engine.journal.path)
    else:
        log.warning("journal: disabled (journal.enabled = false); accepted jobs are lost on exit")
    # Subscribed before start: recovery at start publishes what the metrics count.
    metrics = EngineMetrics(engine, nvml_replay=replay) if config.telemetry.metrics else None
    engine.start()
    stopping = threading.Event()
    recovered = {k: n for k, n in engine.recovered().items() if n}
    if recovered:
        log.info(
            "recovered from the journal: %s",
            ", ".join(f"{n} {kind} {outcome}" for (kind, outcome), n in sorted(recovered.items())),
        )
    try:
        if sd_writer is not None:  # cluster: GPU workers that outlived a head keep their keys
            from cuzk.cluster.runtime import adopt_resident_keys

            adopted = adopt_resident_keys(engine)
            if adopted:
                log.info("cluster: keys still resident in GPU workers, not loaded again: %s",
                         ", ".join(adopted))
        if sd_writer is None or check_keys_when_a_gpu_joins(engine, config, stopping) is None:
            check_configured_keys(engine, config)
        from cuzk.api.app import create_app

        app = create_app(engine, config, metrics=metrics,
                         propagator=tracing.propagator if tracing is not None else None)
        server = _Server(
            uvicorn_config(app, config),
            config,
            backend=engine.prover.name,
            engine=engine,
        )
        server.run(sockets=[listener])
    except KeyboardInterrupt:
        pass
    finally:
        stopping.set()
        listener.close()
        log.info("shutting down the engine")
        if sd_writer is not None:
            sd_writer.stop()
        engine.shutdown(timeout=5)
        if provider is not None:
            provider.shutdown()  # flushes the spans still batched for export
    return 0


def _interrupt(sig: int, frame: Any) -> None:
    raise KeyboardInterrupt


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
