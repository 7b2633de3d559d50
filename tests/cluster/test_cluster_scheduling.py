"""The engine over a two-node cluster with the scripted prover: priority across the cluster,
a GPU worker killed mid-phase, the per-node ledgers, status and busy truth (acceptance checks 4,
5, 8, 11)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster._cluster import MB, STORE_BYTES, spilled_bytes, two_nodes
from tests.cluster._otlp import span_sink

KINDS = {"porep-c2": (10, "normal"), "winning-post": (1, "critical"), "big": (10, "normal")}


@pytest.fixture(scope="module")
def head(in_namespace: bool) -> Iterator[Any]:
    """(engine, executor, cluster, sink): the head engine over both nodes, scripted prover;
    the head and its actors export spans to ``sink``."""
    if not in_namespace:
        yield None
        return
    import ray
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from cuzk.cluster.runtime import cluster_engine
    from cuzk.cluster.worker import ProverSpec
    from cuzk.engine.settings import EngineSettings, ProofKindSettings
    from cuzk.telemetry.tracing import configure_tracing

    settings = EngineSettings(
        # more synthesis threads in the head than CPU workers (two): the extra ones wait
        backend="cpu", memory_budget_bytes=1 << 30, finalizer_threads=2, synthesis_threads=4,
        proof_kinds={n: ProofKindSettings(n, parts, prio) for n, (parts, prio) in KINDS.items()})
    with span_sink() as sink, two_nodes() as cluster:
        from cuzk.engine.backend import PartitionMemory

        spec = ProverSpec("scripted", scripted_delays={"synthesize": 0.005},
                          scripted_estimates={"big": PartitionMemory(90 * MB, 60 * MB, 0)})
        env = sink.env()
        provider = configure_tracing("cuzk", env, export_processor=SimpleSpanProcessor).provider
        engine = cluster_engine(settings, None, spec=spec, prefix="sched-",
                                tracer_provider=provider, otel_env=env)
        assert engine.prover.wait_for_cpu_workers(150)  # the tests read and script them
        engine.start()
        try:
            yield engine, engine.prover, cluster, sink
        finally:
            engine.shutdown(timeout=10)
            for a in engine.prover.actors():
                ray.kill(a.handle, no_restart=True)
            provider.shutdown()


def _gpu_handle(executor: Any) -> Any:
    """The GPU worker bound to the slot (waits while a new node's worker is being placed)."""
    deadline = time.monotonic() + 150  # a node joining a loaded 2-core box can take a while
    while (handle := executor.gpu_actor("slot-0")) is None:
        assert time.monotonic() < deadline, "no GPU worker bound to slot-0"
        time.sleep(0.05)
    return handle


def _tags(n: int, prefix: str) -> list[dict]:
    return [{"tag": f"{prefix}{i}"} for i in range(n)]


def test_one_gpu_and_two_cpu_workers_are_placed(head):
    engine, _, _, _ = head
    nodes = engine.status()["nodes"]
    roles = sorted(n["role"] for n in nodes)
    assert roles == ["cpu", "gpu"], nodes
    kinds = sorted(w["kind"] for n in nodes for w in n["workers"])
    assert kinds == ["cpu", "cpu", "gpu"]
    for n in nodes:
        assert n["reservations"]["budget_bytes"] == STORE_BYTES
        assert all(w["state"] == "idle" for w in n["workers"]), n


def test_synthesizing_only_while_a_cpu_worker_holds_the_partition(head):
    """A head synthesis thread waiting for a free CPU worker is not synthesis (issue 27: the
    head said ``synthesizing`` in 135 of 147 samples while its CPU workers were idle). With four
    head threads over two CPU workers and 0.3 s syntheses, no sample shows more partitions
    ``synthesizing`` than there are CPU workers; the ones waiting read ``queued_synthesis``."""
    import ray

    engine, executor, _, _ = head
    cpus = [a.handle for a in executor.actors() if a.kind == "cpu"]
    assert len(cpus) == 2 and engine.settings.synthesis_threads == 4
    ray.get([c.script_delay.remote("synthesize", 0.3) for c in cpus])
    try:
        job = engine.submit("porep-c2", _tags(10, "s"))
        samples: list[tuple[int, int]] = []  # (synthesizing, queued_synthesis) per sample
        while not engine.get(job.id).terminal:
            phases = engine.snapshot().partition_phases
            samples.append((phases.get(("porep-c2", "synthesizing"), 0),
                            phases.get(("porep-c2", "queued_synthesis"), 0)))
            time.sleep(0.02)
        assert engine.wait(job.id, 60).outcome == "succeeded"
    finally:
        ray.get([c.script_delay.remote("synthesize", 0.005) for c in cpus])
    assert max(n for n, _ in samples) <= len(cpus), samples
    assert any(n == len(cpus) and q > 0 for n, q in samples), samples  # threads did wait


def test_critical_gpu_phase_starts_before_queued_normal_partitions(head):
    import ray

    engine, executor, _, _ = head
    gpu = _gpu_handle(executor)
    ray.get(gpu.script_hold.remote(None))  # the first GPU phase, whichever it is
    normal = [engine.submit("porep-c2", _tags(10, "n"), priority="normal"),
              engine.submit("porep-c2", _tags(10, "m"), priority="normal")]
    try:
        assert ray.get(gpu.script_entered.remote(30.0)), "the held GPU phase never started"
        crit = engine.submit("winning-post", [{"tag": "crit"}])

        def crit_synthesized() -> bool:
            return engine.get(crit.id).view().partitions[0].phase == "queued_gpu"

        deadline = time.monotonic() + 30
        while not crit_synthesized():
            assert time.monotonic() < deadline, engine.get(crit.id).view()
            time.sleep(0.01)
    finally:
        ray.get(gpu.script_release.remote())
    for job in [*normal, crit]:
        assert engine.wait(job.id, 60).outcome == "succeeded"
    starts = [tag for step, what, tag in ray.get(gpu.script_events.remote())
              if step == "gpu" and what == "start" and tag in {
                  *(f"n{i}" for i in range(10)), *(f"m{i}" for i in range(10)), "crit"}]
    # the held one and one prefetched partition may go first, nothing else
    assert starts.index("crit") <= 2, starts


@pytest.mark.parametrize("round_", range(3))
def test_gpu_worker_killed_with_both_prefetch_slots_full_retries_each_call_once(head, round_):
    """Check 5 at prefetch depth 2: the GPU worker is killed while one GPU phase runs in it and
    a second waits its turn there. Both calls are lost with the process, so
    ``retries{phase="gpu",reason="worker_lost"}`` rises by exactly 2 (one per partition that
    was in the actor; 1 when only one was), nothing else is retried, and the job succeeds with
    every partition proven once."""
    import ray

    engine, executor, _, _ = head
    gpu = _gpu_handle(executor)
    before = dict(engine.snapshot().partition_retries)
    pid = ray.get(gpu.pid.remote())
    ray.get(gpu.script_hold.remote(None))  # the first GPU phase, whichever partition it is
    job = engine.submit("porep-c2", _tags(10, f"k{round_}-"))
    try:
        assert ray.get(gpu.script_entered.remote(30.0))
        deadline = time.monotonic() + 30
        while ray.get(gpu.calls_inside.remote()) < 2:  # the prefetched one has arrived
            assert time.monotonic() < deadline, "no second partition prefetched"
            time.sleep(0.01)
        assert ray.get(gpu.calls_inside.remote()) == 2  # never more than depth 2
    except BaseException:
        ray.get(gpu.script_release.remote())
        raise
    os.kill(pid, signal.SIGKILL)
    done = engine.wait(job.id, 90)
    assert done.outcome == "succeeded", done.error
    after = engine.snapshot().partition_retries
    assert after[("gpu", "worker_lost")] - before.get(("gpu", "worker_lost"), 0) == 2
    others = {k: v - before.get(k, 0) for k, v in after.items() if k != ("gpu", "worker_lost")}
    assert set(others.values()) <= {0}, others
    tags = sorted(public[0] for _, public in done.view().proofs or ())
    assert tags == sorted(f"k{round_}-{i}" for i in range(10))  # once each
    assert ray.get(gpu.pid.remote()) != pid  # Ray restarted the process; the slot kept it


def test_status_never_reports_a_silent_worker_idle(head):
    import ray

    engine, executor, _, _ = head
    gpu = _gpu_handle(executor)
    ray.get(gpu.script_hold.remote("busy"))
    job = engine.submit("winning-post", [{"tag": "busy"}])
    try:
        assert ray.get(gpu.script_entered.remote(30.0))
        workers = {w["id"]: w for n in engine.status()["nodes"] for w in n["workers"]}
        (g,) = [w for w in workers.values() if w["kind"] == "gpu"]
        assert g["state"] == "proving" and g["job_id"] == job.id, g
        pid = ray.get(gpu.pid.remote())
        os.kill(pid, signal.SIGSTOP)  # alive but silent
        try:
            t0 = time.monotonic()
            workers = {w["id"]: w for n in engine.status()["nodes"] for w in n["workers"]}
            assert time.monotonic() - t0 < 5
            (g,) = [w for w in workers.values() if w["kind"] == "gpu"]
            assert g["state"] == "unreachable", g
        finally:
            os.kill(pid, signal.SIGCONT)
    finally:
        ray.get(gpu.script_release.remote())
    assert engine.wait(job.id, 60).outcome == "succeeded"


def test_ledgers_reserve_before_every_dispatch_and_never_exceed_a_node(head):
    """Check 11: every synthesis and cross-node GPU phase runs under a reservation on its node,
    reserved never exceeds a node's ledger, and nothing spilled (partitions of 90 MB: three
    fill a node's 300 MB object-store ledger)."""
    import ray

    from cuzk.engine.backend import STEP

    engine, executor, _, _ = head
    seen: list[tuple[str, int, int]] = []
    ledgers = executor.ledgers()

    def watch(budget: Any) -> None:  # called under the ledger's lock: read it unlocked
        seen.append((budget.name, sum(budget._by_consumer().values()), budget.total))

    for b in ledgers.values():
        b.on_change = watch
    dispatches: list[tuple[str, str, int]] = []
    owner: dict[tuple[str, int], str] = {}  # partition -> node that synthesized it
    gpu_phases: list[tuple[str, str, int]] = []  # (synthesized on, GPU node, bytes held there)

    def dispatched(step: str, node: str, held: int) -> None:
        dispatches.append((step, node, held))
        ctx = STEP.get()
        assert ctx is not None
        if step == "synthesis":
            owner[(ctx.job_id, ctx.partition)] = node
        else:
            gpu_phases.append((owner[(ctx.job_id, ctx.partition)], node, held))

    executor.on_dispatch = dispatched
    gpu = _gpu_handle(executor)
    ray.get(gpu.script_delay.remote("gpu", 0.02))
    try:
        jobs = [engine.submit("big", _tags(10, f"l{j}-")) for j in range(2)]
        for job in jobs:
            assert engine.wait(job.id, 120).outcome == "succeeded"
    finally:
        executor.on_dispatch = None
        for b in ledgers.values():
            b.on_change = None
        ray.get(gpu.script_delay.remote("gpu", 0.0))
    assert seen, "the ledgers never changed"
    assert all(reserved <= total for _, reserved, total in seen), max(seen, key=lambda s: s[1])
    assert max(r for _, r, _ in seen) > 90 * MB  # the ledger did fill (more than one partition)
    synth = [d for d in dispatches if d[0] == "synthesis"]
    assert len(synth) == 20
    assert all(held >= 90 * MB for _, _, held in synth), synth
    # The cross-node GPU phase reserves on the GPU node's ledger (issue 27: this accepted a
    # skipped reservation as "local"): every partition synthesized on the other node holds its
    # 90 MB on the GPU node's ledger during its GPU phase; one synthesized there holds nothing
    # more (its synthesis reservation already covers it).
    gpu_nodes = {a.node_id for a in executor.actors() if a.kind == "gpu"}
    assert len(gpu_phases) == 20 and {g for _, g, _ in gpu_phases} == gpu_nodes, gpu_phases
    cross = [held for synth, gpu, held in gpu_phases if synth != gpu]
    assert cross, f"no partition was synthesized off the GPU node: {gpu_phases}"
    assert all(held >= 90 * MB for held in cross), gpu_phases
    assert all(held == 0 for synth, gpu, held in gpu_phases if synth == gpu), gpu_phases
    for b in ledgers.values():
        assert b.reserved == 0, b.snapshot()
    assert spilled_bytes() == 0


def _scrape(url: str) -> dict[str, float] | None:
    """``name{labels}`` -> value from an actor's own endpoint; None when nothing answers."""
    import urllib.error
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            text = r.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[s.name] = s.value
    return out


def _gpu_worker(engine: Any) -> dict:
    (g,) = [w for n in engine.status()["nodes"] for w in n["workers"] if w["kind"] == "gpu"]
    return g


def test_busy_gauge_is_one_exactly_while_the_gpu_span_is_open(head):
    """Check 8, bracketed: scrapes of the GPU worker's own endpoint before, inside and after a
    held GPU phase, each timed, against its ``cuzk.gpu`` span as the actor exported it. Every
    scrape inside the span's open interval reads 1 (0 false idle); before it and after it, 0."""
    import ray

    engine, executor, _, sink = head
    gpu = _gpu_handle(executor)
    worker = _gpu_worker(engine)
    url = worker["metrics_url"]

    def timed() -> tuple[int, int, float]:
        t0 = time.time_ns()
        values = _scrape(url)
        assert values is not None, "the GPU worker's endpoint did not answer"
        return t0, time.time_ns(), values["cuzk_gpu_worker_busy"]

    before = timed()
    ray.get(gpu.script_hold.remote("bracket"))
    job = engine.submit("winning-post", [{"tag": "bracket"}])
    try:
        assert ray.get(gpu.script_entered.remote(30.0)), "the held GPU phase never started"
        inside = [timed() for _ in range(20)]
    finally:
        ray.get(gpu.script_release.remote())
    assert engine.wait(job.id, 60).outcome == "succeeded"
    after = timed()

    (span,) = [s for s in sink.wait_for(lambda spans: any(
        s.name == "cuzk.gpu" and s.attributes.get("cuzk.job.id") == job.id for s in spans))
        if s.name == "cuzk.gpu" and s.attributes.get("cuzk.job.id") == job.id]
    assert span.attributes["cuzk.worker.id"] == worker["id"]
    assert span.resource["cuzk.worker.role"] == "gpu"
    opened, closed = span.start_ns, span.end_ns
    assert before[1] < opened and before[2] == 0.0, (before, opened)
    for t0, t1, busy in inside:
        assert opened <= t0 and t1 <= closed, ((t0, t1), (opened, closed))
        assert busy == 1.0, "false idle while the cuzk.gpu span was open"
    assert after[0] > closed and after[2] == 0.0, (after, closed)


def test_busy_gauge_comes_from_the_gpu_worker_and_vanishes_with_it(head, tmp_path):
    """Checks 8 and 9: the actor's own /metrics says busy exactly while its phase runs; after
    kill -9 its series are gone (never 0), and the file_sd file follows within 10 s."""
    import json

    import ray

    from cuzk.cluster.service_discovery import SdWriter

    engine, executor, _, _ = head
    gpu = _gpu_handle(executor)
    sd = tmp_path / "cuzk_sd.json"
    writer = SdWriter(executor, sd, interval_s=1.0).start()
    try:
        groups = json.loads(sd.read_text())
        assert sorted(g["labels"]["role"] for g in groups) == ["cpu", "cpu", "gpu"]
        assert all(set(g["labels"]) == {"node", "role", "worker"} for g in groups)
        url = _gpu_worker(engine)["metrics_url"]
        idle = _scrape(url)
        assert idle is not None and idle["cuzk_gpu_worker_busy"] == 0.0
        assert not [n for n in idle if n.startswith("ray_")]

        ray.get(gpu.script_hold.remote("gauge"))
        job = engine.submit("winning-post", [{"tag": "gauge"}])
        assert ray.get(gpu.script_entered.remote(30.0))
        for _ in range(20):  # held inside its lease: never a false idle
            assert _scrape(url)["cuzk_gpu_worker_busy"] == 1.0
            time.sleep(0.01)
        pid = ray.get(gpu.pid.remote())
        os.kill(pid, signal.SIGKILL)
        assert _scrape(url) is None  # the dead process's series are absent, not 0
        assert engine.wait(job.id, 90).outcome == "succeeded"

        deadline = time.monotonic() + 10
        old_target = url.removeprefix("http://").removesuffix("/metrics")
        while True:
            targets = {g["targets"][0]: g["labels"]["role"] for g in json.loads(sd.read_text())}
            new = [t for t, role in targets.items() if role == "gpu"]
            if old_target not in targets and len(new) == 1:
                break
            assert time.monotonic() < deadline, targets
            time.sleep(0.2)
        after = _scrape(f"http://{new[0]}/metrics")
        assert after is not None and after["cuzk_gpu_worker_busy"] == 0.0
    finally:
        writer.stop()
        ray.get(gpu.script_release.remote())


def test_gpu_node_removed_mid_job_and_added_back(head):
    """Check 6: the node with the GPU dies mid-job (no graceful exit) and a new one joins:
    the job succeeds, every partition proven once; recovery time is printed. Once here (about
    15 s); ``cuzk bench cluster`` repeats it 10 times (``--node-losses``)."""
    import ray

    from tests.cluster._cluster import add_gpu_node, gpu_node

    engine, executor, cluster, _ = head
    ray.get(_gpu_handle(executor).script_delay.remote("gpu", 0.2))  # a job long enough to hit
    job = engine.submit("porep-c2", _tags(10, "r-"))
    deadline = time.monotonic() + 60
    while _gpu_worker(engine)["state"] != "proving" and not engine.get(job.id).terminal:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    removed_at = time.monotonic()
    cluster.remove_node(gpu_node(cluster), allow_graceful=False)
    add_gpu_node(cluster)
    done = engine.wait(job.id, 150)
    recovered_s = time.monotonic() - removed_at
    assert done.outcome == "succeeded", done.error
    proofs = done.view().proofs or ()
    tags = [tuple(public) for _, public in proofs]
    assert sorted(tags) == sorted((f"r-{i}",) for i in range(10))  # once each
    print(f"node removed mid-job, recovered in {recovered_s:.1f} s; retries "
          f"{dict(engine.snapshot().partition_retries)}")
