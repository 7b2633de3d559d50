"""The job journal: what was accepted, what each partition proved, how each job ended.

One SQLite file (stdlib ``sqlite3``) in WAL mode with ``synchronous=FULL``: every commit is on
disk before the call returns, so a job written here before its 202 survives ``kill -9``, an OS
crash and a power cut. NORMAL would survive only a process crash (the last commits can be lost
with the OS), which would break the promise a 202 makes; the cost of FULL is one fsync per
write, measured by ``cuzk bench durability``.

The file is opened in exclusive locking mode: one process owns a journal, so two servers can
never recover (and prove) the same jobs. A journal that cannot be opened, checked or written is
a :class:`JournalError` whose message says what is wrong and what to do; a corrupt file is never
replaced or repaired here.

Retention: finished jobs are dropped when they are older than ``retention_s`` or beyond the
newest ``retention_jobs``; unfinished jobs are never dropped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuzk.errors import Unavailable
from cuzk.protocol import TERMINAL_STATES

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2
"""2 added ``jobs.deadline``; a version-1 journal is migrated in place when opened."""
APPLICATION_ID = 0x637A6B4A  # "czkJ": marks the file as a cuzk journal
TERMINAL = TERMINAL_STATES
ACCEPTED = "accepted"
RETRY_AFTER_S = 10.0  # what a 503 for an unwritable journal suggests to the client
PROBE_BYTES = 65_536  # a readiness probe must need new space, as a job's record would

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    id            TEXT PRIMARY KEY,
    request_id    TEXT,
    proof_kind    TEXT NOT NULL,
    priority      TEXT NOT NULL,
    inputs        TEXT NOT NULL,
    inputs_digest TEXT NOT NULL,
    traceparent   TEXT,
    span_context  TEXT,
    attempt       INTEGER NOT NULL,
    seq           INTEGER NOT NULL,
    submitted_at  REAL NOT NULL,
    state         TEXT NOT NULL,
    error         TEXT,
    finished_at   REAL,
    deadline      REAL
);
CREATE INDEX IF NOT EXISTS jobs_by_request ON jobs (request_id, attempt);
CREATE INDEX IF NOT EXISTS jobs_by_finish ON jobs (finished_at);
CREATE TABLE IF NOT EXISTS partitions (
    job_id      TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    idx         INTEGER NOT NULL,
    proof       TEXT NOT NULL,
    public      TEXT NOT NULL,
    finished_at REAL NOT NULL,
    PRIMARY KEY (job_id, idx)
);
"""


def _migrations(db: sqlite3.Connection) -> str:
    """SQL bringing an older journal's tables to this schema (run in the opening transaction,
    so a journal is migrated whole or not at all)."""
    cols = {r[1] for r in db.execute("PRAGMA table_info(jobs)")}
    if cols and "deadline" not in cols:  # version 1
        return "ALTER TABLE jobs ADD COLUMN deadline REAL; "
    return ""


class JournalError(Unavailable):
    """The journal cannot be used; the message names the file, the cause and the remedy.
    While running this is a 503 for a submit: nothing is accepted that is not durable."""

    def __init__(self, message: str, retry_after: float | None = RETRY_AFTER_S) -> None:
        super().__init__(message, retry_after)


class JournalCorrupt(JournalError):
    """The file is not a usable cuzk journal. It is left exactly as it was found."""


def inputs_digest(inputs: Sequence[Mapping[str, Any]]) -> str:
    """A digest of partition inputs, independent of key order (what "the same body" means)."""
    text = json.dumps(list(inputs), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class JobRecord:
    """One job as the journal holds it; ``proofs`` maps partition index -> (proof, public)."""

    id: str
    request_id: str | None
    proof_kind: str
    priority: str
    inputs: list[dict[str, Any]]
    inputs_digest: str
    traceparent: str | None  # the client's, when it sent one
    span_context: str | None  # the job span's own traceparent (recovered spans link to it)
    attempt: int
    seq: int
    submitted_at: float
    state: str = ACCEPTED
    error: str | None = None
    finished_at: float | None = None
    proofs: dict[int, tuple[dict, list[str]]] = field(default_factory=dict)
    deadline: float | None = None  # wall clock

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL


def _describe(path: Path, exc: BaseException) -> JournalError:
    """Turn an OS or SQLite error into a message an operator can act on."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc)
    if name.startswith("SQLITE_FULL") or "disk is full" in text:
        return JournalError(f"journal {path}: the disk is full ({text}); free space, then retry")
    if name.startswith("SQLITE_READONLY") or "readonly" in text or "read-only" in text:
        return JournalError(
            f"journal {path}: cannot write, the file or its file system is read-only ({text}); "
            "fix the permissions or set journal.path to a writable location")
    if name.startswith("SQLITE_BUSY") or name.startswith("SQLITE_LOCKED") or "locked" in text:
        return JournalError(
            f"journal {path}: in use by another process (is another cuzk serve running with "
            "the same journal.path?)")
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or "not a database" in text \
            or "malformed" in text:
        return JournalCorrupt(
            f"journal {path}: the file is corrupt ({text}); it was left untouched. Move it "
            "aside (or restore a backup) to start with an empty journal")
    if name.startswith("SQLITE_CANTOPEN") or "unable to open" in text:
        return JournalError(
            f"journal {path}: cannot open or create the file ({text}); check that the "
            "directory exists and is writable, or set journal.path")
    if isinstance(exc, OSError):
        return JournalError(f"journal {path}: {exc.strerror or exc}; check journal.path")
    return JournalError(f"journal {path}: {type(exc).__name__}: {text}")


class Journal:
    """A job journal at ``path``: open it (checks included) with :meth:`open`.

    ``on_write(seconds)`` is told how long each committed write took (the telemetry turns it
    into ``cuzk_journal_write_seconds``). All methods are thread-safe; writes are serialised.
    """

    def __init__(
        self,
        path: Path,
        retention_jobs: int = 10_000,
        retention_s: float = 604_800.0,
        on_write: Callable[[float], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.retention_jobs = retention_jobs
        self.retention_s = retention_s
        self.on_write = on_write
        self._clock = clock
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self.last_error: JournalError | None = None

    # ---- opening -----------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path, **kwargs: Any) -> Journal:
        journal = cls(path, **kwargs)
        journal._open()
        return journal

    def _open(self) -> None:
        path = self.path
        if path.is_dir():
            raise JournalError(f"journal {path}: is a directory; journal.path must name a file")
        blocker = next((d for d in (path.parent, *path.parent.parents) if d.exists()), None)
        if blocker is not None and not blocker.is_dir():
            raise JournalError(
                f"journal {path}: {blocker} is not a directory; set journal.path to a "
                "writable location")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise JournalError(
                f"journal {path}: cannot create its directory {path.parent}: "
                f"{e.strerror or e}; set journal.path to a writable location") from None
        db: sqlite3.Connection | None = None
        try:
            db = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA locking_mode=EXCLUSIVE")
            self._check(db)  # before anything writes: a file we refuse stays byte for byte
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise JournalError(f"journal {path}: cannot use WAL mode (got {mode!r})")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("PRAGMA journal_size_limit=67108864")
            # One write transaction: takes the exclusive lock and proves the file is writable.
            db.executescript(
                f"BEGIN IMMEDIATE; {_migrations(db)}{_SCHEMA}"
                f" PRAGMA application_id={APPLICATION_ID};"
                f" INSERT OR REPLACE INTO meta (key, value) VALUES"
                f" ('schema_version', '{SCHEMA_VERSION}'), ('opened_at', '{self._clock()!r}');"
                " COMMIT;")
        except JournalError:
            if db is not None:
                db.close()
            raise
        except (sqlite3.Error, OSError) as e:
            if db is not None:
                db.close()
            raise _describe(path, e) from None
        self._db = db
        self.prune()

    def _check(self, db: sqlite3.Connection) -> None:
        """Refuse a file that is damaged, not ours, or from a newer cuzk."""
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
        if tables and app_id != APPLICATION_ID:
            raise JournalCorrupt(
                f"journal {self.path}: is an SQLite database but not a cuzk journal (tables: "
                f"{', '.join(sorted(tables))}); it was left untouched. Set journal.path to "
                "another file")
        problems = [r[0] for r in db.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise JournalCorrupt(
                f"journal {self.path}: the file is corrupt ({'; '.join(problems[:3])}); it was "
                "left untouched. Move it aside (or restore a backup) to start with an empty "
                "journal")
        if "meta" in tables:
            row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is not None and int(row[0]) > SCHEMA_VERSION:
                raise JournalError(
                    f"journal {self.path}: schema version {row[0]} is not the one this cuzk "
                    f"reads (up to {SCHEMA_VERSION}); use the cuzk that wrote it, or another "
                    "journal.path")

    def close(self) -> None:
        with self._lock:
            db, self._db = self._db, None
        if db is not None:
            db.close()

    @property
    def closed(self) -> bool:
        return self._db is None

    # ---- writes ------------------------------------------------------------------------------

    def _write(self, fn: Callable[[sqlite3.Connection], None]) -> None:
        """Run ``fn`` in one committed transaction; a failure raises JournalError."""
        with self._lock:
            db = self._db
            if db is None:
                raise JournalError(f"journal {self.path}: closed")
            t0 = time.perf_counter()
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    fn(db)
                    db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        with contextlib.suppress(sqlite3.Error):  # the first error is the news
                            db.execute("ROLLBACK")
                    raise
            except (sqlite3.Error, OSError) as e:
                err = _describe(self.path, e)
                self.last_error = err
                raise err from e
            seconds = time.perf_counter() - t0
            self.last_error = None
        if self.on_write is not None:
            self.on_write(seconds)

    def record_accepted(self, rec: JobRecord) -> None:
        """The job exists once this returns: call before answering 202."""

        def write(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO jobs (id, request_id, proof_kind, priority, inputs, inputs_digest,"
                " traceparent, span_context, attempt, seq, submitted_at, state, deadline)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (rec.id, rec.request_id, rec.proof_kind, rec.priority,
                 json.dumps(rec.inputs, separators=(",", ":")), rec.inputs_digest,
                 rec.traceparent, rec.span_context, rec.attempt, rec.seq, rec.submitted_at,
                 ACCEPTED, rec.deadline))

        self._write(write)

    def record_partition(self, job_id: str, index: int, proof: dict, public: list[str]) -> None:
        """A finalized partition's proof: it is never proven again after this returns."""

        def write(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT OR REPLACE INTO partitions (job_id, idx, proof, public, finished_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (job_id, index, json.dumps(proof, separators=(",", ":")),
                 json.dumps(public, separators=(",", ":")), self._clock()))

        self._write(write)

    def record_settled(
        self, job_id: str, state: str, error: str | None = None, finished_at: float | None = None
    ) -> None:
        """The job's terminal state; also applies retention (in the same transaction)."""
        if state not in TERMINAL:
            raise ValueError(f"not a terminal state: {state!r}")
        now = self._clock()

        def write(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE jobs SET state = ?, error = ?, finished_at = ? WHERE id = ?",
                (state, error, finished_at if finished_at is not None else now, job_id))
            self._prune(db, now)

        self._write(write)

    def prune(self) -> int:
        """Drop finished jobs past retention; returns how many went."""
        dropped: list[int] = []
        self._write(lambda db: dropped.append(self._prune(db, self._clock())))
        return dropped[0] if dropped else 0

    def _prune(self, db: sqlite3.Connection, now: float) -> int:
        done = "state IN (" + ", ".join(f"'{t}'" for t in sorted(TERMINAL)) + ")"
        n = db.execute(f"DELETE FROM jobs WHERE {done} AND finished_at < ?",
                       (now - self.retention_s,)).rowcount
        n += db.execute(
            f"DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE {done}"
            " ORDER BY finished_at DESC LIMIT -1 OFFSET ?)", (self.retention_jobs,)).rowcount
        return n

    def save_figures(self, name: str, figures: Mapping[str, Any]) -> None:
        """Keep a small JSON document (the phase-duration estimates) for the next start."""
        text = json.dumps(figures, sort_keys=True, separators=(",", ":"))

        def write(db: sqlite3.Connection) -> None:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                       (f"figures.{name}", text))

        self._write(write)

    def figures(self, name: str) -> dict[str, Any]:
        """What ``save_figures`` kept ({} when nothing, or when it is unreadable)."""
        with self._lock:
            if self._db is None:
                return {}
            row = self._db.execute("SELECT value FROM meta WHERE key = ?",
                                   (f"figures.{name}",)).fetchone()
        if row is None:
            return {}
        try:
            value = json.loads(row[0])
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    def probe(self) -> JournalError | None:
        """Write (and drop) a job's worth of bytes; the error if that fails now (readiness)."""

        def write(db: sqlite3.Connection) -> None:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('probe', zeroblob(?))",
                       (PROBE_BYTES,))
            db.execute("DELETE FROM meta WHERE key = 'probe'")

        try:
            self._write(write)
        except JournalError as e:
            return e
        return None

    # ---- reads -------------------------------------------------------------------------------

    def _rows(self, sql: str, args: tuple = ()) -> list[JobRecord]:
        with self._lock:
            db = self._db
            if db is None:
                raise JournalError(f"journal {self.path}: closed")
            try:
                rows = db.execute(
                    "SELECT id, request_id, proof_kind, priority, inputs, inputs_digest,"
                    " traceparent, span_context, attempt, seq, submitted_at, state, error,"
                    " finished_at, deadline"
                    f" FROM jobs {sql}", args).fetchall()
                out = [JobRecord(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], r[6], r[7],
                                 r[8], r[9], r[10], r[11], r[12], r[13], deadline=r[14])
                       for r in rows]
                for rec in out:
                    for idx, proof, public in db.execute(
                            "SELECT idx, proof, public FROM partitions WHERE job_id = ?",
                            (rec.id,)):
                        rec.proofs[idx] = (json.loads(proof), json.loads(public))
            except (sqlite3.Error, ValueError) as e:
                raise _describe(self.path, e) from e
        return out

    def unfinished(self) -> list[JobRecord]:
        """Jobs accepted and not settled, oldest first, with the proofs journaled so far."""
        return self._rows("WHERE state = ? ORDER BY seq", (ACCEPTED,))

    def _live(self) -> str:
        return f"(state = '{ACCEPTED}' OR finished_at >= {self._clock() - self.retention_s!r})"

    def find(self, job_id: str) -> JobRecord | None:
        """A job by id, unless retention has dropped it."""
        rows = self._rows(f"WHERE id = ? AND {self._live()}", (job_id,))
        return rows[0] if rows else None

    def latest_for_request(self, request_id: str) -> JobRecord | None:
        """The newest attempt made for ``request_id``, unless retention has dropped it."""
        rows = self._rows(
            f"WHERE request_id = ? AND {self._live()} ORDER BY attempt DESC LIMIT 1",
            (request_id,))
        return rows[0] if rows else None

    def max_seq(self) -> int:
        with self._lock:
            if self._db is None:
                return -1
            row = self._db.execute("SELECT MAX(seq) FROM jobs").fetchone()
        return -1 if row[0] is None else int(row[0])

    def counts(self) -> dict[str, int]:
        """Jobs held by state (tests and status)."""
        with self._lock:
            if self._db is None:
                return {}
            return dict(self._db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state"))


class JournalRecorder:
    """The journal as a consumer of the engine's events: each finalized partition's proof and
    each job's outcome. (A job's acceptance is written by the engine itself, before the 202,
    because a failed write must refuse the submit; events cannot refuse anything.)"""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def subscribe(self, bus: Any) -> Any:
        return bus.subscribe(self.observe)

    def observe(self, event: object) -> None:
        from cuzk.engine.events import JobSettled, PartitionFinalized

        try:
            if isinstance(event, PartitionFinalized):
                self.journal.record_partition(
                    event.job_id, event.partition, dict(event.proof), list(event.public))
            elif isinstance(event, JobSettled):
                self.journal.record_settled(event.job_id, event.outcome, event.error)
        except JournalError as e:  # the client still gets its proof; a restart redoes the work
            log.error("not journaled (%s of job %s): %s", type(event).__name__,
                      getattr(event, "job_id", "?"), e)
