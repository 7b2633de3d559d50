"""The code blocks of README.md and docs/*.md, as a reader sees them (CommonMark: fenced and
indented blocks), and the shell commands in them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
DATA_LANGS = frozenset({"json", "toml", "python", "circom", "text"})
"""Blocks tagged with one of these are files, diagrams or messages, never typed at a shell;
every other block (``sh``, ``console``, untagged, indented) is commands."""


@dataclass(frozen=True)
class Block:
    file: str  # relative to the repository, e.g. "README.md"
    line: int  # 1-based, where the block starts
    lang: str  # the fence's first info word; "" for an untagged or indented block
    body: str

    @property
    def commands(self) -> list[str]:
        """One entry per command: backslash continuations joined, blank and comment-only lines
        dropped; in a ``console`` block only the ``$ `` lines, without the prompt."""
        lines = self.body.splitlines()
        if self.lang == "console":
            lines = [ln[2:] for ln in lines if ln.startswith("$ ")]
        out: list[str] = []
        pending = ""
        for ln in lines:
            if not pending and (not ln.strip() or ln.lstrip().startswith("#")):
                continue
            if ln.rstrip().endswith("\\"):
                pending += ln.rstrip()[:-1] + " "
                continue
            out.append((pending + ln).strip())
            pending = ""
        return out

    @property
    def key(self) -> tuple[str, str]:
        """What names the block in the tests' lists: its file and first command."""
        first = self.commands[0] if self.commands else ""
        return self.file, " ".join(strip_comment(first).split())


def strip_comment(command: str) -> str:
    """A command without its trailing ``  # ...`` remark (README aligns remarks after two or
    more spaces; a ``#`` inside a word or a quoted string is kept)."""
    at = command.find("  #")
    return command[:at].rstrip() if at >= 0 else command.rstrip()


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    rel = str(path.relative_to(ROOT))
    out = []
    for tok in MarkdownIt("commonmark").parse(path.read_text()):
        if tok.type in ("fence", "code_block") and tok.map is not None:
            lang = tok.info.split()[0] if tok.info.strip() else ""
            out.append(Block(rel, tok.map[0] + 1, lang, tok.content))
    return out


def command_blocks() -> list[Block]:
    return [b for f in doc_files() for b in blocks(f) if b.lang not in DATA_LANGS]
