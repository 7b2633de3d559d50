"""Connecting the head to a Ray cluster and building the engine over the cluster executor."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import socket
import threading
from collections.abc import Iterator, Mapping

import ray
from opentelemetry import trace

from cuzk.cluster import NAMESPACE, PREFETCH_DEPTH
from cuzk.cluster.actor_tracing import actor_env
from cuzk.cluster.executor import ClusterExecutor
from cuzk.cluster.worker import ProverSpec
from cuzk.engine.backend import ProverBackend
from cuzk.engine.engine import Engine
from cuzk.engine.settings import EngineSettings
from cuzk.errors import CuzkError

log = logging.getLogger(__name__)


class Unreachable(ConnectionError):
    """Ray at the address did not answer in time: the message says so in one line."""


def connect(address: str, timeout_s: float | None = None) -> None:
    """Join the cluster at ``address`` (``host:port`` of ``ray start --head``) as its driver.

    ``timeout_s`` bounds it (None: Ray's own patience, which is unbounded for an address that
    accepts connections but is not Ray): a TCP connect first, so a closed port or an unknown
    host is told at once, then ``ray.init`` in a daemon thread. Ray's C++ client blocks the
    thread that calls it for minutes without running Python's signal handlers, so the calling
    (main) thread only waits, and SIGTERM and Ctrl-C act within a fraction of a second.
    """
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():
        return
    if timeout_s is None:
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False)
        return
    _probe(address, timeout_s)
    outcome: list[BaseException | None] = []

    def join() -> None:
        try:
            ray.init(address=address, namespace=NAMESPACE, log_to_driver=False)
            outcome.append(None)
        except BaseException as e:  # handed to the waiting thread
            outcome.append(e)

    thread = threading.Thread(target=join, name="cuzk-ray-connect", daemon=True)
    with _quiet_sigterm_warning():
        thread.start()
        thread.join(timeout_s)  # the main thread still runs signal handlers meanwhile
    if not outcome:
        raise Unreachable(
            f"cannot reach Ray at {address}: no answer within {timeout_s:g} s (is this the "
            "address `ray start --head` printed? cluster.connect_timeout_s bounds the wait)")
    error = outcome[0]
    if error is not None:
        raise Unreachable(f"cannot reach Ray at {address}: {_first_line(error)}") from error


def _probe(address: str, timeout_s: float) -> None:
    """A TCP connect to ``host:port``: a closed port, an unknown host or a silent network is
    told at once (Ray would retry each for minutes). Any other address form (``auto``,
    ``ray://``) is left to Ray."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "/" in host:
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as e:
        why = os.strerror(e.errno) if e.errno else (str(e) or type(e).__name__)
        raise Unreachable(f"cannot reach Ray at {address}: {why} (is `ray start --head` "
                          "running there, and is this its address and port?)") from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return (text.splitlines()[0] if text else type(error).__name__)[:300]


@contextlib.contextmanager
def _quiet_sigterm_warning() -> Iterator[None]:
    """Ray warns that it set no SIGTERM handler when ``ray.init`` runs off the main thread:
    that is the point (cuzk's server handles SIGTERM itself), so the line is dropped."""
    ray_log = logging.getLogger("ray._private.worker")

    def drop(record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()

    ray_log.addFilter(drop)
    try:
        yield
    finally:
        ray_log.removeFilter(drop)


def cluster_engine(
    settings: EngineSettings,
    address: str | None,
    spec: ProverSpec | None = None,
    local: ProverBackend | None = None,
    gpu_slots: int | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    prefix: str = "",
    otel_env: Mapping[str, str] | None = None,
    connect_timeout_s: float | None = None,
) -> Engine:
    """The ordinary engine (queue, journal, budget) whose steps run on the cluster's actors.

    ``address`` None: Ray is already initialised (tests). ``spec``: the real prover with these
    settings unless given; ``local``: a prover in the head for input checks and verification
    keys (the CPU prover unless given). ``otel_env``: the ``OTEL_*`` variables the head's
    tracing was built from (``os.environ`` unless given), handed to every actor so that its
    spans go where the head's go. ``connect_timeout_s``: see :func:`connect`.
    """
    if address is not None:
        connect(address, connect_timeout_s)
    if spec is None:
        spec = ProverSpec("real", settings)
    if local is None:
        if spec.kind == "scripted":
            local = spec.build()
        else:
            from cuzk.prover.real_prover import RealProver

            local = RealProver(dataclasses.replace(settings, backend="cpu"))
    env = actor_env(os.environ if otel_env is None else otel_env, settings.tracing_enabled)
    executor = ClusterExecutor(spec, local, gpu_slots, prefix=prefix, actor_env=env)
    head = dataclasses.replace(
        settings, gpu_workers_per_device=PREFETCH_DEPTH,
        # a head's GPU slots are an actor's ordered dispatch turns, not lanes: no reserved one
        reserved_gpu_workers_per_device=0,
        # one thread per CPU worker of the nodes joined now (answering or still starting),
        # or more when configured: nodes that join later add workers, and a thread waits for
        # a free one (the executor's dispatch)
        synthesis_threads=max(settings.synthesis_threads, executor.cpu_capacity(), 1))
    try:
        return Engine(head, executor, tracer_provider=tracer_provider)
    except BaseException:
        executor.close()
        raise


def executor_of(engine: Engine) -> ClusterExecutor:
    """The cluster executor an engine from :func:`cluster_engine` proves with, typed: the
    engine sees only the ``ProverBackend`` seam; the head's cluster duties (nodes, resident
    keys, the service-discovery file) need the executor itself."""
    executor = engine.prover
    if not isinstance(executor, ClusterExecutor):
        raise TypeError(f"not a cluster engine: it proves with {type(executor).__name__}")
    return executor


def adopt_resident_keys(engine: Engine) -> list[str]:
    """After a head restart: enter the keys that GPU workers found by name still hold in the
    head's key table as resident. The worker answers from its resident key (``key_info``), so
    nothing is loaded again; a key of a kind no longer configured is left alone."""
    executor = executor_of(engine)
    adopted = []
    for kind in executor.resident_keys():
        if kind not in engine.settings.proof_kinds:
            continue
        try:
            engine.preload(kind)
        except CuzkError as e:  # the worker went away meanwhile: its first job loads it
            log.warning("key of %s not adopted from the GPU workers: %s", kind, e)
            continue
        adopted.append(kind)
    return adopted
