"""Comments that cite "docs/design.md section N" point at a section that exists and says so."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITATION = re.compile(r"design\.md,? section (\d+)")


def test_every_design_citation_names_an_existing_section():
    design = (ROOT / "docs" / "design.md").read_text()
    sections = set(re.findall(r"^## (\d+)\. ", design, re.MULTILINE))
    assert sections == {str(n) for n in range(1, 8)}
    cited: list[tuple[str, str]] = []
    for base in ("cuzk", "kernels", "tests", "docs", "deploy", "benchmarks"):
        for path in (ROOT / base).rglob("*"):
            if path.suffix not in (".py", ".md", ".yml", ".toml") or not path.is_file():
                continue
            for n in CITATION.findall(path.read_text(errors="replace")):
                cited.append((str(path.relative_to(ROOT)), n))
    assert cited, "no citations found: the pattern is wrong"
    assert [c for c in cited if c[1] not in sections] == []
