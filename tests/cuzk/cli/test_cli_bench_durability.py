"""`cuzk bench durability` end to end at its smallest: it kills, restarts, counts and prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cuzk.cli._durability import KEYS_DIR

pytestmark = pytest.mark.slow


def test_bench_durability_prints_its_figures(tmp_path: Path, bundled: Any) -> None:
    for kind in ("winning-post", "window-post"):
        bundled(kind)
    out = tmp_path / "figures.json"
    # Run beside a checkout (issue 28): a cuzk/ in the working directory that cannot import.
    # `cuzk` (the console script) never puts it on sys.path, nor may the servers it starts.
    (tmp_path / "cuzk").mkdir()
    (tmp_path / "cuzk" / "__init__.py").write_text("raise ImportError('the checkout')\n")
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "cuzk.cli.main", "bench", "durability", "--cycles", "1",
         "--jobs", "2", "--cost-jobs", "2", "--cost-repeats", "1", "--keys-dir", str(KEYS_DIR),
         "--json", str(out)], capture_output=True, text=True, timeout=900, cwd=tmp_path)
    printed = proc.stdout
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, printed + proc.stderr[-2000:]
    assert printed.startswith("kill -9 cycles: 1 against 2 jobs")
    assert "journal cost: 1 on/off pairs of 2 jobs" in printed
    for figure in ("jobs accepted", "jobs lost (must be 0)", "partitions proven twice",
                   "recovery to /readyz 200, mean", "journal cost (median of pairs)"):
        assert figure in printed
    figures = json.loads(out.read_text())
    kills = figures["kill_cycles"]
    assert (kills["cycles"], kills["jobs_accepted"], kills["lost"], kills["proven_twice"]) == (
        1, 2, 0, 0)
    assert 0 < kills["recovery_s_mean"] <= kills["recovery_s_max"]
    cost = figures["journal_cost"]
    assert cost["journal_writes"] > 0 and cost["jobs_per_s_on_median"] > 0
