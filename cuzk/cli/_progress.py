"""Rich progress for long local work (key generation, benchmarks) on stderr."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

if TYPE_CHECKING:
    from cuzk.prover.keygen import Progress as ProgressFn


console = Console(stderr=True)


@contextmanager
def stage_progress(title: str) -> Iterator[ProgressFn]:
    """A callback ``(stage, done, total)`` that draws one bar per stage."""
    with Progress(
        TextColumn(f"{title} [bold]{{task.description}}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as bar:
        tasks: dict[str, TaskID] = {}

        def tick(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield tick
