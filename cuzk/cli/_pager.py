"""Paging for the live ``cuzk status`` view, as ``htop`` does: a frame taller than the terminal
scrolls instead of being cut at the last line, and the footer says what is above and below.

:class:`Pager` is the state (where the window starts) and turns key presses into moves;
:func:`read_keys` turns the bytes a terminal sends into key names. The terminal loop lives in
``cuzk.cli.status``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.segment import Segment
from rich.text import Text

# Key name -> what it does. Arrows, PgUp/PgDn, Home/End and the vi/less letters.
ACTIONS = {
    "down": "down", "j": "down", "up": "up", "k": "up",
    "pgdn": "page_down", " ": "page_down", "f": "page_down",
    "pgup": "page_up", "b": "page_up",
    "home": "top", "g": "top", "end": "bottom", "G": "bottom",
    "q": "quit", "Q": "quit",
}
_ESCAPES = {
    "\x1b[A": "up", "\x1bOA": "up", "\x1b[B": "down", "\x1bOB": "down",
    "\x1b[5~": "pgup", "\x1b[6~": "pgdn",
    "\x1b[H": "home", "\x1bOH": "home", "\x1b[1~": "home", "\x1b[7~": "home",
    "\x1b[F": "end", "\x1bOF": "end", "\x1b[4~": "end", "\x1b[8~": "end",
}
HELP = "↑↓ j k scroll · PgUp PgDn space page · g G top/end · q quit"


def read_keys(data: str) -> list[str]:
    """Key names in what a terminal sent: escape sequences for arrows and paging keys, else
    single characters (unknown sequences are dropped whole, never read as letters)."""
    keys: list[str] = []
    i = 0
    while i < len(data):
        if data[i] != "\x1b":
            keys.append(data[i])
            i += 1
            continue
        end = i + 1
        if end < len(data) and data[end] in "[O":
            end += 1
            while end < len(data) and not (data[end].isalpha() or data[end] == "~"):
                end += 1
            end += 1
        seq = data[i:end]
        keys.append(_ESCAPES.get(seq, "escape"))
        i = end
    return keys


class _Lines:
    """Already rendered lines, drawn as they are."""

    def __init__(self, lines: Iterable[list[Segment]]) -> None:
        self.lines = list(lines)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.lines:
            yield from line
            yield Segment.line()


@dataclass
class Pager:
    """Which line of the frame is at the top of the terminal."""

    offset: int = 0
    _total: int = 0
    _body: int = 1

    def press(self, key: str) -> bool:
        """Move for one key; False when the key means quit."""
        action = ACTIONS.get(key)
        page = max(1, self._body - 1)
        if action == "quit":
            return False
        if action == "down":
            self.offset += 1
        elif action == "up":
            self.offset -= 1
        elif action == "page_down":
            self.offset += page
        elif action == "page_up":
            self.offset -= page
        elif action == "top":
            self.offset = 0
        elif action == "bottom":
            self.offset = self._total
        self._clamp()
        return True

    def _clamp(self) -> None:
        self.offset = max(0, min(self.offset, self._total - self._body))

    def window(self, frame: RenderableType, console: Console, width: int, height: int,
               ) -> RenderableType:
        """The part of ``frame`` that fits ``height`` lines, the last one a footer saying what
        is above and below and which keys move."""
        lines = console.render_lines(frame, console.options.update(width=width), pad=False)
        self._total, self._body = len(lines), max(1, height - 1)
        self._clamp()
        shown = lines[self.offset:self.offset + self._body]
        return _Lines([*shown, *console.render_lines(
            self.footer(width), console.options.update(width=width), pad=False)[:1]])

    def footer(self, width: int) -> Text:
        above, below = self.offset, max(0, self._total - self.offset - self._body)
        if not above and not below:
            return Text("all shown · q quit", style="dim")
        first, last = self.offset + 1, min(self._total, self.offset + self._body)
        parts: list[Text] = []
        if below:
            parts.append(Text(f"▼ {below} more below", style="bold reverse"))
        if above:
            parts.append(Text(f"▲ {above} above", style="bold"))
        parts.append(Text(f"lines {first}-{last} of {self._total}", style="dim"))
        out = Text("  ").join(parts)
        for extra in (HELP, "↑↓ PgUp PgDn g G q"):
            if out.cell_len + 2 + len(extra) <= width:
                out.append("  " + extra, style="dim")
                break
        return out

