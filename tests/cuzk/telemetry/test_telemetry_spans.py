"""Span tree through the real engine with the in-memory exporter (docs/design.md section 5)."""

from __future__ import annotations

from collections import Counter

from opentelemetry.trace import StatusCode

from tests._doubles import make_test_engine, wait_until

KINDS = {"single": (1, "critical"), "triple": (3, "normal")}


def _by_id(spans):
    return {s.context.span_id: s for s in spans}


def test_span_tree_parents_attributes_and_links():
    engine, _, exporter = make_test_engine(KINDS)
    with engine:
        jobs = [engine.submit("single", [{"tag": "s"}]),
                engine.submit("triple", [{"tag": f"t{i}"} for i in range(3)]),
                engine.submit("single", [{"tag": "s2"}])]
        for j in jobs:
            assert j.settled.wait(5)
    spans = exporter.get_finished_spans()
    by_id = _by_id(spans)
    job_spans = [s for s in spans if s.name == "cuzk.job"]
    assert len(job_spans) == len(jobs)
    for job in jobs:
        (js,) = [s for s in job_spans if s.attributes["cuzk.job.id"] == job.id]
        assert js.parent is None
        assert js.attributes["cuzk.proof_kind"] == job.proof_kind
        assert js.attributes["cuzk.priority"] == job.priority
        assert format(js.context.trace_id, "032x") == job.trace_id
        parts = [s for s in spans if s.name == "cuzk.partition"
                 and s.parent.span_id == js.context.span_id]
        assert sorted(s.attributes["cuzk.partition.index"] for s in parts) == list(
            range(len(job.partitions)))
        for ps in parts:
            assert ps.attributes["cuzk.circuit.domain_size"] == 16
            children = [s for s in spans if s.parent and s.parent.span_id == ps.context.span_id]
            names = Counter(s.name for s in children)
            loads = names.pop("cuzk.key.load", 0)  # a partition granted before its key loaded
            assert loads <= 1
            assert names == Counter({"cuzk.memory.wait": 1, "cuzk.synthesis": 1,
                                     "cuzk.gpu": 1, "cuzk.finalize": 1})
            gpu = next(s for s in children if s.name == "cuzk.gpu")
            fin = next(s for s in children if s.name == "cuzk.finalize")
            assert gpu.attributes["cuzk.worker.id"].startswith("cpu-")  # the CPU backend's
            assert gpu.attributes["cuzk.device"] == "cpu"
            assert [link.context.span_id for link in fin.links] == [gpu.context.span_id]
            assert fin.attributes["cuzk.worker.id"] == gpu.attributes["cuzk.worker.id"]
            for s in children:
                assert s.attributes["cuzk.job.id"] == job.id
                assert s.attributes["cuzk.partition.index"] == ps.attributes[
                    "cuzk.partition.index"]
                assert s.context.trace_id == js.context.trace_id
                assert s.status.status_code != StatusCode.ERROR
            assert gpu.start_time < fin.start_time
        assert all(by_id[s.parent.span_id] for s in spans if s.parent
                   and s.context.trace_id == js.context.trace_id)
    assert engine.spans.open_spans() == []


def test_gpu_span_carries_the_device_steps_the_prover_measured():
    """Each device step's milliseconds (prover.gpu_steps: H and each MSM on CUDA) lands on the
    partition's cuzk.gpu span, so a trace shows where the lease went."""
    from cuzk.engine.pipeline import gpu_step_attribute

    engine, prover, exporter = make_test_engine(KINDS)
    prover.gpu_step_ms = 2.5
    with engine:
        job = engine.submit("triple", [{"tag": f"t{i}"} for i in range(3)])
        assert job.settled.wait(5)
    gpus = [s for s in exporter.get_finished_spans() if s.name == "cuzk.gpu"]
    assert len(gpus) == 3
    assert all(s.attributes["cuzk.gpu.step.scripted_ms"] == 2.5 for s in gpus)
    assert gpu_step_attribute("MSM B2") == "cuzk.gpu.step.msm_b2_ms"


def test_traceparent_makes_job_span_a_child():
    engine, _, exporter = make_test_engine(KINDS)
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    parent_span = "00f067aa0ba902b7"
    with engine:
        job = engine.submit("single", [{}], trace_context={
            "traceparent": f"00-{trace_id}-{parent_span}-01"})
        assert job.settled.wait(5)
    (js,) = [s for s in exporter.get_finished_spans() if s.name == "cuzk.job"]
    assert format(js.context.trace_id, "032x") == trace_id == job.trace_id
    assert format(js.parent.span_id, "016x") == parent_span


def test_failure_sets_error_status_with_exception_and_closes_everything():
    engine, prover, exporter = make_test_engine(KINDS)
    prover.fail("finalize", "t1", RuntimeError("self-verification failed"))
    with engine:
        job = engine.submit("triple", [{"tag": f"t{i}"} for i in range(3)])
        assert job.settled.wait(5)
        assert wait_until(engine.quiescent)
    spans = exporter.get_finished_spans()
    (js,) = [s for s in spans if s.name == "cuzk.job"]
    assert js.status.status_code == StatusCode.ERROR
    failed_fin = [s for s in spans if s.name == "cuzk.finalize"
                  and s.status.status_code == StatusCode.ERROR]
    assert len(failed_fin) == 1
    assert failed_fin[0].attributes["cuzk.partition.index"] == 1
    (event,) = [e for e in failed_fin[0].events if e.name == "exception"]
    assert "self-verification failed" in event.attributes["exception.message"]
    assert engine.spans.open_spans() == []
    assert sum(1 for s in spans if s.name == "cuzk.partition") == 3


def test_tracing_disabled_still_proves():
    engine, _, exporter = make_test_engine(KINDS, tracing_enabled=False)
    with engine:
        job = engine.submit("single", [{}])
        assert engine.wait(job.id, 5).state == "succeeded"
        assert job.trace_id is None
    assert exporter.get_finished_spans() == ()
