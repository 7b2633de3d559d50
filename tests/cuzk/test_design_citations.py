"""Comments that cite "docs/design.md section N" or "docs/cluster-design.md section N" point at a
section that exists; nothing cites a file outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITATION = re.compile(r"(?<![-\w])design\.md,? section (\d+)")
CLUSTER_CITATION = re.compile(r"cluster-design\.md,? section (\d+)")
SOURCES = ("cuzk", "kernels", "tests", "docs", "deploy", "benchmarks")


def _texts() -> list[tuple[str, str]]:
    out = []
    for base in SOURCES:
        for path in (ROOT / base).rglob("*"):
            if path.suffix in (".py", ".md", ".yml", ".toml") and path.is_file():
                out.append((str(path.relative_to(ROOT)), path.read_text(errors="replace")))
    return out


def test_every_design_citation_names_an_existing_section():
    design = (ROOT / "docs" / "design.md").read_text()
    sections = set(re.findall(r"^## (\d+)\. ", design, re.MULTILINE))
    assert sections == {str(n) for n in range(1, 8)}
    cited = [(name, n) for name, text in _texts() for n in CITATION.findall(text)]
    assert cited, "no citations found: the pattern is wrong"
    assert [c for c in cited if c[1] not in sections] == []


def test_every_cluster_design_citation_names_an_existing_section():
    design = (ROOT / "docs" / "cluster-design.md").read_text()
    sections = set(re.findall(r"^## (\d+)\. ", design, re.MULTILINE))
    assert sections == {str(n) for n in range(1, 6)}
    cited = [(name, n) for name, text in _texts() for n in CLUSTER_CITATION.findall(text)]
    assert cited, "no citations found: the pattern is wrong"
    assert [c for c in cited if c[1] not in sections] == []


def test_docs_and_code_cite_nothing_outside_the_repository():
    """A design cited by an absolute path outside the checkout (or by a section sign a reader
    cannot follow) is a dead link for everyone else."""
    outside = re.compile(r"/work/shared|\.\./shared/|cluster-design\.md §")
    here = Path(__file__).name
    found = [name for name, text in _texts() if outside.search(text) and not name.endswith(here)]
    assert found == []
