"""Journal recovery: what a restart, or a read of a finished job, makes of the journal's rows.

At start the journal's unfinished jobs are made live again (only their unproven partitions are
proven); a finished job asked for after it left memory is rebuilt from its row. A journaled
proof is served only once its row checksum and, where the backend can verify, its verification
pass: one that fails is counted, quarantined and proven again, never served. This is the
engine's durability concern alone, kept out of the scheduler (docs/interfaces.md, "Durability").
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping

from cuzk.engine.backend import ProofResult, ProverBackend
from cuzk.engine.counters import Counters
from cuzk.engine.jobs import Job, Partition
from cuzk.engine.journal import ACCEPTED, ROW_DAMAGED, JobRecord, Journal
from cuzk.engine.settings import EngineSettings
from cuzk.engine.spans import SpanBook, span_context_of

RECOVERY_OUTCOMES = ("resumed", "completed", "failed")
"""``cuzk_jobs_recovered_total`` outcomes: queued again; every partition was already journaled
(settled at once, nothing proven again); could not be resumed (its proof kind is gone)."""
JOURNAL_REJECT_REASONS = ("checksum", "verification")
"""``cuzk_journal_proofs_rejected_total`` reasons: a journaled partition row failed its checksum
(or did not parse); its proof failed Groth16 verification with the kind's verification key."""
VERIFIED_CACHE = 100_000
"""Journaled proofs (by row checksum) already verified since start: not verified again."""

log = logging.getLogger(__name__)


def ensure_recovery_counters(counters: Counters, proof_kinds: Iterable[str]) -> None:
    """Every kind's recovery series exist from start (at 0), journal or not."""
    for kind in proof_kinds:
        for outcome in RECOVERY_OUTCOMES:
            counters.ensure("jobs_recovered", (kind, outcome))
        for reason in JOURNAL_REJECT_REASONS:
            counters.ensure("journal_proofs_rejected", (kind, reason))


class JournalRecovery:
    """Rebuilds jobs from journal rows for one engine.

    ``live(job_id)`` answers the engine's live job of that id, if any (a row read twice must
    not make two live jobs); ``adopt(rec)`` makes a row live in the engine (spans, job table,
    queue) and returns the job.
    """

    def __init__(
        self,
        journal: Journal,
        settings: EngineSettings,
        prover: ProverBackend,
        counters: Counters,
        spans: SpanBook,
        live: Callable[[str], Job | None],
        adopt: Callable[[JobRecord], Job],
    ) -> None:
        self.journal = journal
        self.settings = settings
        self.prover = prover
        self.counters = counters
        self.spans = spans
        self._live = live
        self._adopt = adopt
        self._verified: set[str] = set()  # row checksums whose proofs verified
        self._reopen_lock = threading.Lock()  # one reopening per job, whoever reads it first

    def restore(self, rec: JobRecord) -> Job:
        """A journaled job as a Job object (finished ones are served like in-memory ones)."""
        job = self.job_of(rec)
        original = span_context_of(rec.span_context)
        if original is not None and original.trace_flags.sampled:
            job.trace_id = format(original.trace_id, "032x")
        # A row whose inputs are damaged still has its partitions (served from their proofs).
        items = rec.inputs or [{} for _ in range(max(rec.proofs, default=-1) + 1)]
        for i, item in enumerate(items):
            p = Partition(job, i, item, self.spans, None)
            if i in rec.proofs:
                p.proof = ProofResult(*rec.proofs[i])
                p.outcome = "done"
            elif rec.finished:
                p.outcome = "cancelled"
            job.partitions.append(p)
        if rec.finished:
            job.conclude(rec.state, rec.error)
            job.finished_at = rec.finished_at
            job._t_end = job._t0 + ((rec.finished_at or rec.submitted_at) - rec.submitted_at)
            job._done.set()
            job.settled.set()
        return job

    def read(self, rec: JobRecord) -> Job:
        """A job read from the journal: a finished one whose proofs are intact as is; one with
        a damaged or unverifiable proof is made unfinished and proven again, never served."""
        row_damaged = rec.broken == ROW_DAMAGED or (rec.broken is not None and not rec.finished)
        if row_damaged and rec.state != "failed":
            live = self._live(rec.id)
            if live is not None:
                return live
            why = f"the journal's record of this job is damaged: {rec.broken}"
            self.journal.record_settled(rec.id, "failed", why)
            rec.state, rec.error = "failed", why
            return self.restore(rec)
        if not rec.finished or rec.state != "succeeded":
            return self.restore(rec)
        damaged = self.check_proofs(rec)
        if not damaged:
            return self.restore(rec)
        with self._reopen_lock:  # one reopening per job, whoever reads it first
            live = self._live(rec.id)
            if live is not None:
                return live
            self.reject(rec, damaged)
            for idx in damaged:
                rec.proofs.pop(idx, None)
            if rec.broken is not None:  # nothing to prove them from: the job fails, saying why
                why = (f"journaled proofs of partition(s) {', '.join(map(str, sorted(damaged)))}"
                       f" are damaged and cannot be proven again: {rec.broken}; submit the "
                       "request again")
                self.journal.record_settled(rec.id, "failed", why)
                log.error("job %s failed: %s", rec.id, why)
                rec.state, rec.error = "failed", why
                return self.restore(rec)
            rec.state, rec.error, rec.finished_at = ACCEPTED, None, None
            job = self._adopt(rec)
        log.warning("job %s: %d journaled proof(s) were damaged; proving them again",
                    rec.id, len(damaged))
        return job

    def check_proofs(self, rec: JobRecord) -> dict[int, str]:
        """The partitions of ``rec`` whose journaled proofs must not be served: rows the journal
        found damaged, and proofs the prover's verification key rejects (where the backend
        can verify: :meth:`ProverBackend.verify_proof` answers None where it cannot)."""
        damaged = dict(rec.damaged)
        for idx, (proof, public) in sorted(rec.proofs.items()):
            digest = rec.digests.get(idx)
            if digest is not None and digest in self._verified:
                continue
            try:
                verdict = self.prover.verify_proof(rec.proof_kind, proof, public)
            except Exception as e:  # no key to verify with: the checksum is all there is
                log.warning("journaled proof of job %s partition %d not verified: %s",
                            rec.id, idx, e)
                continue
            if verdict is None:  # this prover cannot verify: the checksum is all there is
                return damaged
            if not verdict:
                damaged[idx] = "verification failed"
            elif digest is not None:
                if len(self._verified) >= VERIFIED_CACHE:
                    self._verified.clear()
                self._verified.add(digest)
        return damaged

    def reject(self, rec: JobRecord, damaged: Mapping[int, str]) -> None:
        """Count and quarantine damaged journaled proofs (their partitions are proven again)."""
        for idx, why in sorted(damaged.items()):
            reason = "verification" if why == "verification failed" else "checksum"
            self.counters.inc("journal_proofs_rejected", (rec.proof_kind, reason))
            log.error("journal: job %s partition %d: journaled proof rejected (%s), not served",
                      rec.id, idx, why)
        self.journal.quarantine(rec.id, damaged)

    def job_of(self, rec: JobRecord) -> Job:
        kind = self.settings.proof_kinds.get(rec.proof_kind)
        job = Job(rec.proof_kind, rec.priority, rec.request_id, rec.attempt, rec.seq,
                  job_id=rec.id, submitted_at=rec.submitted_at, deadline=rec.deadline,
                  on_miss=kind.on_deadline_miss if kind is not None else "continue")
        job.inputs_digest = rec.inputs_digest
        if rec.finished and rec.deadline is not None and rec.finished_at is not None:
            job.deadline_missed = rec.finished_at > rec.deadline
        return job

    def recover(self) -> int:
        """Queue the journal's unfinished jobs again; only unproven partitions are proven
        (a journaled proof is reused only once its checksum and, where the backend can,
        its verification pass). Returns the first sequence number new jobs may take."""
        journal = self.journal
        for rec in journal.unfinished():
            kind = self.settings.proof_kinds.get(rec.proof_kind)
            why = None
            if rec.broken is not None:
                why = f"not resumed after a restart: {rec.broken}"
            elif kind is None:
                why = (f"not resumed after a restart: proof kind {rec.proof_kind!r} is no "
                       "longer configured")
            elif len(rec.inputs) != kind.partitions:
                why = (f"not resumed after a restart: proof kind {rec.proof_kind!r} now takes "
                       f"{kind.partitions} partitions, the job has {len(rec.inputs)}")
            if why is not None:
                journal.record_settled(rec.id, "failed", why)
                self.counters.inc("jobs_recovered", (rec.proof_kind, "failed"))
                log.warning("job %s %s", rec.id, why)
                continue
            damaged = self.check_proofs(rec)
            if damaged:
                self.reject(rec, damaged)
                for idx in damaged:
                    rec.proofs.pop(idx, None)
            complete = all(i in rec.proofs for i in range(len(rec.inputs)))
            self._adopt(rec)
            self.counters.inc("jobs_recovered",
                              (rec.proof_kind, "completed" if complete else "resumed"))
        return journal.max_seq() + 1
