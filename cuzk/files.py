"""Files: why a path given as an input file is not one, said precisely (a directory is not
"missing"), and a file put in place durably (what survives a power cut is all or nothing)."""

from __future__ import annotations

import os
from pathlib import Path


def not_a_file(path: Path | str) -> str | None:
    """None when ``path`` is a regular file; else what it is instead, for an error message."""
    p = Path(path)
    if p.is_file():
        return None
    if p.is_dir():
        return "is a directory, not a file"
    if p.exists():
        return "is not a regular file"
    return "no such file"


def fsync_directory(directory: Path) -> None:
    """Make a rename or creation in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(source: Path, target: Path) -> None:
    """Put ``source`` in ``target``'s place so that after a crash one finds the old file or the
    whole new one: ``source``'s bytes synced, the rename, then the directory synced."""
    fd = os.open(source, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(source, target)
    fsync_directory(target.parent)
