"""A real job across the two nodes on the CPU prover (acceptance checks 3 and 10): every proof
checked by snarkjs; one trace per job across the head and the worker actors, each step's span
recorded by the actor that ran it and naming its node."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster._cluster import spilled_bytes, two_nodes
from tests.cluster._otlp import ExportedSpan, span_sink

KIND = "winning-post"
PARTITIONS = 3


@pytest.fixture(scope="module")
def real_head(in_namespace: bool, bundled) -> Iterator[Any]:
    if not in_namespace:
        yield None
        return
    import ray
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from cuzk.cluster.runtime import cluster_engine
    from cuzk.engine.settings import EngineSettings, ProofKindSettings
    from cuzk.telemetry.tracing import configure_tracing

    b = bundled(KIND)
    settings = EngineSettings(
        backend="cpu", memory_budget_bytes=1 << 30,
        proof_kinds={KIND: ProofKindSettings(KIND, PARTITIONS, "critical", zkey=b.zkey_path)})
    # the head and every actor export to one OTLP receiver, as they would to a collector
    with span_sink() as sink, two_nodes():
        env = sink.env()
        provider = configure_tracing("cuzk", env, export_processor=SimpleSpanProcessor).provider
        engine = cluster_engine(settings, None, tracer_provider=provider, prefix="real-",
                                otel_env=env)
        engine.start()
        try:
            yield engine, sink, b
        finally:
            engine.shutdown(timeout=10)
            for a in engine.prover.actors():
                ray.kill(a.handle, no_restart=True)
            provider.shutdown()


STEPS = ("cuzk.synthesis", "cuzk.gpu", "cuzk.finalize")


def _job_trace(sink: Any, job_id: str) -> dict[str, list[ExportedSpan]]:
    """The job's spans by name once all have arrived (actors export in 100 ms batches)."""
    def complete(spans: list[ExportedSpan]) -> bool:
        names = [s.name for s in spans if s.attributes.get("cuzk.job.id") == job_id]
        return names.count("cuzk.job") == 1 and all(
            names.count(n) >= PARTITIONS for n in ("cuzk.partition", *STEPS))

    by_name: dict[str, list[ExportedSpan]] = {}
    for s in sink.wait_for(complete):
        if s.attributes.get("cuzk.job.id") == job_id:
            by_name.setdefault(s.name, []).append(s)
    return by_name


def test_real_job_is_proven_across_nodes_and_snarkjs_verifies(real_head, snarkjs,
                                                              tmp_path: Path):
    engine, sink, b = real_head
    job = engine.submit(KIND, [b.inputs] * PARTITIONS)
    done = engine.wait(job.id, 240)
    assert done.outcome == "succeeded", done.error
    vk = tmp_path / "vk.json"
    vk.write_text(json.dumps(engine.verification_key(KIND)))
    proofs = done.view().proofs
    assert proofs is not None and len(proofs) == PARTITIONS
    for i, (proof, public) in enumerate(proofs):
        (tmp_path / f"proof{i}.json").write_text(json.dumps(dict(proof)))
        (tmp_path / f"public{i}.json").write_text(json.dumps(list(public)))
        out = snarkjs("groth16", "verify", vk, tmp_path / f"public{i}.json",
                      tmp_path / f"proof{i}.json")
        assert "OK" in out, out

    nodes = {n["role"]: n["id"] for n in engine.status()["nodes"]}
    by_name = _job_trace(sink, job.id)
    for name in ("cuzk.partition", *STEPS):  # each recorded once: none twice by the head
        assert len(by_name[name]) == PARTITIONS, (name, len(by_name[name]))

    # Check 10: one trace; job -> partition (head) -> each step (recorded in its actor)
    (job_span,) = by_name["cuzk.job"]
    every = [s for spans in by_name.values() for s in spans]
    assert {s.trace_id for s in every} == {job.trace_id}
    head = job_span.resource["service.instance.id"]
    partitions = {}
    for p in by_name["cuzk.partition"]:
        assert p.parent_id == job_span.span_id and p.resource["service.instance.id"] == head
        partitions[p.attributes["cuzk.partition.index"]] = p.span_id
    gpu_of = {s.attributes["cuzk.partition.index"]: s.span_id for s in by_name["cuzk.gpu"]}
    for name in STEPS:
        for s in by_name[name]:
            assert s.parent_id == partitions[s.attributes["cuzk.partition.index"]], s
            assert s.resource["service.instance.id"] != head, s  # not recorded by the head
            assert s.resource["cuzk.node.id"] == s.attributes["cuzk.node.id"], s
    for s in by_name["cuzk.finalize"]:  # linked to its partition's GPU phase, as in one process
        assert s.links == (gpu_of[s.attributes["cuzk.partition.index"]],), s
    instances = {s.resource["service.instance.id"] for s in every}
    assert len(instances) >= 3, instances  # the head, a CPU worker, the GPU worker
    roles = {s.resource["cuzk.worker.role"] for n in STEPS for s in by_name[n]}
    assert roles == {"cpu", "gpu"}, roles
    # the GPU phase ran on the node with the (logical) GPU
    assert {s.attributes["cuzk.node.id"] for s in by_name["cuzk.gpu"]} == {nodes["gpu"]}
    assert {s.resource["cuzk.worker.role"] for s in by_name["cuzk.gpu"]} == {"gpu"}
    synth_nodes = {s.attributes["cuzk.partition.index"]: s.attributes["cuzk.node.id"]
                   for s in by_name["cuzk.synthesis"]}
    assert set(synth_nodes.values()) <= {nodes["gpu"], nodes["cpu"]}
    # finalize ran where the witness was (the node that synthesized that partition)
    for s in by_name["cuzk.finalize"]:
        assert s.attributes["cuzk.node.id"] == synth_nodes[s.attributes["cuzk.partition.index"]]
    assert spilled_bytes() == 0


def test_bad_inputs_fail_the_job_with_the_witness_error_not_a_retry(real_head):
    engine, _, b = real_head
    before = sum(engine.snapshot().partition_retries.values())
    bad = dict(b.inputs)
    bad.pop(next(iter(bad)))
    from cuzk.errors import CuzkError

    with pytest.raises(CuzkError):  # refused at submit by the head's own input check
        engine.submit(KIND, [bad] * PARTITIONS)
    assert sum(engine.snapshot().partition_retries.values()) == before
