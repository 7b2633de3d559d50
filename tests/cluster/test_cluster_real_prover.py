"""Real jobs across the two nodes on the CPU prover, every proof checked by snarkjs: each step's
span recorded by the actor that ran it, naming its node, in one trace per job across the head
and the worker actors (acceptance checks 3 and 10); the bytes each partition moved between the
nodes as Ray's owner table has them (check 12's figure); the head, a ``cuzk serve --cluster``
process, killed with SIGKILL and started again (check 7)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster._cluster import spilled_bytes, two_nodes
from tests.cluster._otlp import ExportedSpan, span_sink

KIND = "winning-post"
PARTITIONS = 3
COLD = "window-post"
"""Never proven here: the same circuit under a ``reject`` kind, predicted by its prior alone."""


class RealHead:
    """The in-process head of this module's tests, its span sink and its cluster. ``retire``
    stops it and kills its actors, detached GPU worker included (the head-restart test hands
    the cluster to a ``cuzk serve`` process); idempotent."""

    def __init__(self, engine: Any, sink: Any, setup: Any, cluster: Any) -> None:
        self.engine, self.sink, self.setup, self.cluster = engine, sink, setup, cluster
        self.retired = False

    def retire(self) -> None:
        import ray

        if self.retired:
            return
        self.retired = True
        self.engine.shutdown(timeout=10)
        for a in self.engine.prover.actors():
            ray.kill(a.handle, no_restart=True)


@pytest.fixture(scope="module")
def real_head(in_namespace: bool, bundled) -> Iterator[Any]:
    if not in_namespace:
        yield None
        return
    import ray
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from cuzk.circuits.registry import bundled_circuits
    from cuzk.cluster.runtime import cluster_engine
    from cuzk.cluster.transfers import TransferLog
    from cuzk.engine.settings import EngineSettings, ProofKindSettings
    from cuzk.telemetry.tracing import configure_tracing

    b = bundled(KIND)
    c = bundled_circuits()[KIND]
    settings = EngineSettings(
        backend="cpu", memory_budget_bytes=1 << 30,
        proof_kinds={KIND: ProofKindSettings(KIND, PARTITIONS, "critical", zkey=b.zkey_path),
                     COLD: ProofKindSettings(COLD, 1, "critical", r1cs=Path(c.r1cs_path),
                                             wasm=Path(c.wasm_path), zkey=b.zkey_path,
                                             deadline_admission="reject")})
    # the head and every actor export to one OTLP receiver, as they would to a collector
    with span_sink() as sink, two_nodes() as cluster:
        env = sink.env()
        provider = configure_tracing("cuzk", env, export_processor=SimpleSpanProcessor).provider
        engine = cluster_engine(settings, None, tracer_provider=provider, prefix="real-",
                                otel_env=env)
        engine.prover.transfers = TransferLog(ray.get_runtime_context().get_node_id())
        assert engine.prover.wait_for_cpu_workers(150)  # partitions on both nodes (bytes test)
        engine.start()
        head = RealHead(engine, sink, b, cluster)
        try:
            yield head
        finally:
            head.retire()
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
    engine, sink, b = real_head.engine, real_head.sink, real_head.setup
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
    _check_bytes_moved(real_head.engine.prover.transfers.read(job.id), synth_nodes, nodes)


def _check_bytes_moved(parts: list[Any], synth_nodes: dict[int, str],
                       nodes: dict[str, str]) -> None:
    """Check 12's bytes moved, against where the spans say each step ran: a partition
    synthesized on the CPU node moved its witness and a/b/c to the GPU node (one copy each,
    Ray's locations), one synthesized on the GPU node moved neither; the GPU output and the
    proof (under Ray's inline limit) went through the head."""
    head, gpu = nodes["cpu"], nodes["gpu"]  # the test process is the driver on node A
    assert [p.partition for p in parts] == list(range(PARTITIONS))
    for p in parts:
        objs = {o.name: o for o in p.objects}
        assert sorted(objs) == ["abc", "gpu_output", "proof", "witness"], p  # one attempt each
        synth = synth_nodes[p.partition]
        wit, abc = objs["witness"], objs["abc"]
        assert wit.made_on == abc.made_on == synth, p
        assert wit.size > 100 * 1024 and abc.size > wit.size, p  # in the object store
        stored = 0 if synth == gpu else wit.size + abc.size
        for o in (wit, abc):
            assert o.held_on == tuple(sorted({synth, gpu})), o
            assert o.moved_bytes == (0 if synth == gpu else o.size), o
        assert objs["gpu_output"].held_on == objs["proof"].held_on == (), p
        assert objs["gpu_output"].size < 1024 and objs["proof"].size < 1024 * 4, p
        # GPU node -> head; head -> finalize when it ran on the GPU node; proof -> head
        inline = objs["gpu_output"].size * (1 + (synth != head)) + objs["proof"].size * (
            synth != head)
        assert p.moved_bytes == stored + inline, p
    print("bytes moved per partition: " + ", ".join(
        f"[{p.partition}] {p.moved_bytes} ({'off' if synth_nodes[p.partition] != gpu else 'on'}"
        " the GPU node)" for p in parts))


def test_bad_inputs_fail_the_job_with_the_witness_error_not_a_retry(real_head):
    engine, b = real_head.engine, real_head.setup
    before = sum(engine.snapshot().partition_retries.values())
    bad = dict(b.inputs)
    bad.pop(next(iter(bad)))
    from cuzk.errors import CuzkError

    with pytest.raises(CuzkError):  # refused at submit by the head's own input check
        engine.submit(KIND, [bad] * PARTITIONS)
    assert sum(engine.snapshot().partition_retries.values()) == before


def test_a_kind_never_proven_is_predicted_by_a_gpu_workers_prior_and_refused_by_it(
        real_head):
    """Issue 27 on a cluster head: a kind with no history has phase figures marked ``prior``,
    from the GPU worker's own calibrated rates (its basis names the worker and its node), and
    a ``reject`` job whose deadline that prior says cannot be met is refused at admission
    (503), not admitted and missed. One remote ask per kind, however many jobs."""
    import ray

    from cuzk.cluster.executor import short
    from cuzk.errors import DeadlineInfeasible
    from tests._doubles import wait_until
    from tests.cluster._cluster import gpu_node

    engine, b = real_head.engine, real_head.setup
    # the head asked at its start (the worker calibrated at its own): bound, not a sleep
    assert wait_until(lambda: COLD in engine.status()["phase_estimates"], 30, 0.05)
    figures = engine.status()["phase_estimates"][COLD]
    assert {ph: f["source"] for ph, f in figures.items()} == {
        "synthesizing": "prior", "proving": "prior", "finalizing": "prior"}, figures
    total = sum(f["seconds"] for f in figures.values())
    assert 0 < total < 60, figures
    basis = engine.priors.basis(COLD)
    node = short(gpu_node(real_head.cluster).node_id)
    assert basis is not None and "calibrated" in basis, basis
    assert f"from GPU worker real-gpu-{node}-0 on node {node}" in basis, basis
    calls = engine.prover.priors.calls
    rejected = engine.counters.get("jobs_rejected").get((COLD, "deadline"), 0)
    jobs = len(engine.jobs())
    for _ in range(2):  # half what the prior says the idle cluster needs
        with pytest.raises(DeadlineInfeasible, match="prior"):
            engine.submit(COLD, [b.inputs], deadline=time.time() + total / 2)
    assert engine.counters.get("jobs_rejected")[(COLD, "deadline")] == rejected + 2
    assert len(engine.jobs()) == jobs  # nothing admitted
    assert engine.prover.priors.calls == calls <= len(engine.settings.proof_kinds)
    gpu = next(a for a in engine.prover.actors() if a.kind == "gpu")
    warm = ray.get(gpu.handle.snapshot.remote())["prior_warm_s"]
    assert warm is not None  # calibrated at its start, before the first ask
    print(f"{COLD} prior {total:.3f} s ({basis}); GPU worker calibrated in {warm:.2f} s at "
          "its start")


RESTART_PARTITIONS = 4


def test_head_killed_and_restarted_finds_its_gpu_worker_with_the_key_resident(
        real_head, tmp_path: Path):
    """Check 7: ``cuzk serve --cluster`` (a real process) is killed with SIGKILL while a job is
    half proven, and started again on the same journal. The detached GPU worker is the same
    process with the key it had (its key-load count does not move), the unfinished
    partitions resume (those journaled before the kill are served as journaled, not proven
    again), the job finished before the kill is served by id, and snarkjs verifies every proof.

    Runs last in this module: it retires the in-process head (the GPU node has one GPU), and
    it kills the GPU worker it leaves behind."""
    import httpx
    import ray

    from cuzk.cluster import NAMESPACE
    from cuzk.cluster.executor import short
    from cuzk.serve_process import ServeProcess, read_journal, serve_env
    from tests.cluster._cluster import gpu_node
    from tests.cuzk.cli._durability import KEYS_DIR, verify_all

    real_head.retire()
    journal = tmp_path / "journal.sqlite3"
    env = serve_env(journal, KEYS_DIR, CUZK_CLUSTER_SD_FILE=str(tmp_path / "cuzk_sd.json"),
                    CUZK_PROOF_KINDS_WINNING_POST_PARTITIONS=str(RESTART_PARTITIONS),
                    # a job resumed after the kill must finish, not be cut at a deadline
                    CUZK_PROOF_KINDS_WINNING_POST_DEADLINE="")
    args = ("--cluster", real_head.cluster.address)
    inputs = real_head.setup.inputs
    bound = time.monotonic() + 200  # the whole test, on a loaded 2-core machine
    gpu_name = f"gpu-{short(gpu_node(real_head.cluster).node_id)}-0"
    server = ServeProcess(env, args)
    try:
        server.start(timeout=150)
        server.ready()
        with httpx.Client(base_url=server.url, timeout=30) as c:
            r = c.post("/v1/proofs", json={"proof_kind": KIND,
                                           "inputs": [inputs] * RESTART_PARTITIONS})
            assert r.status_code == 202, r.text
            finished = _wait_done(c, r.json()["id"], bound)
            r = c.post("/v1/proofs", json={"proof_kind": KIND,
                                           "inputs": [inputs] * RESTART_PARTITIONS})
            assert r.status_code == 202, r.text
            job_id = r.json()["id"]
        while True:  # kill once the job is partly journaled
            done = [i for (j, i) in read_journal(journal)[1] if j == job_id]
            if done:
                break
            assert time.monotonic() < bound, "no partition journaled"
            time.sleep(0.02)
        server.kill()
        jobs, proofs = read_journal(journal)
        before = {i: p for (j, i), p in proofs.items() if j == job_id}
        assert 1 <= len(before) < RESTART_PARTITIONS, sorted(before)  # killed mid-job
        assert jobs[job_id]["state"] not in ("succeeded", "failed", "cancelled")

        gpu = ray.get_actor(gpu_name, namespace=NAMESPACE)
        pid = ray.get(gpu.pid.remote())
        held = ray.get(gpu.snapshot.remote())
        assert held["keys"] == [KIND] and held["key_loads"] == 1, held

        t0 = time.monotonic()
        server = ServeProcess(env, args)
        server.start(timeout=150)
        server.ready()
        assert "keys still resident in GPU workers, not loaded again: winning-post" \
            in server.output
        with httpx.Client(base_url=server.url, timeout=30) as c:
            resumed = _wait_done(c, job_id, bound)
            recovery_s = time.monotonic() - t0
            again = c.get(f"/v1/proofs/{finished['id']}")
            assert again.status_code == 200, again.text
            assert again.json()["proofs"] == finished["proofs"]  # by id, as before the kill
            vk = c.get(f"/v1/circuits/{KIND}/verification_key").json()
        after = ray.get(gpu.snapshot.remote())
        assert ray.get(gpu.pid.remote()) == pid  # the same process, found by name
        assert after["key_loads"] == 1 and after["keys"] == [KIND], after  # nothing reloaded
    finally:
        server.kill()
        with contextlib.suppress(ValueError):  # the cluster is shared: free its one GPU
            ray.kill(ray.get_actor(gpu_name, namespace=NAMESPACE), no_restart=True)
    _, proofs = read_journal(journal)
    served = [p["proof"] for p in resumed["proofs"]]
    assert len(served) == RESTART_PARTITIONS
    for i, proof in before.items():  # journaled before the kill: served as it was
        assert json.loads(proof) == served[i]
    for i, proof in enumerate(served):  # served = journaled, one row per partition
        assert json.loads(proofs[(job_id, i)]) == proof
    items = [{"name": f"{job['id']}[{i}]", "vk": vk, "public": p["public"],
              "proof": p["proof"]} for job in (finished, resumed)
             for i, p in enumerate(job["proofs"])]
    assert verify_all(items) == 2 * RESTART_PARTITIONS
    print(f"head kill -9: {len(before)} of {RESTART_PARTITIONS} partitions journaled; "
          f"restart to the job's success {recovery_s:.1f} s")


def _wait_done(client: Any, job_id: str, bound: float) -> dict:
    while True:
        r = client.get(f"/v1/proofs/{job_id}", params={"wait": 10})
        assert r.status_code == 200, r.text
        body = r.json()
        if body["state"] in ("succeeded", "failed", "cancelled"):
            assert body["state"] == "succeeded", body
            return body
        assert time.monotonic() < bound, body
