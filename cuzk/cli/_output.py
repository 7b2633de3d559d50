"""What the subcommands share about output: files are checked writable before long work, errors
print on one line whatever the terminal (or pipe) width, counts are pluralised."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuzk.errors import CuzkError
from cuzk.protocol import ACTIVE_PHASES

if TYPE_CHECKING:  # rich is imported when an error is printed, not at every start
    from rich.console import Console


class OutputError(CuzkError):
    """An output path that cannot be written; raised before any long work starts."""


def error_console() -> Console:
    """stderr, never wrapped: rich wraps at 80 columns when piped, splitting one-line errors."""
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(".")


def _dir_problem(path: Path) -> str | None:
    """Why ``path`` cannot be (or be created as) a writable directory; None when it can."""
    if path.exists() and not path.is_dir():
        return f"{path} exists and is not a directory"
    base = _nearest_existing(path)
    if not base.is_dir():
        return f"{base} is not a directory"
    try:  # the only sure test: write there (permissions, read-only mounts, ACLs)
        with tempfile.TemporaryFile(dir=base):
            pass
    except OSError as e:
        return f"{base} is not writable ({e.strerror or e})"
    return None


def check_output_dir(path: Path, what: str) -> None:
    """Raise OutputError unless ``path`` is (or can be created as) a writable directory."""
    problem = _dir_problem(path)
    if problem:
        raise OutputError(f"{what} {path}: {problem}")


def check_output_file(path: Path, what: str) -> None:
    """Raise OutputError unless ``path`` can be written (replaced, or created in its directory)."""
    if path.is_dir():
        raise OutputError(f"{what} {path}: is a directory")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise OutputError(f"{what} {path}: not writable")
        return
    problem = _dir_problem(path.parent)
    if problem:
        raise OutputError(f"{what} {path}: {problem}")


def write_text(path: Path, text: str, what: str) -> None:
    """Write a file, an OSError (the disk filled, a permission changed) told as one line."""
    try:
        path.write_text(text)
    except OSError as e:
        raise OutputError(f"{what} {path}: {e.strerror or e}") from None


def now_running(job: Mapping[str, Any]) -> str:
    """What a job runs now: its first partition in flight, the phase and the prover's step
    ("p2 proving: MSM B1 done, 2/5 (+3 in flight)"); "" when none is in flight."""
    parts = job.get("partitions")
    busy = [p for p in parts if isinstance(p, Mapping) and p.get("phase") in ACTIVE_PHASES
            and p.get("phase") != "queued_synthesis"] if isinstance(parts, list) else []
    if not busy:
        return ""
    first = busy[0]
    text = f"p{first.get('index')} {first.get('phase')}"
    if first.get("step"):
        text += f": {first['step']}"
    return text + (f" (+{len(busy) - 1} in flight)" if len(busy) > 1 else "")
