"""Why a path given as an input file is not one, said precisely (a directory is not "missing")."""

from __future__ import annotations

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
