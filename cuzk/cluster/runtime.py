"""Connecting the head to a Ray cluster and building the engine over the cluster executor."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping

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


def connect(address: str) -> None:
    """Join the cluster at ``address`` (``host:port`` of ``ray start --head``) as its driver."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not ray.is_initialized():
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False)


def cluster_engine(
    settings: EngineSettings,
    address: str | None,
    spec: ProverSpec | None = None,
    local: ProverBackend | None = None,
    gpu_slots: int | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    prefix: str = "",
    otel_env: Mapping[str, str] | None = None,
) -> Engine:
    """The ordinary engine (queue, journal, budget) whose steps run on the cluster's actors.

    ``address`` None: Ray is already initialised (tests). ``spec``: the real prover with these
    settings unless given; ``local``: a prover in the head for input checks and verification
    keys (the CPU prover unless given). ``otel_env``: the ``OTEL_*`` variables the head's
    tracing was built from (``os.environ`` unless given), handed to every actor so that its
    spans go where the head's go.
    """
    if address is not None:
        connect(address)
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
        # one thread per CPU worker placed now, or more when configured: nodes that join
        # later add workers, and a thread waits for a free one (the executor's dispatch)
        synthesis_threads=max(settings.synthesis_threads, executor.cpu_slots(), 1))
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
