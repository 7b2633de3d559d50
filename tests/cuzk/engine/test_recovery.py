"""JournalRecovery on its own: what a restart, or a read after a job left memory, makes of the
journal's rows (cuzk/engine/recovery.py), with a real journal and a recording ``adopt``."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from cuzk.engine.counters import Counters
from cuzk.engine.jobs import Job
from cuzk.engine.journal import JobRecord, Journal, inputs_digest
from cuzk.engine.recovery import JournalRecovery, ensure_recovery_counters
from cuzk.engine.settings import EngineSettings, ProofKindSettings
from cuzk.engine.spans import SpanBook
from cuzk.simulated_prover import ScriptedProver

GOOD, BAD = {"pi_a": "good"}, {"pi_a": "bad"}


class VerifyingProver(ScriptedProver):
    """Verifies a proof by its marker; counts how often it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.verified = 0

    def verify_proof(
        self, proof_kind: str, proof: Mapping[str, Any], public: Sequence[str]
    ) -> bool | None:
        self.verified += 1
        return proof.get("pi_a") == "good"


class Harness:
    def __init__(self, tmp_path: Path) -> None:
        self.journal = Journal.open(tmp_path / "journal.sqlite3")
        self.settings = EngineSettings(
            proof_kinds={"porep-c2": ProofKindSettings("porep-c2", 2, "normal")},
            memory_budget_bytes=1_000_000)
        self.prover = VerifyingProver()
        self.counters = Counters()
        ensure_recovery_counters(self.counters, self.settings.proof_kinds)
        self.live: dict[str, Job] = {}
        self.adopted: list[JobRecord] = []
        self.recovery = JournalRecovery(
            self.journal, self.settings, self.prover, self.counters,
            SpanBook(None, enabled=False), live=self.live.get, adopt=self.adopt)

    def adopt(self, rec: JobRecord) -> Job:
        self.adopted.append(rec)
        job = self.recovery.job_of(rec)
        self.live[job.id] = job
        return job

    def accept(self, job_id: str, seq: int, kind: str = "porep-c2", partitions: int = 2) -> None:
        inputs = [{"i": i} for i in range(partitions)]
        self.journal.record_accepted(JobRecord(
            id=job_id, request_id=None, proof_kind=kind, priority="normal", inputs=inputs,
            inputs_digest=inputs_digest(inputs), traceparent=None, span_context=None,
            attempt=1, seq=seq, submitted_at=time.time()))

    def count(self, name: str, key: tuple[str, str]) -> int:
        return self.counters.get(name)[key]


@pytest.fixture
def h(tmp_path: Path) -> Any:
    harness = Harness(tmp_path)
    yield harness
    harness.journal.close()


def test_recover_adopts_unfinished_rows_in_order_and_returns_the_next_sequence(h) -> None:
    h.accept("a", 3)
    h.accept("b", 7)
    h.journal.record_partition("a", 0, GOOD, ["1"])
    assert h.recovery.recover() == 8
    assert [r.id for r in h.adopted] == ["a", "b"]
    assert set(h.adopted[0].proofs) == {0}  # the journaled proof is kept, not proven again
    assert h.count("jobs_recovered", ("porep-c2", "resumed")) == 2


def test_a_row_that_can_no_longer_be_proven_fails_with_the_reason_and_is_not_adopted(h) -> None:
    h.accept("gone", 1, kind="snap-update")
    h.accept("reshaped", 2, partitions=3)
    h.recovery.recover()
    assert h.adopted == []
    gone, reshaped = h.journal.find("gone"), h.journal.find("reshaped")
    assert gone is not None and gone.state == "failed" and "no longer configured" in gone.error
    assert reshaped is not None and reshaped.state == "failed"
    assert "now takes 2 partitions, the job has 3" in reshaped.error
    assert h.count("jobs_recovered", ("snap-update", "failed")) == 1
    assert h.count("jobs_recovered", ("porep-c2", "failed")) == 1


def test_a_journaled_proof_that_fails_verification_is_counted_quarantined_and_proven_again(
    h,
) -> None:
    h.accept("a", 1)
    h.journal.record_partition("a", 0, GOOD, ["1"])
    h.journal.record_partition("a", 1, BAD, ["2"])
    h.recovery.recover()
    assert set(h.adopted[0].proofs) == {0}  # partition 1 goes back to the queue
    assert h.count("journal_proofs_rejected", ("porep-c2", "verification")) == 1
    again = h.journal.find("a")
    assert again is not None and set(again.proofs) == {0}  # quarantined, not served again


def test_a_finished_job_is_restored_not_adopted_and_each_proof_verified_once(h) -> None:
    h.accept("a", 1)
    h.journal.record_partition("a", 0, GOOD, ["1"])
    h.journal.record_partition("a", 1, GOOD, ["2"])
    h.journal.record_settled("a", "succeeded")
    for _ in range(2):
        rec = h.journal.find("a")
        assert rec is not None
        job = h.recovery.read(rec)
        assert job.state == "succeeded" and [p.outcome for p in job.partitions] == ["done"] * 2
    assert h.adopted == [] and h.prover.verified == 2  # the second read used the cache


def test_a_finished_job_with_a_bad_proof_is_reopened_once_and_the_live_job_served_after(
    h,
) -> None:
    h.accept("a", 1)
    h.journal.record_partition("a", 0, GOOD, ["1"])
    h.journal.record_partition("a", 1, BAD, ["2"])
    h.journal.record_settled("a", "succeeded")
    rec, stale = h.journal.find("a"), h.journal.find("a")  # two readers, before either reopens
    assert rec is not None and stale is not None
    first = h.recovery.read(rec)
    assert [r.id for r in h.adopted] == ["a"] and set(h.adopted[0].proofs) == {0}
    assert h.recovery.read(stale) is first  # the second reader gets the live job, no second
    assert len(h.adopted) == 1
