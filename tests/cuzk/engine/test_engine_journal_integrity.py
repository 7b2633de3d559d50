"""Journal integrity: a journaled proof is served only when its row checksum holds and (where
the backend verifies) its proof verifies; a journal lost under the server or at start is noticed,
never silently replaced by an empty one. The real-process counterparts are in
tests/cuzk/cli/test_cli_serve_journal_integrity.py."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from cuzk.engine.journal import (
    SCHEMA_VERSION,
    JobRecord,
    Journal,
    JournalCorrupt,
    JournalLost,
    inputs_digest,
    proof_digest,
)
from cuzk.simulated_prover import ScriptedProver
from tests._doubles import make_test_engine, wait_until

KINDS = {"porep-c2": (3, "normal"), "window-post": (1, "high")}


class VerifyingProver(ScriptedProver):
    """A scripted prover whose proofs "verify" only when they are what it would have proven."""

    def verify_proof(self, proof_kind: str, proof: dict, public: list[str]) -> bool:
        self.verified = getattr(self, "verified", 0) + 1
        return public == [proof.get("tag")]


def start(path: Path, prover: ScriptedProver | None = None, **settings: Any):
    prover = prover or ScriptedProver()
    engine, _, _ = make_test_engine(KINDS, prover, journal_path=path, **settings)
    return engine.start(), prover


def tags(prover: ScriptedProver, step: str) -> list[str]:
    return [tag for s, edge, tag in prover.events if s == step and edge == "start"]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "journal.sqlite3"


def _finished_job(path: Path) -> tuple[str, list[dict]]:
    engine, _ = start(path)
    try:
        job = engine.submit("porep-c2", [{"tag": f"p{i}"} for i in range(3)], request_id="r1")
        assert engine.wait(job.id, 10).state == "succeeded"
        assert job.settled.wait(10)
        return job.id, [p.proof.proof for p in job.partitions]
    finally:
        engine.shutdown(5)


def _edit(path: Path, job_id: str, idx: int, fix_digest: bool, **changes: Any) -> None:
    """Edit one journaled proof in the file (no server holds it), optionally recomputing the
    row checksum as a careful forger would."""
    db = sqlite3.connect(path)
    try:
        proof_text, public_text = db.execute(
            "SELECT proof, public FROM partitions WHERE job_id=? AND idx=?",
            (job_id, idx)).fetchone()
        proof = json.loads(proof_text) | changes
        new = json.dumps(proof, separators=(",", ":"))
        if fix_digest:
            db.execute("UPDATE partitions SET proof=?, digest=? WHERE job_id=? AND idx=?",
                       (new, proof_digest(job_id, idx, new, public_text), job_id, idx))
        else:
            db.execute("UPDATE partitions SET proof=? WHERE job_id=? AND idx=?",
                       (new, job_id, idx))
        db.commit()
    finally:
        db.close()


def test_an_edited_journaled_proof_is_proven_again_not_served(path: Path) -> None:
    job_id, proofs = _finished_job(path)
    _edit(path, job_id, 1, fix_digest=False, tag="forged")
    engine, prover = start(path)
    try:
        job = engine.get(job_id)  # read from the journal: the damaged row is found here
        assert engine.wait(job_id, 10).state == "succeeded"
        served = [p.proof.proof for p in job.partitions]
        assert served == proofs and all(p["tag"] != "forged" for p in served)
        assert tags(prover, "synthesize") == ["p1"]  # only the damaged partition
        assert engine.snapshot().journal_proofs_rejected[("porep-c2", "checksum")] == 1
        assert wait_until(lambda: engine.journal.counts() == {"succeeded": 1})
        db = engine.journal._db
        assert db is not None
        assert db.execute("SELECT job_id, idx, reason FROM damaged_partitions").fetchall() == [
            (job_id, 1, "checksum mismatch")]
    finally:
        engine.shutdown(5)
    again, prover2 = start(path)  # the re-proven row is intact: nothing more is proven
    try:
        assert [p.proof.proof for p in again.get(job_id).partitions] == proofs
        assert prover2.calls["synthesize"] == 0
    finally:
        again.shutdown(5)


def test_a_damaged_proof_of_an_unfinished_job_is_proven_again_at_recovery(path: Path) -> None:
    engine, prover = start(path)
    gate = prover.hold("gpu", "p2")
    job = engine.submit("porep-c2", [{"tag": f"p{i}"} for i in range(3)])
    assert gate.wait_entered()
    assert wait_until(lambda: len(engine.journal.unfinished()[0].proofs) == 2)
    engine.journal.close()  # as after kill -9
    _edit(path, job.id, 0, fix_digest=False, pi_a=["1", "2", "1"])
    try:
        again, prover2 = start(path)
        try:
            assert again.wait(job.id, 10).state == "succeeded"
            assert sorted(tags(prover2, "synthesize")) == ["p0", "p2"]
            assert all("pi_a" not in p.proof.proof for p in again.get(job.id).partitions)
            assert again.recovered()[("porep-c2", "resumed")] == 1
            assert again.snapshot().journal_proofs_rejected[("porep-c2", "checksum")] == 1
        finally:
            again.shutdown(5)
    finally:
        gate.release()
        engine.shutdown(2)


def test_a_forged_row_with_a_good_checksum_fails_verification_and_is_proven_again(
    path: Path,
) -> None:
    job_id, proofs = _finished_job(path)
    _edit(path, job_id, 2, fix_digest=True, tag="forged")
    engine, prover = start(path, VerifyingProver())
    try:
        assert engine.wait(job_id, 10).state == "succeeded"
        assert [p.proof.proof for p in engine.get(job_id).partitions] == proofs
        assert tags(prover, "synthesize") == ["p2"]
        rejected = engine.snapshot().journal_proofs_rejected
        assert rejected[("porep-c2", "verification")] == 1
        assert rejected[("porep-c2", "checksum")] == 0
        verified = prover.verified
        engine.get(job_id)  # verified once per row: not again on every read
        assert prover.verified == verified
    finally:
        engine.shutdown(5)


def test_a_job_whose_inputs_are_damaged_fails_loudly_at_recovery(path: Path) -> None:
    engine, prover = start(path)
    gate = prover.hold("synthesize", "x")
    job = engine.submit("window-post", [{"tag": "x"}])
    assert gate.wait_entered()
    engine.journal.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE jobs SET inputs=? WHERE id=?", ('[{"tag":"y"}]', job.id))
    db.commit()
    db.close()
    try:
        again, prover2 = start(path)
        try:
            got = again.wait(job.id, 5)
            assert got.state == "failed"
            assert "inputs are damaged" in (got.error or "")
            assert prover2.calls["synthesize"] == 0
            assert again.recovered()[("window-post", "failed")] == 1
        finally:
            again.shutdown(5)
    finally:
        gate.release()
        engine.shutdown(2)


def test_a_version_1_journal_is_upgraded_and_its_proofs_stay_readable(path: Path) -> None:
    path.parent.mkdir(parents=True)
    j = Journal.open(path)
    j.record_accepted(JobRecord("j1", "r1", "window-post", "high", [{"tag": "a"}],
                                "d", None, None, 1, 0, 1.0))
    j.record_partition("j1", 0, {"tag": "a"}, ["a"])
    j.close()
    db = sqlite3.connect(path)  # back to what version 1 wrote: no checksum column
    db.executescript(
        "ALTER TABLE partitions DROP COLUMN digest; DROP TABLE damaged_partitions;"
        " UPDATE meta SET value='1' WHERE key='schema_version';")
    db.close()
    j = Journal.open(path)
    try:
        rec = j.unfinished()[0]
        assert rec.proofs == {0: ({"tag": "a"}, ["a"])} and rec.digests == {0: None}
        assert j._db is not None
        assert j._db.execute(
            "SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(
                SCHEMA_VERSION)
    finally:
        j.close()


def test_the_live_connection_is_wal_with_synchronous_full(path: Path) -> None:
    j = Journal.open(path)
    try:
        assert j._db is not None
        assert j._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert j._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    finally:
        j.close()


# ---- a lost journal ----------------------------------------------------------------------------


def _a_journal_with_a_job(path: Path) -> None:
    j = Journal.open(path)
    j.record_accepted(JobRecord("j1", None, "window-post", "high", [{"tag": "a"}], "d", None,
                                None, 1, 0, 1.0))
    j.close()


@pytest.mark.parametrize("how", ["truncated", "deleted"])
def test_a_journal_emptied_or_deleted_between_starts_is_refused_as_lost(
    path: Path, how: str
) -> None:
    _a_journal_with_a_job(path)
    if how == "truncated":
        path.write_bytes(b"")
    else:
        path.unlink()
        for side in ("-wal", "-shm"):
            Path(str(path) + side).unlink(missing_ok=True)
    with pytest.raises(JournalLost, match=r"journal.*existed here.*Restore.*or delete"):
        Journal.open(path)
    assert not path.exists() or path.read_bytes() == b""  # left as found
    path.with_name(path.name + ".id").unlink()  # the operator's decision: start empty
    j = Journal.open(path)
    assert j.counts() == {}
    j.close()


def test_another_journal_in_place_of_the_recorded_one_is_refused(path: Path) -> None:
    _a_journal_with_a_job(path)
    other = path.with_name("other.sqlite3")
    Journal.open(other).close()
    os.replace(other, path)
    with pytest.raises(JournalLost, match="was replaced"):
        Journal.open(path)


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_journal_lost_under_the_running_engine_stops_submits_and_readiness(
    path: Path, how: str
) -> None:
    engine, _ = start(path)
    try:
        assert engine.readiness() is None
        job = engine.submit("window-post", [{"tag": "a"}])
        assert engine.wait(job.id, 5).state == "succeeded"
        if how == "deleted":
            for p in path.parent.iterdir():
                p.unlink()
            path.parent.rmdir()
        else:
            os.replace(path.with_name(path.name + ".id"), path)  # any other file at the path
        with pytest.raises(JournalLost, match=f"was {how}") as e:
            engine.submit("window-post", [{"tag": "b"}])
        assert e.value.http_status == 503
        assert "journal" in (engine.readiness() or "")
        assert engine.snapshot().journal_lost
        engine._probe_at = 0.0  # a probe write cannot make it ready again
        assert "journal" in (engine.readiness() or "")
    finally:
        engine.shutdown(5)


def test_an_idle_journal_notices_its_deletion_on_its_own_and_says_so_once(
    path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No write and no readiness probe after the deletion: the watcher finds it (log line once,
    ``lost`` set for the metric), then stops; every later write is refused as lost."""
    j = Journal.open(path, identity_check_s=0.02)
    watcher = j._watcher
    assert watcher is not None and watcher.is_alive()
    j.record_accepted(JobRecord("j0", None, "window-post", "high", [], inputs_digest([]), None,
                                None, 1, 0, 1.0))
    with caplog.at_level("ERROR", logger="cuzk.engine.journal"):
        for p in path.parent.iterdir():
            p.unlink()
        path.parent.rmdir()
        assert wait_until(lambda: j.lost is not None, 5), "the watcher did not notice"
        watcher.join(5)
        assert not watcher.is_alive()  # lost stays lost: nothing more to watch
        assert "was deleted while this server was writing to it" in str(j.lost)
        with pytest.raises(JournalLost):
            j.record_accepted(JobRecord("j1", None, "window-post", "high", [], "d", None, None,
                                        1, 0, 1.0))
        assert j.fault() is j.lost
        found = j.find("j0")  # what it held stays readable by this process (the open file)
        assert found is not None and found.broken is None
    lines = [r for r in caplog.records if "was deleted" in r.getMessage()]
    assert len(lines) == 1, lines
    j.close()


def test_closing_a_journal_stops_its_watcher(path: Path) -> None:
    j = Journal.open(path, identity_check_s=60.0)
    watcher = j._watcher
    assert watcher is not None and watcher.is_alive()
    closer = threading.Thread(target=j.close, daemon=True)
    closer.start()
    closer.join(5)  # a bound: close() wakes the watcher, it does not wait out the 60 s period
    assert not closer.is_alive(), "close() waited for the watcher's period"
    assert not watcher.is_alive()
    assert j.lost is None


def test_a_damaged_proof_whose_inputs_are_damaged_too_fails_the_job_saying_why(
    path: Path,
) -> None:
    job_id, _ = _finished_job(path)
    _edit(path, job_id, 0, fix_digest=False, tag="forged")
    db = sqlite3.connect(path)
    db.execute("UPDATE jobs SET inputs='[{\"tag\":\"p9\"}]' WHERE id=?", (job_id,))
    db.commit()
    db.close()
    engine, prover = start(path)
    try:
        job = engine.get(job_id)
        assert job.state == "failed" and "cannot be proven again" in (job.error or "")
        assert [p.outcome for p in job.partitions] == ["cancelled", "done", "done"]
        assert prover.calls["synthesize"] == 0
        assert engine.journal.find(job_id).state == "failed"
        # A failed job's request id may be submitted again: a new attempt proves it afresh.
        again = engine.submit("porep-c2", [{"tag": f"p{i}"} for i in range(3)],
                              request_id="r1")
        assert again.attempt == 2 and engine.wait(again.id, 10).state == "succeeded"
    finally:
        engine.shutdown(5)


def test_bytes_that_are_not_utf_8_in_a_row_are_damage_not_a_read_error(path: Path) -> None:
    """Random bytes inside a proof's text: the row is reported damaged (and proven again), the
    read itself does not fail (which left such jobs answering 503 forever)."""
    job_id, _ = _finished_job(path)
    db = sqlite3.connect(path)
    db.execute("UPDATE partitions SET proof = CAST(X'7b22ff223a317d' AS TEXT) WHERE idx = 0")
    db.execute("UPDATE jobs SET inputs = CAST(X'5b7bff7d5d' AS TEXT)")
    db.commit()
    db.close()
    j = Journal.open(path)
    try:
        rec = j.find(job_id)
        assert rec is not None
        assert rec.damaged == {0: "checksum mismatch"} and sorted(rec.proofs) == [1, 2]
        assert rec.broken is not None and "inputs are damaged" in rec.broken
    finally:
        j.close()


def test_a_row_that_disagrees_with_its_index_refuses_the_open(path: Path) -> None:
    """Damage inside a row that SQLite's quick_check passes: the full integrity_check
    cross-checks the request-id index against the table and refuses the file."""
    j = Journal.open(path)
    j.record_accepted(JobRecord("j1", "request-AAAA", "window-post", "high", [{"tag": "a"}],
                                "d", None, None, 1, 0, 1.0))
    j.close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    data = bytearray(path.read_bytes())
    at = data.find(b"request-AAAA")  # the first copy only: the table or the index, not both
    assert at > 0 and data.count(b"request-AAAA") == 2
    data[at:at + 12] = b"request-BBBB"
    path.write_bytes(bytes(data))
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA quick_check").fetchall() == [("ok",)]  # what passed before
    db.close()
    with pytest.raises(JournalCorrupt, match="corrupt"):
        Journal.open(path)


@pytest.mark.parametrize("column, value", [("state", "acce#ted"), ("attempt", "x")])
def test_a_job_row_with_an_impossible_value_fails_saying_why_not_stuck(
    path: Path, column: str, value: str
) -> None:
    job_id, _ = _finished_job(path)
    db = sqlite3.connect(path)
    db.execute(f"UPDATE jobs SET {column} = ? WHERE id = ?", (value, job_id))
    db.commit()
    db.close()
    engine, prover = start(path)
    try:
        job = engine.get(job_id)
        assert job.state == "failed" and "journal's record of this job is damaged" in (
            job.error or ""), (job.state, job.error)
        assert prover.calls["synthesize"] == 0
        assert engine.readiness() is None  # one damaged row: the job fails, the server serves
    finally:
        engine.shutdown(5)
