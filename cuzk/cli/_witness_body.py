"""``cuzk submit --wtns``: the partitions' .wtns files as one request body, read from disk as it
is sent (a witness is 32 MB a partition at 2^20 variables: never all in memory), and sent
again whole if a submit is retried."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from cuzk.cli._http import CliError

CHUNK_BYTES = 1 << 20
MAGIC = b"wtns"


class WitnessBody:
    """The files back to back, in partition order; iterable any number of times (httpx reads
    it once per attempt), its size known up front (sent as Content-Length, so a server
    refuses an oversize body before a byte of it is sent)."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = list(paths)
        self.size = 0
        for path in self.paths:
            try:
                with open(path, "rb") as f:
                    magic = f.read(4)
                size = path.stat().st_size
            except FileNotFoundError:
                raise CliError(f"--wtns {path}: no such file") from None
            except IsADirectoryError:
                raise CliError(f"--wtns {path}: is a directory, not a .wtns file") from None
            except OSError as e:
                raise CliError(f"--wtns {path}: cannot read it ({e.strerror or e})") from None
            if magic != MAGIC:
                raise CliError(
                    f"--wtns {path}: not a .wtns witness file (it starts {magic!r}, not"
                    f" {MAGIC!r}); write one with your circuit's witness generator or"
                    " `snarkjs wtns calculate`")
            self.size += size

    def __iter__(self) -> Iterator[bytes]:
        for path in self.paths:
            with open(path, "rb") as f:
                while chunk := f.read(CHUNK_BYTES):
                    yield chunk


def check_count(body: WitnessBody, kind: str, partitions: int) -> None:
    """One file per partition, or a message that says how many the kind takes."""
    given = len(body.paths)
    if given != partitions:
        raise CliError(
            f"proof kind {kind!r} takes {partitions} partition"
            f"{'s' if partitions != 1 else ''}: give one .wtns per partition, in partition"
            f" order (--wtns P0.wtns P1.wtns ...), got {given}")
