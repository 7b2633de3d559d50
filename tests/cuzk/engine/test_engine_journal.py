"""The SQLite job journal on its own: round trip, retention, and every way it can be unusable."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from cuzk.engine.journal import (
    JobRecord,
    Journal,
    JournalCorrupt,
    JournalError,
    inputs_digest,
)


def record(job_id: str, seq: int, request_id: str | None = None, **kw) -> JobRecord:
    inputs = kw.pop("inputs", [{"tag": job_id}])
    return JobRecord(job_id, request_id, kw.pop("proof_kind", "porep-c2"),
                     kw.pop("priority", "normal"), inputs, inputs_digest(inputs),
                     None, None, kw.pop("attempt", 1), seq, 1000.0 + seq)


class Clock:
    def __init__(self) -> None:
        self.now = 10_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "journal.sqlite3"


def test_round_trip_survives_reopening(path: Path) -> None:
    writes: list[float] = []
    j = Journal.open(path, on_write=writes.append)
    j.record_accepted(record("a", 0, "req-a"))
    j.record_accepted(record("b", 1))
    j.record_partition("a", 1, {"pi_a": ["1"]}, ["7"])
    j.record_settled("b", "failed", "partition 0: boom")
    assert len(writes) >= 4 and all(w >= 0 for w in writes)
    j.close()

    j = Journal.open(path)
    [a] = j.unfinished()
    assert (a.id, a.request_id, a.inputs, a.proofs) == ("a", "req-a", [{"tag": "a"}],
                                                      {1: ({"pi_a": ["1"]}, ["7"])})
    b = j.find("b")
    assert b is not None and (b.state, b.error, b.finished) == ("failed", "partition 0: boom", True)
    assert j.latest_for_request("req-a").id == "a"  # type: ignore[union-attr]
    assert j.max_seq() == 1
    j.close()


def test_inputs_digest_ignores_key_order_only() -> None:
    assert inputs_digest([{"a": 1, "b": 2}]) == inputs_digest([{"b": 2, "a": 1}])
    assert inputs_digest([{"a": 1}]) != inputs_digest([{"a": "1"}])


def test_newest_attempt_answers_for_a_request_id(path: Path) -> None:
    j = Journal.open(path)
    j.record_accepted(record("first", 0, "r"))
    j.record_settled("first", "failed", "boom")
    j.record_accepted(record("second", 1, "r", attempt=2))
    assert j.latest_for_request("r").id == "second"  # type: ignore[union-attr]
    j.close()


def test_retention_by_count_and_age_keeps_unfinished_jobs(path: Path) -> None:
    clock = Clock()
    j = Journal.open(path, retention_jobs=2, retention_s=100.0, clock=clock)
    for i in range(4):
        j.record_accepted(record(f"j{i}", i))
    j.record_accepted(record("open", 9))
    for i in range(4):
        clock.now += 1
        j.record_settled(f"j{i}", "succeeded")
    assert [j.find(f"j{i}") is not None for i in range(4)] == [False, False, True, True]
    clock.now += 101  # past the age limit: every finished job goes, the unfinished one stays
    assert j.find("j3") is None  # expired jobs are not served even before pruning runs
    assert j.prune() == 2
    assert j.counts() == {"accepted": 1}
    assert [r.id for r in j.unfinished()] == ["open"]
    j.close()


def _unchanged(path: Path, before: bytes, marker: bool = False) -> None:
    """Nothing written: the file as it was, and no file added (the marker only if it was
    there before the damage)."""
    assert path.read_bytes() == before, "the journal file was modified"
    expected = [path.name, path.name + ".id"] if marker else [path.name]
    assert sorted(p.name for p in path.parent.iterdir()) == expected


def test_garbage_file_is_refused_and_left_alone(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not sqlite " * 500)
    before = path.read_bytes()
    with pytest.raises(JournalCorrupt, match=r"corrupt \(file is not a database\).*untouched"):
        Journal.open(path)
    _unchanged(path, before)


def test_damaged_pages_are_refused_and_left_alone(path: Path) -> None:
    j = Journal.open(path)
    for i in range(200):
        j.record_accepted(record(f"j{i}", i, inputs=[{"pad": "x" * 500}]))
    j.close()
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 8 * page
    for n in range(2, 8):  # b-tree pages after the schema page
        data[n * page:n * page + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    before = path.read_bytes()
    with pytest.raises(JournalCorrupt, match="corrupt"):
        Journal.open(path)
    _unchanged(path, before, marker=True)


def test_a_foreign_database_is_not_taken_over(path: Path) -> None:
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE photos (id INTEGER)")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(JournalCorrupt, match=r"not a cuzk journal.*photos"):
        Journal.open(path)
    _unchanged(path, before)


def test_a_newer_schema_is_refused(path: Path) -> None:
    Journal.open(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with pytest.raises(JournalError, match="schema version 99"):
        Journal.open(path)


def test_unwritable_locations_are_refused_with_the_reason(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a directory should be")
    with pytest.raises(JournalError, match="not-a-dir is not a directory"):
        Journal.open(blocker / "journal.sqlite3")
    with pytest.raises(JournalError, match="is a directory"):
        Journal.open(tmp_path)
    assert blocker.read_text() == "a file where a directory should be"


def test_one_process_owns_a_journal(path: Path) -> None:
    first = Journal.open(path)
    with pytest.raises(JournalError, match="in use by another process"):
        Journal.open(path)
    first.close()
    Journal.open(path).close()


def test_disk_full_while_running_is_reported_and_recovers(path: Path) -> None:
    """SQLite's own SQLITE_FULL (the page limit stands in for the disk filling up)."""
    j = Journal.open(path)
    j.record_accepted(record("before", 0))
    assert j._db is not None
    pages = j._db.execute("PRAGMA page_count").fetchone()[0]
    j._db.execute(f"PRAGMA max_page_count={pages}")
    with pytest.raises(JournalError, match="disk is full"):
        for i in range(1, 50):
            j.record_accepted(record(f"big{i}", i, inputs=[{"pad": "x" * 4000}]))
    assert j.last_error is not None
    j._db.execute("PRAGMA max_page_count=1073741823")
    assert j.probe() is None and j.last_error is None
    j.record_accepted(record("after", 99))
    assert {r.id for r in j.unfinished()} >= {"before", "after"}
    j.close()


def test_closed_journal_refuses_writes(path: Path) -> None:
    j = Journal.open(path)
    j.close()
    with pytest.raises(JournalError, match="closed"):
        j.record_accepted(record("x", 0))
