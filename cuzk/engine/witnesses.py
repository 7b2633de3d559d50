"""Witnesses submitted ready-made (one .wtns per partition), kept on disk until their job ends.

A witness is ``n_vars`` x 32 bytes (32 MB a partition at 2^20 variables), so it never lives in
memory while its job waits: the body goes to a staging file as it arrives, is checked there
(through an mmap, a bounded slice at a time), and on acceptance is made durable under the
job's id (fsync of the file, rename, fsync of the directory) before the job is journaled and
answered 202, as the journal does for inputs. A partition then reads its slice back when a
synthesis thread takes it, checks its SHA-256 (the journal's row checksums do the same for
proofs) and goes straight to a/b/c: no witness generator runs.

The store is the directory beside the journal (``<journal.path>.witness``), or a private
temporary one when there is no journal. A job's file is removed once the job has settled;
at start every file no unfinished journaled job names is removed (uploads cut short, jobs
settled just before a crash).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
import tempfile
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuzk.errors import FormatError, InputError, WitnessError
from cuzk.files import replace_durably

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

SUFFIX = ".wtns"
STAGING_PREFIX = "upload-"
HASH_CHUNK = 8 << 20


@dataclass(frozen=True)
class WitnessShape:
    """What a witness of a proof kind must be, from its circuit: the scalar field's curve and
    prime, the element size, the number of variables (wire 0, the public signals, the rest)
    and of public signals."""

    curve: str
    prime: int
    n8: int
    n_vars: int
    n_public: int


@dataclass(frozen=True)
class WitnessRef:
    """One partition's witness: ``size`` bytes at ``offset`` of ``path`` (a whole .wtns file),
    whose SHA-256 is ``sha256``."""

    path: Path
    offset: int
    size: int
    sha256: str

    def read(self) -> np.ndarray:
        """The .wtns bytes (uint8), checked against their SHA-256: a file damaged or removed
        on disk fails the partition, saying so, rather than proving other bytes."""
        import numpy as np

        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = np.fromfile(f, dtype=np.uint8, count=self.size)
        except OSError as e:
            raise WitnessError(
                f"the submitted witness is gone from {self.path} ({e.strerror or e})") from None
        if data.shape[0] != self.size or hashlib.sha256(data.data).hexdigest() != self.sha256:
            raise WitnessError(
                f"the submitted witness in {self.path} is damaged on disk (its SHA-256 no "
                "longer matches what was accepted); submit the job again")
        return data

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "offset": self.offset, "bytes": self.size,
                "sha256": self.sha256}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> WitnessRef:
        """The journal's record of one (ValueError for a row that is not one)."""
        path, offset, size, digest = d["path"], d["offset"], d["bytes"], d["sha256"]
        if not (isinstance(path, str) and isinstance(offset, int) and isinstance(size, int)
                and isinstance(digest, str)):
            raise ValueError("a witness reference has the wrong shape")
        return cls(Path(path), offset, size, digest)


def witness_digest(refs: Sequence[WitnessRef]) -> str:
    """What "the same body" means for a witness job (idempotency): the partitions' bytes."""
    h = hashlib.sha256(b"wtns")
    for ref in refs:
        h.update(bytes.fromhex(ref.sha256))
    return h.hexdigest()


def check_witnesses(
    path: Path, shape: WitnessShape, partitions: int, proof_kind: str
) -> list[WitnessRef]:
    """The partitions' witnesses in a staged body (``path``: .wtns files back to back),
    each checked against the kind's circuit: the field, the variable count, wire 0 = 1, every
    value below the prime. An InputError (400) names the partition and what is wrong."""
    import numpy as np

    from cuzk.formats.wtns import parse_wtns, split_wtns

    size = path.stat().st_size
    if size == 0:
        raise InputError(
            f"request body is empty; expected {partitions} .wtns file"
            f"{'s' if partitions != 1 else ''} back to back, one per partition")
    data: np.ndarray = np.memmap(path, dtype=np.uint8, mode="r")
    try:
        try:
            spans = split_wtns(data, "request body")
        except FormatError as e:
            raise InputError(str(e)) from None
        if len(spans) != partitions:
            raise InputError(
                f"proof kind {proof_kind!r} takes {partitions} witness"
                f"{'es' if partitions != 1 else ''} (one .wtns per partition, back to back), "
                f"the body holds {len(spans)}")
        refs = []
        for i, (offset, length) in enumerate(spans):
            where = f"witness {i} (partition {i})"
            try:
                witness = parse_wtns(data[offset : offset + length], where)
            except FormatError as e:
                problem = e.problem
                if "bn128" in problem:
                    problem = f"is a bn128 witness: {problem}"
                raise InputError(f"{where}: {problem}") from None
            if witness.curve.r != shape.prime:
                raise InputError(
                    f"{where}: is a {witness.curve.name} witness, proof kind {proof_kind!r} "
                    f"proves on {shape.curve}")
            if len(witness) != shape.n_vars:
                raise InputError(
                    f"{where}: has {len(witness)} variables, proof kind {proof_kind!r}'s "
                    f"circuit has {shape.n_vars} (a witness of another circuit?)")
            if int.from_bytes(witness.values[0].tobytes(), "little") != 1:
                raise InputError(f"{where}: wire 0 is not 1 (every circom witness starts with 1)")
            refs.append(WitnessRef(path, offset, length, _sha256(data[offset : offset + length])))
        return refs
    finally:
        mm = getattr(data, "_mmap", None)
        del data
        if mm is not None:
            with contextlib.suppress(BufferError):  # views still held elsewhere: GC closes it
                mm.close()


def _sha256(data: np.ndarray) -> str:
    import numpy as np

    h = hashlib.sha256()
    for first in range(0, data.shape[0], HASH_CHUNK):
        h.update(np.ascontiguousarray(data[first : first + HASH_CHUNK]).data)
    return h.hexdigest()


class WitnessStore:
    """The directory witness bodies live in: staged while a request arrives, kept under their
    job's id once accepted, removed when the job settles."""

    def __init__(self, directory: Path | None) -> None:
        self._temporary = directory is None
        # Made on first use (most servers never see a witness), private to this process.
        self.directory = Path(tempfile.gettempdir()) / f"cuzk-witness-{uuid.uuid4().hex}" \
            if directory is None else Path(directory)

    def _ensure(self) -> None:
        try:
            if self._temporary:
                self.directory.mkdir(mode=0o700, exist_ok=True)
            else:
                self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            from cuzk.errors import Unavailable

            raise Unavailable(
                f"cannot create the witness directory {self.directory} "
                f"({e.strerror or e}); make it writable (it sits beside journal.path)",
                retry_after=None) from None

    @contextlib.contextmanager
    def staging(self) -> Iterator[Path]:
        """A fresh staging file's path, removed on the way out unless it was admitted."""
        self._ensure()
        path = self.directory / f"{STAGING_PREFIX}{uuid.uuid4().hex}{SUFFIX}"
        try:
            yield path
        finally:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def path_of(self, job_id: str) -> Path:
        return self.directory / f"{job_id}{SUFFIX}"

    def admit(self, staged: Path, job_id: str, refs: Sequence[WitnessRef]) -> list[WitnessRef]:
        """Make a checked body the job's, durably (file fsynced, renamed, directory fsynced):
        called before the job is journaled, so a journaled job's witness is on disk."""
        target = self.path_of(job_id)
        replace_durably(staged, target)
        return [WitnessRef(target, r.offset, r.size, r.sha256) for r in refs]

    def remove(self, job_id: str) -> None:
        """The job settled: its witness goes (a no-op for a job that had none)."""
        with contextlib.suppress(FileNotFoundError):
            self.path_of(job_id).unlink()

    def sweep(self, keep: Collection[str]) -> int:
        """Remove every file but the witnesses of the jobs in ``keep`` (unfinished ones);
        returns how many went."""
        if not self.directory.is_dir():
            return 0
        removed = 0
        for entry in self.directory.iterdir():
            if entry.suffix == SUFFIX and entry.stem in keep:
                continue
            with contextlib.suppress(OSError):
                entry.unlink()
                removed += 1
        return removed

    def close(self) -> None:
        if self._temporary:
            shutil.rmtree(self.directory, ignore_errors=True)
