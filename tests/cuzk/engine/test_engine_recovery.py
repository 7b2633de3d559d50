"""The engine over a journal: recovery after a crash, idempotency across restarts, 409, 503,
and the drain. A "crash" here closes the journal under a running engine (nothing more reaches
it, as after kill -9); the real kill -9 test is tests/cuzk/cli/test_cli_serve_durability.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cuzk.engine.engine import EngineNotRunning
from cuzk.engine.journal import JournalCorrupt, JournalError
from cuzk.errors import RequestConflict
from cuzk.simulated_prover import ScriptedProver
from tests._doubles import make_test_engine, wait_until

KINDS = {"porep-c2": (3, "normal"), "winning-post": (1, "critical"), "window-post": (1, "high")}


def start(path: Path, kinds: dict = KINDS, **settings: Any):
    prover = ScriptedProver()
    engine, _, spans = make_test_engine(kinds, prover, journal_path=path, **settings)
    return engine.start(), prover, spans


_CRASHED: list[Any] = []


def crash(engine) -> None:
    """Cut the engine off from its journal as a kill -9 would: nothing it does from now on
    reaches the journal (its threads are stopped at the end of the test)."""
    engine.journal.close()
    _CRASHED.append(engine)


@pytest.fixture(autouse=True)
def _stop_crashed_engines() -> Any:
    yield
    while _CRASHED:
        engine = _CRASHED.pop()
        engine.shutdown(2)


def tags(prover: ScriptedProver, step: str) -> list[str]:
    return [tag for s, edge, tag in prover.events if s == step and edge == "start"]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "journal.sqlite3"


def test_only_unfinished_partitions_are_proven_again(path: Path) -> None:
    engine, prover, _ = start(path)
    gate = prover.hold("gpu", "p2")
    job = engine.submit("porep-c2", [{"tag": "p0"}, {"tag": "p1"}, {"tag": "p2"}],
                        request_id="req-1")
    assert gate.wait_entered()
    assert wait_until(lambda: [p.outcome for p in job.partitions[:2]] == ["done", "done"])
    first_proofs = [p.proof for p in job.partitions[:2]]
    crash(engine)

    again, prover2, _ = start(path)
    try:
        recovered = again.get(job.id)
        assert recovered.request_id == "req-1" and recovered.attempt == 1
        assert again.wait(job.id, 10).state == "succeeded"
        assert tags(prover2, "synthesize") == ["p2"]  # p0, p1 were journaled: not proven again
        assert [p.proof for p in recovered.partitions[:2]] == first_proofs
        assert again.submit("porep-c2", [{"tag": "p0"}, {"tag": "p1"}, {"tag": "p2"}],
                            request_id="req-1") is recovered
        assert again.recovered()[("porep-c2", "resumed")] == 1
    finally:
        gate.release()
        again.shutdown(5)


def test_recovered_jobs_queue_again_in_priority_order(
    path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine, prover, _ = start(path, synthesis_threads=1)
    # Both threads held: the high blocker on the one reserved for critical and high work
    # (cuzk.engine.scheduling), a normal one on the configured thread.
    assert wait_until(lambda: engine.pipeline.pending._reserved_waiting)
    hold = prover.hold("synthesize", "blocker")
    hold_n = prover.hold("synthesize", "blocker-n")
    engine.submit("window-post", [{"tag": "blocker"}])
    assert hold.wait_entered()
    engine.submit("window-post", [{"tag": "blocker-n"}], priority="normal")
    assert hold_n.wait_entered()
    for tag, kind, prio in [("low", "window-post", "low"), ("n", "porep-c2", "normal"),
                            ("high", "window-post", "high"), ("crit", "winning-post", None)]:
        inputs = [{"tag": tag}] * (3 if kind == "porep-c2" else 1)
        engine.submit(kind, inputs, priority=prio)
    crash(engine)

    # The order the synthesis threads take the recovered partitions from the queue (when a
    # synthesis then starts also depends on its kind's key load, on a loader thread).
    from cuzk.engine.pipeline import Pipeline

    taken: list[str] = []
    synthesize = Pipeline._synthesize

    def taking(self: Pipeline, p: Any) -> None:
        taken.append(p.inputs["tag"])
        synthesize(self, p)

    monkeypatch.setattr(Pipeline, "_synthesize", taking)
    again, prover2, _ = start(path, synthesis_threads=1)
    try:
        assert wait_until(again.quiescent, 10)
        order = [t for i, t in enumerate(taken) if i == 0 or taken[i - 1] != t]
        # crit on the thread reserved for critical and high work, blocker (high, earlier) on
        # the other, then high on whichever is free first; lower classes after, in order.
        assert order == ["crit", "blocker", "high", "blocker-n", "n", "low"], order
        assert set(tags(prover2, "synthesize")) == set(order)  # each one was proven
    finally:
        hold.release()
        hold_n.release()
        again.shutdown(5)


def test_finished_jobs_are_served_after_restart_by_id_and_request_id(path: Path) -> None:
    engine, _, _ = start(path)
    job = engine.submit("winning-post", [{"tag": "w"}], request_id="req-w")
    assert engine.wait(job.id, 5).state == "succeeded"
    before = job.to_dict()
    engine.shutdown(5)

    again, prover2, _ = start(path)
    try:
        after = again.get(job.id).to_dict()
        for key in ("id", "request_id", "proof_kind", "priority", "state", "attempt", "proofs",
                    "trace_id"):
            assert after[key] == before[key], key
        assert after["timings"]["submitted_at"] == before["timings"]["submitted_at"]
        assert again.submit("winning-post", [{"tag": "w"}], request_id="req-w").id == job.id
        assert again.wait(job.id, 1).state == "succeeded"
        assert prover2.calls["synthesize"] == 0
        with pytest.raises(RequestConflict, match=f"already names job {job.id}.*inputs"):
            again.submit("winning-post", [{"tag": "other"}], request_id="req-w")
    finally:
        again.shutdown(5)


def test_retention_drops_finished_jobs_from_memory_and_journal(path: Path) -> None:
    one_at_a_time = {"synthesis_threads": 1, "gpu_workers_per_device": 1, "finalizer_threads": 1}
    engine, _, _ = start(path, job_retention=2, **one_at_a_time)
    jobs = [engine.submit("winning-post", [{"tag": str(i)}], request_id=f"r{i}")
            for i in range(4)]
    for j in jobs:  # the Job objects: the oldest may be dropped before we ask by id
        assert j.settled.wait(5) and j.state == "succeeded"
    assert wait_until(lambda: len(engine.jobs()) == 2)
    engine.shutdown(5)
    again, _, _ = start(path, job_retention=2)
    try:
        served = []
        for j in jobs:
            try:
                served.append(again.get(j.id).state)
            except Exception:
                served.append(None)
        newest = sorted(jobs, key=lambda j: j.finished_at or 0.0)[-2:]  # they finish in any order
        assert served == ["succeeded" if j in newest else None for j in jobs]
        assert again.journal.counts() == {"succeeded": 2}
    finally:
        again.shutdown(5)


def test_a_job_whose_partitions_were_all_journaled_completes_without_proving(path: Path) -> None:
    engine, _, _ = start(path)
    job = engine.submit("window-post", [{"tag": "x"}])
    assert engine.wait(job.id, 5).state == "succeeded"
    assert job.settled.wait(5)  # its outcome is journaled
    # As if killed between the last partition's write and the outcome's:
    assert engine.journal._db is not None
    engine.journal._db.execute("UPDATE jobs SET state='accepted', finished_at=NULL")
    crash(engine)
    again, prover2, _ = start(path)
    try:
        assert again.wait(job.id, 5).state == "succeeded"
        assert prover2.calls["synthesize"] == 0
        assert again.recovered()[("window-post", "completed")] == 1
        assert again.get(job.id).to_dict()["proofs"] == job.to_dict()["proofs"]
    finally:
        again.shutdown(5)


def test_a_job_of_a_kind_no_longer_configured_fails_with_the_reason(path: Path) -> None:
    engine, prover, _ = start(path)
    gate = prover.hold("synthesize", "gone")
    job = engine.submit("window-post", [{"tag": "gone"}])
    assert gate.wait_entered()
    crash(engine)
    gate.release()
    again, _, _ = start(path, kinds={"winning-post": (1, "critical")})
    try:
        restored = again.get(job.id)
        assert restored.state == "failed"
        assert "proof kind 'window-post' is no longer configured" in (restored.error or "")
        assert again.recovered()[("window-post", "failed")] == 1
    finally:
        again.shutdown(5)


def test_recovered_job_span_links_to_the_original_and_keeps_the_trace(path: Path) -> None:
    engine, prover, _ = start(path)
    gate = prover.hold("synthesize", "t")
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    job = engine.submit("winning-post", [{"tag": "t"}], trace_context={"traceparent": parent})
    original = job.span.span.get_span_context()  # type: ignore[union-attr]
    assert gate.wait_entered()
    crash(engine)
    gate.release()
    again, _, spans = start(path)
    try:
        assert again.wait(job.id, 5).state == "succeeded"
        again.shutdown(5)
        [span] = [s for s in spans.get_finished_spans() if s.name == "cuzk.job"]
        assert span.attributes["cuzk.job.recovered"] is True
        assert [link.context.span_id for link in span.links] == [original.span_id]
        assert span.context.trace_id == original.trace_id == int(parent[3:35], 16)
        assert span.parent is not None and span.parent.span_id == int(parent[36:52], 16)
    finally:
        again.shutdown(5)


@pytest.mark.parametrize(
    ("kind", "inputs", "priority", "differs"),
    [
        ("winning-post", [{"tag": "a"}], None, "proof kind 'winning-post'"),
        ("window-post", [{"tag": "a"}], "low", "priority 'low' (was 'high')"),
        ("window-post", [{"tag": "b"}], None, "inputs"),
    ],
)
def test_same_request_id_with_another_body_is_a_conflict_that_changes_nothing(
    path: Path, kind: str, inputs: list, priority: str | None, differs: str
) -> None:
    engine, prover, _ = start(path)
    try:
        job = engine.submit("window-post", [{"tag": "a"}], request_id="r")
        engine.wait(job.id, 5)
        before = (engine.counters.get("jobs_submitted"), dict(prover.calls),
                  engine.journal.counts())
        with pytest.raises(RequestConflict) as e:
            engine.submit(kind, inputs, request_id="r", priority=priority)
        assert e.value.job_id == job.id and e.value.http_status == 409
        assert differs in str(e.value) and job.id in str(e.value)
        assert (engine.counters.get("jobs_submitted"), dict(prover.calls),
                engine.journal.counts()) == before
        # Same body, priority spelled out as the kind's default: the same job, no conflict.
        assert engine.submit("window-post", [{"tag": "a"}], request_id="r",
                             priority="high") is job
    finally:
        engine.shutdown(5)


def test_a_journal_that_cannot_be_written_refuses_submits_with_503(path: Path) -> None:
    engine, prover, _ = start(path)
    try:
        db = engine.journal._db
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count={pages}")
        big = [{"tag": "big", "pad": "x" * 20_000}]
        before = len(engine.jobs())
        with pytest.raises(JournalError, match="disk is full") as e:
            engine.submit("window-post", big, request_id="full")
        assert e.value.http_status == 503
        assert len(engine.jobs()) == before and prover.calls["synthesize"] == 0
        assert "disk is full" in (engine.readiness() or "")
        with pytest.raises(Exception, match="no job"):
            engine.get("full")
        db.execute("PRAGMA max_page_count=1073741823")
        engine._probe_at = 0.0
        assert engine.readiness() is None
        job = engine.submit("window-post", big, request_id="full")
        assert engine.wait(job.id, 5).state == "succeeded"
    finally:
        engine.shutdown(5)


def test_an_unusable_journal_stops_the_engine_from_being_built(path: Path) -> None:
    path.write_bytes(b"\x00garbage" * 100)
    with pytest.raises(JournalCorrupt, match="corrupt"):
        make_test_engine(KINDS, journal_path=path)
    assert path.read_bytes() == b"\x00garbage" * 100


def test_drain_finishes_work_in_flight_and_parks_the_rest_for_the_next_start(
    path: Path,
) -> None:
    engine, prover, _ = start(path, synthesis_threads=1)
    on_gpu = prover.hold("gpu", "inflight")
    in_synthesis = prover.hold("synthesize", "syn")
    inflight = engine.submit("window-post", [{"tag": "inflight"}])
    assert on_gpu.wait_entered()
    synthesizing = engine.submit("window-post", [{"tag": "syn"}])
    assert in_synthesis.wait_entered()
    # The configured thread busy too (the high "syn" is on the reserved one).
    in_synthesis_n = prover.hold("synthesize", "syn-n")
    synthesizing_n = engine.submit("window-post", [{"tag": "syn-n"}], priority="normal")
    assert in_synthesis_n.wait_entered()
    queued = [engine.submit("winning-post", [{"tag": f"q{i}"}]) for i in range(3)]
    import threading

    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(engine.drain(10)))
    t.start()
    assert wait_until(lambda: engine.draining)
    with pytest.raises(EngineNotRunning) as e:
        engine.submit("winning-post", [{"tag": "late"}])
    assert e.value.http_status == 503 and e.value.retry_after and e.value.retry_after > 0
    assert engine.readiness() and "draining" in engine.readiness()  # type: ignore[operator]
    assert not engine.drained.is_set()
    on_gpu.release()
    in_synthesis.release()
    in_synthesis_n.release()
    t.join(10)
    assert result == [True] and engine.drained.is_set()
    assert (inflight.state, synthesizing.state, synthesizing_n.state) == ("succeeded",) * 3
    assert [j.state for j in queued] == ["queued"] * 3
    engine.shutdown(5)
    assert engine.journal.closed

    again, prover2, _ = start(path)
    try:
        for j in queued:
            assert again.wait(j.id, 5).state == "succeeded"
        assert sorted(tags(prover2, "synthesize")) == ["q0", "q1", "q2"]
        assert again.get(inflight.id).state == "succeeded"
    finally:
        again.shutdown(5)


def test_a_drain_with_the_workers_paused_parks_what_synthesis_finishes(path: Path) -> None:
    """Workers paused, a partition in synthesis when the drain starts: it finishes synthesis
    and is parked (no worker would take it before the exit), so the drain ends at once instead
    of waiting out its timeout; a partition queued for a worker that a pause during the drain
    strands is parked too. Both jobs are proven at the next start."""
    import threading

    engine, prover, _ = start(path, synthesis_threads=1)
    engine.pause_workers()
    queued_gpu = engine.submit("winning-post", [{"tag": "queued-gpu"}])
    assert wait_until(lambda: engine.snapshot().queues["gpu"] == 1)
    in_synthesis = prover.hold("synthesize", "syn")
    synthesizing = engine.submit("window-post", [{"tag": "syn"}])
    assert in_synthesis.wait_entered()
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(engine.drain(10)))
    t.start()
    assert wait_until(lambda: engine.draining)
    in_synthesis.release()
    t.join(5)
    assert result == [True]
    assert (queued_gpu.state, synthesizing.state) == ("queued", "queued")
    engine.shutdown(5)

    again, _, _ = start(path)
    try:
        for j in (queued_gpu, synthesizing):
            assert again.wait(j.id, 5).state == "succeeded"
    finally:
        again.shutdown(5)


def test_a_pause_during_a_drain_parks_what_waits_for_a_worker(path: Path) -> None:
    engine, prover, _ = start(path, synthesis_threads=1, gpu_workers_per_device=1,
                              reserved_gpu_workers_per_device=0)
    on_gpu = prover.hold("gpu", "busy")
    busy = engine.submit("window-post", [{"tag": "busy"}])
    assert on_gpu.wait_entered()
    in_synthesis = prover.hold("synthesize", "next")
    nxt = engine.submit("window-post", [{"tag": "next"}])
    assert in_synthesis.wait_entered()
    import threading

    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(engine.drain(10)))
    t.start()
    assert wait_until(lambda: engine.draining)
    in_synthesis.release()        # workers running: "next" is queued for the busy worker
    assert wait_until(lambda: engine.snapshot().queues["gpu"] == 1)
    engine.pause_workers()        # ... and a pause now would strand it: parked instead
    on_gpu.release()
    t.join(5)
    assert result == [True]
    assert (busy.state, nxt.state) == ("succeeded", "queued")
    engine.shutdown(5)


def test_without_a_journal_shutdown_still_cancels_unfinished_jobs() -> None:
    engine, prover, _ = make_test_engine(KINDS)
    engine.start()
    prover.hold("synthesize", "x")
    job = engine.submit("window-post", [{"tag": "x"}])
    engine.shutdown(1)
    assert job.state == "cancelled"
