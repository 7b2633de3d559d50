"""Tables declared as data, laid out to a terminal width without cutting a name.

A table is a list of :class:`Column` (header, how to get the cell from a row, how hard the
column holds on at narrow widths) and a list of rows. :func:`fit` lays them out as lines no
wider than the width:

1. every column inline, one line per row, when that fits;
2. otherwise columns leave in ``keep`` order (lowest first; ``ALWAYS`` never leaves): a
   *name* column (ids, proof kinds) does not vanish but moves to a detail line under its row,
   ``header value``; any other column is dropped;
3. when even the ``ALWAYS`` columns do not fit inline, each row is stacked as
   ``header value`` pieces packed into lines.

A name is never shortened: a piece wider than the line is broken into chunks, each but the
last ending in :data:`WRAP_MARK`, so a cut is always visible.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from rich.text import Text

R = TypeVar("R")
Cell = str | Text

ALWAYS = 1_000_000  # ``Column.keep`` for a column that stays at every width
WRAP_MARK = "↩"  # ends a line whose text continues on the next one
GAP = 2  # spaces between columns
INDENT = "  "  # detail and continuation lines


@dataclass(frozen=True)
class Column(Generic[R]):
    """One column: ``cell`` makes its value from a row.

    ``keep`` ranks the columns for narrow terminals: the lowest leaves first, ``ALWAYS`` never.
    ``name`` marks ids and proof kinds, which move to a detail line instead of being dropped.
    """

    header: str
    cell: Callable[[R], Cell]
    keep: int = ALWAYS
    right: bool = False
    name: bool = False


def _text(cell: Cell) -> Text:
    return Text(cell) if isinstance(cell, str) else cell.copy()


def fit(
    title: str,
    columns: Sequence[Column[R]],
    rows: Sequence[R],
    width: int,
    caption: str | None = None,
    details_above: bool = False,
) -> list[Text]:
    """The table as lines of at most ``width`` cells (see the module docstring).

    Detail lines (names that left the inline row) go under their row, or above it with
    ``details_above`` where the name is what the row is about (a proof kind's counts)."""
    width = max(width, 8)
    cells = [{c.header: _text(c.cell(r)) for c in columns} for r in rows]
    inline = list(columns)
    detail: list[Column[R]] = []
    while True:
        if _inline_width(inline, cells) <= width:
            lines = _inline(inline, detail, cells, width, details_above)
            break
        leaving = [c for c in inline if c.keep < ALWAYS]
        if not leaving:
            lines = _stacked(list(columns), cells, width)
            break
        gone = min(leaving, key=lambda c: c.keep)
        inline.remove(gone)
        if gone.name:
            detail = [c for c in columns if c in detail or c is gone]  # in column order
    out = [Text(title, style="bold italic")]
    out += lines
    if not rows:
        out.append(Text("(none)", style="dim"))
    if caption:
        out += wrap(Text(caption, style="dim"), width)
    return out


def _col_width(col: Column[R], cells: Sequence[dict[str, Text]]) -> int:
    return max([len(col.header), *(row[col.header].cell_len for row in cells)])


def _inline_width(cols: Sequence[Column[R]], cells: Sequence[dict[str, Text]]) -> int:
    if not cols:
        return 0
    return sum(_col_width(c, cells) for c in cols) + GAP * (len(cols) - 1)


def _row_line(cols: Sequence[Column[R]], values: Sequence[Text], widths: Sequence[int]) -> Text:
    line = Text()
    for i, (col, value, w) in enumerate(zip(cols, values, widths, strict=True)):
        if i:
            line.append(" " * GAP)
        pad = " " * (w - value.cell_len)
        if col.right:
            line.append(pad)
            line.append_text(value)
        else:
            line.append_text(value)
            if i < len(cols) - 1:
                line.append(pad)
    line.rstrip()
    return line


def _inline(
    cols: Sequence[Column[R]], detail: Sequence[Column[R]], cells: Sequence[dict[str, Text]],
    width: int, details_above: bool,
) -> list[Text]:
    widths = [_col_width(c, cells) for c in cols]
    head = _row_line(cols, [Text(c.header, style="bold") for c in cols], widths)
    lines = [head, Text("─" * min(width, max(1, _inline_width(cols, cells))), style="dim")]
    for row in cells:
        extra = pack([_piece(c, row) for c in detail if _shown(row[c.header])], width,
                     "" if details_above else INDENT)
        if details_above:
            lines += extra
        if cols:
            lines.append(_row_line(cols, [row[c.header] for c in cols], widths))
        if not details_above:
            lines += extra
    return lines


def _shown(value: Text) -> bool:
    """An empty name ("-": an idle worker has no job) needs no detail line."""
    return value.plain not in ("", "-")


def _piece(col: Column[R], row: dict[str, Text]) -> tuple[str, Text]:
    return col.header, row[col.header]


def _stacked(
    cols: Sequence[Column[R]], cells: Sequence[dict[str, Text]], width: int
) -> list[Text]:
    """Each row as ``header value`` pieces packed into lines, the row's first line unindented;
    a blank cell (the row continues the one above: a node's second worker) is left out."""
    lines: list[Text] = []
    for row in cells:
        packed = pack([_piece(c, row) for c in cols if row[c.header].plain], width, INDENT)
        if packed and packed[0].plain.startswith(INDENT) and row[cols[0].header].plain:
            packed[0] = packed[0][len(INDENT):]
        lines += packed
    return lines


def pack(pieces: Sequence[tuple[str, Text]], width: int, indent: str = "") -> list[Text]:
    """``label value`` pieces joined by gaps into lines of at most ``width`` cells, each line
    starting with ``indent``. A piece too wide for a line puts its label on a line of its own
    and its value on the next; a value too wide even for that breaks with :data:`WRAP_MARK`."""
    room = width - len(indent)
    lines: list[Text] = []
    line = Text(indent)

    def flush() -> None:
        nonlocal line
        if line.plain.strip():
            lines.append(line)
        line = Text(indent)

    for label, value in pieces:
        piece = Text(f"{label} ", style="dim") + value
        gap = GAP if line.plain.strip() else 0
        if line.cell_len + gap + piece.cell_len <= width:
            line.append(" " * gap)
            line.append_text(piece)
            continue
        flush()
        if piece.cell_len <= room:
            line.append_text(piece)
            continue
        line.append(label, style="dim")
        flush()
        if value.cell_len > room:
            line = Text()  # a name that fits the width is never cut for an indent
        for chunk in wrap(value, width if value.cell_len <= width else room):
            line.append_text(chunk)
            flush()
    flush()
    return lines


def wrap(text: Text, width: int) -> list[Text]:
    """``text`` in lines of at most ``width`` cells; every line but the last ends in
    :data:`WRAP_MARK` (the text is never shortened)."""
    width = max(2, width)
    if text.cell_len <= width:
        return [text]
    step = width - 1
    offsets = list(range(step, len(text.plain), step))
    parts = list(text.divide(offsets))
    for part in parts[:-1]:
        part.append(WRAP_MARK, style="bold")
    return parts
