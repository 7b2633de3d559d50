"""Client-chosen text made safe to log: one line, nothing a terminal or a log parser acts on.

A request path is percent-decoded before the app sees it, so ``%0a`` becomes a newline and a
client could write a line of its own into the server's log (issue 19). Every client-chosen
string that reaches a log line goes through ``loggable``.
"""

from __future__ import annotations

MAX_LOGGED_CHARS = 200


def _escape(ch: str) -> str:
    if ch.isprintable() and ch != "\\":
        return ch
    return ch.encode("unicode_escape").decode("ascii")


def loggable(text: str, limit: int = MAX_LOGGED_CHARS) -> str:
    """``text`` with backslashes and every non-printable character (newlines, other controls,
    lone surrogates, bidi overrides) escaped, cut to ``limit`` characters."""
    escaped = "".join(_escape(ch) for ch in text[: limit + 1])
    return escaped if len(escaped) <= limit and len(text) <= limit else escaped[:limit] + "..."
