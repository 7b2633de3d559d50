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

Integrity: opening runs SQLite's full ``integrity_check`` (a damaged page refuses the start).
Every partition row carries a SHA-256 of its job id, index, proof and public signals, checked
on every read: a row that fails it is reported in :attr:`JobRecord.damaged`, never returned as
a proof, and :meth:`Journal.quarantine` moves it aside (table ``damaged_partitions``) so the
partition is proven again. A sidecar marker (``<journal>.id``) records that a journal with a
given id exists: a missing or emptied journal next to its marker is refused as *lost*, not
started empty. While running, the file at ``path`` must stay the file this process holds
(same st_dev/st_ino): a journal deleted or replaced under the server is *lost*, and every later
write and :meth:`Journal.check_identity` says so (:class:`JournalLost`). The check runs before
each write and, on a watcher thread, every ``IDENTITY_CHECK_S``: an idle server notices the
loss too (the log line and ``cuzk_journal_lost`` do not wait for the next submit).

Retention: finished jobs are dropped when they are older than ``retention_s`` or beyond the
newest ``retention_jobs``; unfinished jobs are never dropped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import sqlite3
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuzk.engine.witnesses import WitnessRef, witness_digest
from cuzk.errors import Unavailable
from cuzk.files import fsync_directory
from cuzk.protocol import TERMINAL_STATES

log = logging.getLogger(__name__)

SCHEMA_VERSION = 4
MIGRATIONS: dict[int, tuple[str, str, str]] = {
    # from version N to N + 1, the column it adds: (table, column, type). A file of an older
    # version is upgraded when opened, in the opening transaction (migrated whole or not at
    # all); a column already there is not added twice.
    1: ("partitions", "digest", "TEXT"),
    2: ("jobs", "deadline", "REAL"),
    3: ("jobs", "witness", "TEXT"),
}
APPLICATION_ID = 0x637A6B4A  # "czkJ": marks the file as a cuzk journal
TERMINAL = TERMINAL_STATES
ACCEPTED = "accepted"
RETRY_AFTER_S = 10.0  # what a 503 for an unwritable journal suggests to the client
ROW_DAMAGED = "the job's journaled row is damaged (a field has an impossible value)"
"""``JobRecord.broken`` when the row itself cannot be trusted (not only its inputs)."""
PROBE_BYTES = 65_536  # a readiness probe must need new space, as a job's record would
IDENTITY_CHECK_S = 1.0
"""How often an open journal checks that its file is still the one it holds (one ``stat``)."""

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
    deadline      REAL,
    witness       TEXT
);
CREATE INDEX IF NOT EXISTS jobs_by_request ON jobs (request_id, attempt);
CREATE INDEX IF NOT EXISTS jobs_by_finish ON jobs (finished_at);
CREATE TABLE IF NOT EXISTS partitions (
    job_id      TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    idx         INTEGER NOT NULL,
    proof       TEXT NOT NULL,
    public      TEXT NOT NULL,
    finished_at REAL NOT NULL,
    digest      TEXT,
    PRIMARY KEY (job_id, idx)
);
CREATE TABLE IF NOT EXISTS damaged_partitions (
    job_id   TEXT NOT NULL,
    idx      INTEGER NOT NULL,
    proof    TEXT,
    public   TEXT,
    digest   TEXT,
    reason   TEXT NOT NULL,
    found_at REAL NOT NULL
);
"""



def _migrations(db: sqlite3.Connection, version: int) -> str:
    """SQL bringing a journal of schema ``version`` to this one (run in the opening
    transaction)."""
    out = []
    for v in range(version, SCHEMA_VERSION):
        table, column, kind = MIGRATIONS[v]
        if column not in {r[1] for r in db.execute(f"PRAGMA table_info({table})")}:
            out.append(f"ALTER TABLE {table} ADD COLUMN {column} {kind};")
    return " ".join(out)


class JournalError(Unavailable):
    """The journal cannot be used; the message names the file, the cause and the remedy.
    While running this is a 503 for a submit: nothing is accepted that is not durable."""

    def __init__(self, message: str, retry_after: float | None = RETRY_AFTER_S) -> None:
        super().__init__(message, retry_after)


class JournalCorrupt(JournalError):
    """The file is not a usable cuzk journal. It is left exactly as it was found."""


class JournalLost(JournalError):
    """The journal this server wrote to is gone (deleted, emptied or replaced). Nothing more
    is accepted: a 202 would promise durability the file at journal.path no longer gives."""


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def proof_digest(job_id: str, index: int, proof: str, public: str) -> str:
    """The checksum of one journaled partition row (its stored JSON texts, as stored)."""
    h = hashlib.sha256()
    for part in (job_id, str(index), proof, public):
        h.update(part.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
    return h.hexdigest()


def inputs_digest(inputs: Sequence[Mapping[str, Any]]) -> str:
    """A digest of partition inputs, independent of key order (what "the same body" means)."""
    text = json.dumps(list(inputs), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


PartitionInput = Mapping[str, Any] | WitnessRef
"""What one partition is proven from: its input signals, or a witness submitted ready-made
(kept in the witness store; the journal's ``witness`` column records where)."""


@dataclass
class JobRecord:
    """One job as the journal holds it; ``proofs`` maps partition index -> (proof, public).
    ``inputs``: one mapping of input signals per partition, or one :class:`WitnessRef` per
    partition for a job submitted with witnesses."""

    id: str
    request_id: str | None
    proof_kind: str
    priority: str
    inputs: list[PartitionInput]
    inputs_digest: str
    traceparent: str | None  # the client's, when it sent one
    span_context: str | None  # the job span's own traceparent (recovered spans link to it)
    attempt: int
    seq: int
    submitted_at: float
    state: str = ACCEPTED
    error: str | None = None
    finished_at: float | None = None
    proofs: dict[int, tuple[dict[str, Any], list[str]]] = field(default_factory=dict)
    # partition index -> the row's checksum (None: written before checksums, version 1)
    digests: dict[int, str | None] = field(default_factory=dict)
    # partition index -> why its journaled proof is not usable (never in ``proofs``)
    damaged: dict[int, str] = field(default_factory=dict)
    broken: str | None = None  # why the job's own row is unreadable (inputs damaged)
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
        identity_check_s: float = IDENTITY_CHECK_S,
    ) -> None:
        self.path = Path(path)
        self.retention_jobs = retention_jobs
        self.retention_s = retention_s
        self.on_write = on_write
        self._clock = clock
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self.last_error: JournalError | None = None
        self.lost: JournalLost | None = None
        self.corrupt: JournalCorrupt | None = None  # damage found while running (sticky)
        self._reported: set[str] = set()  # jobs whose damaged rows were logged
        self.journal_id: str | None = None
        self._identity: tuple[int, int] | None = None
        self._identity_lock = threading.Lock()  # one finder of a loss: one log line
        self.identity_check_s = identity_check_s
        self._stop_watch = threading.Event()
        self._watcher: threading.Thread | None = None

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
        marker = self._read_marker()
        empty = not path.exists() or path.stat().st_size == 0
        if marker is not None and empty:
            state = "is missing" if not path.exists() else "is empty (0 bytes)"
            raise JournalLost(
                f"journal {path}: {state}, but {self.marker_path} records that journal "
                f"{marker} existed here: its jobs would be lost silently. Restore the journal "
                f"from a backup, or delete {self.marker_path} to start with an empty journal",
                retry_after=None)
        db: sqlite3.Connection | None = None
        try:
            db = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)
            # Damaged bytes in a text column must reach the row checks (as a checksum or
            # digest mismatch), not fail the read: decode them losslessly.
            db.text_factory = _decode
            db.execute("PRAGMA locking_mode=EXCLUSIVE")
            version = self._check(db)  # before anything writes: a file we refuse stays as is
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise JournalError(f"journal {path}: cannot use WAL mode (got {mode!r})")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("PRAGMA journal_size_limit=67108864")
            row = None
            if version is not None:
                row = db.execute("SELECT value FROM meta WHERE key='journal_id'").fetchone()
            journal_id = str(row[0]) if row is not None else uuid.uuid4().hex
            if not re.fullmatch(r"[0-9a-f]{32}", journal_id):
                raise JournalCorrupt(
                    f"journal {path}: the file is corrupt (its journal id reads "
                    f"{journal_id!r}); it was left untouched. Move it and {self.marker_path} "
                    "aside (or restore a backup) to start with an empty journal")
            if marker is not None and marker != journal_id:
                raise JournalLost(
                    f"journal {path}: is journal {journal_id}, but {self.marker_path} records "
                    f"journal {marker} here: the journal was replaced and the other one's jobs "
                    f"would be lost silently. Put journal {marker} back, or delete "
                    f"{self.marker_path} to adopt this one", retry_after=None)
            migrate = _migrations(db, version or SCHEMA_VERSION)
            # One write transaction: takes the exclusive lock and proves the file is writable.
            db.executescript(
                f"BEGIN IMMEDIATE; {migrate} {_SCHEMA} PRAGMA application_id={APPLICATION_ID};"
                f" INSERT OR REPLACE INTO meta (key, value) VALUES"
                f" ('schema_version', '{SCHEMA_VERSION}'), ('opened_at', '{self._clock()!r}'),"
                f" ('journal_id', '{journal_id}');"
                " COMMIT;")
            if version is not None and version < SCHEMA_VERSION:
                log.info("journal %s: upgraded from schema version %d to %d", path, version,
                         SCHEMA_VERSION)
            if marker is None:
                self._write_marker(journal_id)
            st = os.stat(path)
        except JournalError:
            if db is not None:
                db.close()
            raise
        except (sqlite3.Error, OSError) as e:
            if db is not None:
                db.close()
            raise _describe(path, e) from None
        self.journal_id = journal_id
        self._identity = (st.st_dev, st.st_ino)
        self._db = db
        self.prune()
        self._watcher = threading.Thread(
            target=_watch, args=(weakref.ref(self), self._stop_watch, self.identity_check_s),
            name="cuzk-journal-watch", daemon=True)
        self._watcher.start()

    @property
    def marker_path(self) -> Path:
        """The sidecar that records which journal lives at ``path`` (lost vs new)."""
        return self.path.with_name(self.path.name + ".id")

    def _read_marker(self) -> str | None:
        try:
            text = self.marker_path.read_text().strip()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise JournalError(
                f"journal {self.path}: cannot read its marker {self.marker_path}: "
                f"{e.strerror or e}; check journal.path") from None
        if not text:
            raise JournalError(
                f"journal {self.path}: its marker {self.marker_path} is empty; restore it, or "
                "delete it if the journal next to it is the one to use")
        return text

    def _write_marker(self, journal_id: str) -> None:
        """Atomically (temp file, fsync, rename, fsync of the directory)."""
        tmp = self.marker_path.with_name(self.marker_path.name + ".tmp")
        with open(tmp, "w") as f:
            f.write(journal_id + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.marker_path)
        fsync_directory(self.marker_path.parent)

    def _check(self, db: sqlite3.Connection) -> int | None:
        """Refuse a file that is damaged, not ours, or from a newer cuzk; its schema version
        (None for a new, empty file)."""
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
        if tables and app_id != APPLICATION_ID:
            raise JournalCorrupt(
                f"journal {self.path}: is an SQLite database but not a cuzk journal (tables: "
                f"{', '.join(sorted(tables))}); it was left untouched. Set journal.path to "
                "another file")
        # integrity_check, not quick_check: it also cross-checks every index against its
        # table, which catches damage inside rows that quick_check passes.
        problems = [r[0] for r in db.execute("PRAGMA integrity_check(20)")]
        if problems != ["ok"]:
            raise JournalCorrupt(
                f"journal {self.path}: the file is corrupt ({'; '.join(problems[:3])}); it was "
                "left untouched. Move it aside (or restore a backup) to start with an empty "
                "journal")
        if "meta" not in tables:
            return None
        row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        try:
            version = int(row[0]) if row is not None else SCHEMA_VERSION
        except ValueError:
            raise JournalCorrupt(
                f"journal {self.path}: the file is corrupt (its schema version reads "
                f"{row[0]!r}); it was left untouched. Move it aside (or restore a backup) to "
                "start with an empty journal") from None
        if version > SCHEMA_VERSION or version < min(MIGRATIONS, default=SCHEMA_VERSION):
            raise JournalError(
                f"journal {self.path}: schema version {version} is not one this cuzk reads "
                f"(up to {SCHEMA_VERSION}); use the cuzk that wrote it, or another "
                "journal.path")
        return version

    def fault(self) -> JournalError | None:
        """What makes this journal unusable until a restart (lost or corrupt), if anything;
        unlike ``last_error`` (a full disk, say) it does not clear by itself."""
        return self.check_identity() or self.corrupt

    def check_identity(self) -> JournalLost | None:
        """Whether the file at ``path`` is still the one this process holds (st_dev, st_ino);
        once it is not, the journal stays lost (the error) until the server restarts."""
        with self._identity_lock:
            return self._check_identity()

    def _check_identity(self) -> JournalLost | None:
        if self.lost is not None or self._identity is None:
            return self.lost
        try:
            st = os.stat(self.path)
            same = (st.st_dev, st.st_ino) == self._identity
            what = "was replaced by another file"
        except FileNotFoundError:
            same, what = False, "was deleted"
        except OSError as e:
            same, what = False, f"cannot be checked ({e.strerror or e})"
        if not same:
            self.lost = JournalLost(
                f"journal {self.path}: {what} while this server was writing to it; nothing "
                "more is accepted, since what it would journal is not where the next start "
                "reads. Restore the state directory, then restart the server", retry_after=None)
            log.error("%s", self.lost)
        return self.lost

    def close(self) -> None:
        self._stop_watch.set()
        watcher = self._watcher
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join()
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
            lost = self.check_identity()
            if lost is not None:
                self.last_error = lost
                raise lost
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
                if isinstance(err, JournalCorrupt):
                    self.corrupt = err
                raise err from e
            seconds = time.perf_counter() - t0
            self.last_error = None
        if self.on_write is not None:
            self.on_write(seconds)

    def record_accepted(self, rec: JobRecord) -> None:
        """The job exists once this returns: call before answering 202."""

        refs = [p for p in rec.inputs if isinstance(p, WitnessRef)]
        if refs and len(refs) != len(rec.inputs):
            raise ValueError("a job is proven from inputs or from witnesses, not both")
        inputs = [] if refs else [dict(p) for p in rec.inputs if not isinstance(p, WitnessRef)]
        witness = json.dumps([r.to_json() for r in refs], separators=(",", ":")) \
            if refs else None

        def write(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO jobs (id, request_id, proof_kind, priority, inputs, inputs_digest,"
                " traceparent, span_context, attempt, seq, submitted_at, state, deadline,"
                " witness) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (rec.id, rec.request_id, rec.proof_kind, rec.priority,
                 json.dumps(inputs, separators=(",", ":")), rec.inputs_digest,
                 rec.traceparent, rec.span_context, rec.attempt, rec.seq, rec.submitted_at,
                 ACCEPTED, rec.deadline, witness))

        self._write(write)

    def record_partition(
        self, job_id: str, index: int, proof: dict[str, Any], public: list[str]
    ) -> None:
        """A finalized partition's proof: it is never proven again after this returns (unless
        its row is later found damaged)."""
        proof_text = json.dumps(proof, separators=(",", ":"))
        public_text = json.dumps(public, separators=(",", ":"))

        def write(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT OR REPLACE INTO partitions (job_id, idx, proof, public, finished_at,"
                " digest) VALUES (?, ?, ?, ?, ?, ?)",
                (job_id, index, proof_text, public_text, self._clock(),
                 proof_digest(job_id, index, proof_text, public_text)))

        self._write(write)

    def quarantine(self, job_id: str, damaged: Mapping[int, str]) -> None:
        """Move damaged partition rows aside (``damaged_partitions``, kept for forensics) and,
        if the job had succeeded, make it unfinished again: its partitions are proven anew."""
        now = self._clock()

        def write(db: sqlite3.Connection) -> None:
            for idx, reason in sorted(damaged.items()):
                db.execute(
                    "INSERT INTO damaged_partitions (job_id, idx, proof, public, digest, reason,"
                    " found_at) SELECT job_id, idx, proof, public, digest, ?, ? FROM partitions"
                    " WHERE job_id = ? AND idx = ?", (reason, now, job_id, idx))
                db.execute("DELETE FROM partitions WHERE job_id = ? AND idx = ?", (job_id, idx))
            db.execute(
                "UPDATE jobs SET state = ?, error = NULL, finished_at = NULL"
                " WHERE id = ? AND state = 'succeeded'", (ACCEPTED, job_id))

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

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[JobRecord]:
        with self._lock:
            db = self._db
            if db is None:
                raise JournalError(f"journal {self.path}: closed")
            try:
                rows = db.execute(
                    "SELECT id, request_id, proof_kind, priority, inputs, inputs_digest,"
                    " traceparent, span_context, attempt, seq, submitted_at, state, error,"
                    " finished_at, deadline, witness"
                    f" FROM jobs {sql}", args).fetchall()
                out = [_job_record(r) for r in rows]
                for rec in out:
                    for idx, proof, public, digest in db.execute(
                            "SELECT idx, proof, public, digest FROM partitions WHERE job_id = ?",
                            (rec.id,)):
                        _add_partition(rec, idx, proof, public, digest)
            except sqlite3.Error as e:
                err = _describe(self.path, e)
                if isinstance(err, JournalCorrupt):  # damage found while running: not ready
                    self.corrupt = self.last_error = err
                raise err from e
        for rec in out:
            if (rec.damaged or rec.broken) and rec.id not in self._reported:
                self._reported.add(rec.id)  # once per job: clients may poll it every second
                log.error("journal %s: job %s has damaged rows: %s", self.path, rec.id,
                          rec.broken or "; ".join(f"partition {i}: {why}"
                                                  for i, why in sorted(rec.damaged.items())))
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


def _watch(ref: weakref.ref[Journal], stop: threading.Event, period: float) -> None:
    """The watcher thread: check the journal's identity every ``period`` until it is closed
    (or dropped), or found lost (it stays lost: nothing more to watch)."""
    while not stop.wait(period):
        journal = ref()
        if journal is None or journal.closed or journal.check_identity() is not None:
            return
        del journal  # hold no reference while waiting: an unclosed, dropped journal ends it


def _job_record(r: Sequence[Any]) -> JobRecord:
    """A jobs row as a record; inputs that do not parse or do not match their digest make the
    record ``broken`` (its inputs empty) instead of raising."""
    deadline = r[14] if isinstance(r[14], int | float) else None  # damaged: no deadline
    rec = JobRecord(r[0], r[1], r[2], r[3], [], r[5], r[6], r[7], r[8], r[9], r[10], r[11],
                    r[12], r[13], deadline=deadline)
    shapes = ((rec.id, str), (rec.proof_kind, str), (rec.priority, str), (rec.attempt, int),
              (rec.seq, int), (rec.submitted_at, (int, float)))
    if (rec.state not in TERMINAL and rec.state != ACCEPTED) or not all(
            isinstance(v, t) for v, t in shapes):
        rec.broken = ROW_DAMAGED
        # Safe stand-ins so the job can still be shown (as failed, saying why).
        rec.id, rec.proof_kind, rec.priority = str(rec.id), str(rec.proof_kind), str(rec.priority)
        for name, default in (("attempt", 1), ("seq", 0)):
            if not isinstance(getattr(rec, name), int):
                setattr(rec, name, default)
        if not isinstance(rec.submitted_at, int | float):
            rec.submitted_at = 0.0
        if rec.state not in TERMINAL:
            rec.state = ACCEPTED  # unfinished as far as anyone can tell: recovery fails it
        return rec
    if r[15] is not None:  # proven from witnesses submitted ready-made
        try:
            refs = [WitnessRef.from_json(d) for d in json.loads(r[15])]
            if witness_digest(refs) != rec.inputs_digest:
                raise ValueError("the witness references do not match their digest")
            rec.inputs = list(refs)
        except (ValueError, TypeError, KeyError) as e:
            rec.broken = f"the job's journaled witness references are damaged ({e})"
        return rec
    try:
        inputs = json.loads(r[4])
        if not isinstance(inputs, list) or inputs_digest(inputs) != rec.inputs_digest:
            raise ValueError("the inputs do not match their digest")
        rec.inputs = inputs
    except (ValueError, TypeError) as e:
        rec.broken = f"the job's journaled inputs are damaged ({e})"
    return rec


def _add_partition(rec: JobRecord, idx: int, proof: Any, public: Any, digest: Any) -> None:
    """Add a partition row to ``rec.proofs`` if it is intact, else to ``rec.damaged``."""
    if not isinstance(proof, str) or not isinstance(public, str):
        rec.damaged[idx] = "the row's proof or public signals are not text"
        return
    if digest is not None and digest != proof_digest(rec.id, idx, proof, public):
        rec.damaged[idx] = "checksum mismatch"
        return
    try:
        p, pub = json.loads(proof), json.loads(public)
    except ValueError:
        rec.damaged[idx] = "the row's JSON does not parse"
        return
    if not isinstance(p, dict) or not isinstance(pub, list):
        rec.damaged[idx] = "the row's proof or public signals have the wrong shape"
        return
    rec.proofs[idx] = (p, pub)
    rec.digests[idx] = digest


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
