"""`cuzk bench soak` as a user runs it: bad options in one line, and a short real run through a
real `cuzk serve` that prints its table and writes its figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import KEYS_DIR


def _cuzk(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cuzk.cli.main", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("minutes", ["0", "100000"])
def test_minutes_are_bounded(minutes: str) -> None:
    proc = _cuzk("bench", "soak", "--minutes", minutes)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stdout.strip() == "--minutes must be in (0, 1440]"


def test_the_kind_must_be_bundled() -> None:
    proc = _cuzk("bench", "soak", "--kind", "no-such-kind")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stdout.startswith("--kind must be a bundled proof kind: ")


@pytest.mark.slow
def test_short_soak_through_the_real_server(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    proc = _cuzk("bench", "soak", "--minutes", "0.25", "--sample-every", "1", "--backend", "cpu",
                 "--keys-dir", str(KEYS_DIR), "--slow-clients", "5", "--json", str(out),
                 timeout=600)
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert figures["lost"] == [] and figures["failed"] == [], figures
    assert figures["unexpected"] == [], figures["unexpected"]
    assert figures["spans_open_after_drain"] == 0
    requests = figures["requests"]
    for kind in ("submit", "slow-client", "bad:bad-signal", "bad:wrong-token", "bad:oversize"):
        assert requests.get(kind, 0) > 0, requests
    assert set(figures["series"]) == {"rss_mib", "fds", "threads", "spans_open"}
    assert len(figures["samples"]) >= 10
    for line in ("cuzk bench soak: ", "after the load drained: ", "requests: ", "jobs: ",
                 "lost jobs: 0; jobs failed unexpectedly: 0; unexpected responses: 0"):
        assert line in proc.stdout, proc.stdout
    # Everything else that fails the run is checked above; 15 s can only be judged on growth.
    growing = any(s["growing"] for s in figures["series"].values())
    assert proc.returncode == (1 if growing else 0), figures["series"]
