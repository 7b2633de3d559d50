"""A real job across the two nodes on the CPU prover (acceptance check 3): every proof checked
by snarkjs, each step's span naming the node that ran it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster._cluster import spilled_bytes, two_nodes

KIND = "winning-post"
PARTITIONS = 3


@pytest.fixture(scope="module")
def real_head(in_namespace: bool, bundled) -> Iterator[Any]:
    if not in_namespace:
        yield None
        return
    import ray
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from cuzk.cluster.runtime import cluster_engine
    from cuzk.engine.settings import EngineSettings, ProofKindSettings

    b = bundled(KIND)
    settings = EngineSettings(
        backend="cpu", memory_budget_bytes=1 << 30,
        proof_kinds={KIND: ProofKindSettings(KIND, PARTITIONS, "critical", zkey=b.zkey_path)})
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with two_nodes():
        engine = cluster_engine(settings, None, tracer_provider=provider, prefix="real-")
        engine.start()
        try:
            yield engine, exporter, b
        finally:
            engine.shutdown(timeout=10)
            for a in engine.prover.actors():
                ray.kill(a.handle, no_restart=True)


def test_real_job_is_proven_across_nodes_and_snarkjs_verifies(real_head, snarkjs,
                                                              tmp_path: Path):
    engine, exporter, b = real_head
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
    spans = [s for s in exporter.get_finished_spans()
             if s.attributes and s.attributes.get("cuzk.job.id") == job.id]
    by_name: dict[str, list[Any]] = {}
    for s in spans:
        by_name.setdefault(s.name, []).append(s)
    for name in ("cuzk.synthesis", "cuzk.gpu", "cuzk.finalize"):
        assert len(by_name.get(name, [])) == PARTITIONS, (name, sorted(by_name))
    # the GPU phase ran on the node with the (logical) GPU
    assert {s.attributes["cuzk.node.id"] for s in by_name["cuzk.gpu"]} == {nodes["gpu"]}
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
