"""Counter and gauge pairs reconcile at every read (issue 21).

The bytes the memory budget holds for proving keys are the bytes the key slots account for,
loading and evicting ones included: a key being loaded used to be reserved but nowhere in the
key books.

``jobs_submitted`` = ``jobs_completed`` (all outcomes) + the unfinished jobs the same snapshot
lists, per proof kind, at any moment: while jobs are submitted, proven, failed and cancelled
from other threads, and after a restart that recovers journaled jobs (which used to be
completed without ever being counted as submitted: completed 1, submitted 0).
"""

from __future__ import annotations

import random
import threading
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from cuzk.protocol import TERMINAL_STATES
from tests._doubles import make_test_engine, metrics_of

KINDS = {"porep-c2": (3, "normal"), "winning-post": (1, "critical")}
N_JOBS = 300


def _mismatches(snap) -> dict[str, tuple[int, int, int]]:
    """Kinds whose submitted count is not completed + unfinished, with the three figures."""
    unfinished: dict[str, int] = {}
    for j in snap.jobs:
        if j.state not in TERMINAL_STATES:
            unfinished[j.proof_kind] = unfinished.get(j.proof_kind, 0) + 1
    out = {}
    for kind in set(snap.jobs_submitted) | set(unfinished):
        done = sum(n for (k, _), n in snap.jobs_completed.items() if k == kind)
        sub, live = snap.jobs_submitted.get(kind, 0), unfinished.get(kind, 0)
        if sub != done + live:
            out[kind] = (sub, done, live)
    return out


def test_submitted_is_completed_plus_unfinished_at_random_reads():
    engine, prover, _ = make_test_engine(KINDS)
    rng = random.Random(21)
    prover.delay("synthesize", lambda _: rng.random() * 0.002)
    prover.delay("gpu", lambda _: rng.random() * 0.002)
    prover.fail("finalize", "bad", RuntimeError("self-check failed"))
    stop = threading.Event()
    bad: list[dict] = []
    reads = [0]
    jobs: list = []

    def reader() -> None:
        while not stop.is_set():
            m = _mismatches(engine.snapshot(recent_jobs=0))
            reads[0] += 1
            if m:
                bad.append(m)

    def submitter(seed: int) -> None:
        r = random.Random(seed)
        for i in range(N_JOBS // 2):
            kind = r.choice(list(KINDS))
            tag = "bad" if i == 5 else f"t{seed}-{i}"
            jobs.append(engine.submit(kind, [{"tag": tag}] * KINDS[kind][0]))
            if i % 7 == 3:
                engine.cancel(jobs[r.randrange(len(jobs))].id)
            if r.random() < 0.2:
                stop.wait(r.random() * 0.003)

    with engine:
        readers = [threading.Thread(target=reader) for _ in range(2)]
        writers = [threading.Thread(target=submitter, args=(s,)) for s in (1, 2)]
        for t in readers + writers:
            t.start()
        for t in writers:
            t.join(30)
        for j in jobs:
            assert j.settled.wait(20)
        stop.set()
        for t in readers:
            t.join(10)
        final = engine.snapshot(recent_jobs=0)
    assert reads[0] >= 50, reads
    assert not bad, f"{len(bad)} of {reads[0]} reads did not reconcile, e.g. {bad[:3]}"
    assert sum(final.jobs_submitted.values()) == N_JOBS == sum(final.jobs_completed.values())


def test_recovered_jobs_count_as_submitted_where_they_complete(tmp_path: Path):
    path = tmp_path / "journal.sqlite3"
    engine, _, _ = make_test_engine(KINDS, journal_path=path)
    engine.start()
    job = engine.submit("winning-post", [{"tag": "x"}])
    assert engine.wait(job.id, 5).state == "succeeded"
    assert job.settled.wait(5)
    # As if killed between the last partition's journal write and the outcome's.
    assert engine.journal._db is not None
    engine.journal._db.execute("UPDATE jobs SET state='accepted', finished_at=NULL")
    engine.journal.close()
    engine.shutdown(2)
    again, _, _ = make_test_engine(KINDS, journal_path=path)
    again.start()
    try:
        assert again.wait(job.id, 5).state == "succeeded"
        snap = again.snapshot()
        assert snap.jobs_recovered[("winning-post", "completed")] == 1
        assert snap.jobs_completed[("winning-post", "succeeded")] == 1
        assert snap.jobs_submitted["winning-post"] == 1
        assert not _mismatches(snap)
    finally:
        again.shutdown(5)


def _key_pair(snap) -> tuple[int, int]:
    """(bytes the budget holds for proving keys, bytes the key slots account for)."""
    return snap.memory.reserved_by_consumer.get("proving_key", 0), sum(snap.key_bytes.values())


def test_a_loading_key_is_reserved_and_accounted_as_loading():
    engine, prover, _ = make_test_engine({"solo": (1, "normal")})
    gate = prover.hold("load_key", "solo")
    with engine:
        job = engine.submit("solo", [{"tag": "x"}])
        assert gate.wait_entered()
        snap = engine.snapshot()
        assert snap.key_bytes == {("solo", "loading"): 1_000}
        assert _key_pair(snap) == (1_000, 1_000)
        assert snap.keys == ()  # not resident yet, and not counted as resident
        fams = {f.name: f for f in text_string_to_metric_families(
            metrics_of(engine).render()[0].decode())}
        by_state = {s.labels["state"]: s.value for s in fams["cuzk_proving_key_bytes"].samples}
        reserved = {s.labels["consumer"]: s.value
                    for s in fams["cuzk_memory_reserved_bytes"].samples}
        assert by_state == {"loading": 1_000} and reserved["proving_key"] == 1_000
        gate.release()
        assert engine.wait(job.id, 5).state == "succeeded"
        assert engine.snapshot().key_bytes == {("solo", "resident"): 1_000}


def test_key_bytes_match_the_budget_at_random_reads_while_keys_thrash():
    # One key (1000 B) and one partition (100 B) fit, two keys do not: every change of kind
    # evicts the other's key, so slots keep passing through loading and evicting.
    kinds = {"a": (1, "normal"), "b": (1, "normal")}
    engine, prover, _ = make_test_engine(kinds, memory_budget_bytes=1_150, synthesis_threads=2)
    rng = random.Random(3)
    prover.delay("load_key", lambda _: rng.random() * 0.003)
    prover.delay("unload_key", lambda _: rng.random() * 0.003)
    stop = threading.Event()
    bad: list[tuple] = []
    states: set[str] = set()
    reads = [0]

    def reader() -> None:
        while not stop.is_set():
            snap = engine.snapshot(recent_jobs=0)
            reads[0] += 1
            states.update(state for _, state in snap.key_bytes)
            held, accounted = _key_pair(snap)
            if held != accounted:
                bad.append((held, dict(snap.key_bytes)))

    with engine:
        readers = [threading.Thread(target=reader) for _ in range(2)]
        for t in readers:
            t.start()
        jobs = [engine.submit("ab"[i % 2], [{"tag": f"k{i}"}]) for i in range(80)]
        for j in jobs:
            assert j.settled.wait(30)
        stop.set()
        for t in readers:
            t.join(10)
        assert engine.snapshot().memory.evictions >= 10
    assert reads[0] >= 50, reads
    assert {"loading", "resident"} <= states, states
    assert not bad, f"{len(bad)} of {reads[0]} reads did not reconcile, e.g. {bad[:3]}"
