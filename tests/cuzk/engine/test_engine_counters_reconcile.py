"""Counter and gauge pairs reconcile at every read (issue 21).

``jobs_submitted`` = ``jobs_completed`` (all outcomes) + the unfinished jobs the same snapshot
lists, per proof kind, at any moment: while jobs are submitted, proven, failed and cancelled
from other threads, and after a restart that recovers journaled jobs (which used to be
completed without ever being counted as submitted: completed 1, submitted 0).
"""

from __future__ import annotations

import random
import threading
from pathlib import Path

from cuzk.protocol import TERMINAL_STATES
from cuzk.testing import make_test_engine

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
