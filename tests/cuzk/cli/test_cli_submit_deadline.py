"""``cuzk submit --deadline``: a time or a duration from now."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from cuzk.cli._http import CliError
from cuzk.cli.submit import deadline_text


@pytest.mark.parametrize(("value", "seconds"), [("30s", 30), ("25m", 1500), ("1h", 3600),
                                                ("90", 90), ("250ms", 0.25)])
def test_a_duration_is_from_now(value, seconds):
    at = datetime.fromisoformat(deadline_text(value, now=1_000_000.0)).timestamp()
    assert at == pytest.approx(1_000_000.0 + seconds)


def test_a_time_is_sent_as_given():
    assert deadline_text("2030-01-01T00:00:00Z") == "2030-01-01T00:00:00+00:00"
    assert deadline_text("2030-01-01T02:00:00+02:00") == "2030-01-01T02:00:00+02:00"


@pytest.mark.parametrize("value", ["soon", "2030-01-01T00:00:00", "-5s", "0s"])
def test_anything_else_is_a_clear_error(value):
    with pytest.raises(CliError, match="--deadline"):
        deadline_text(value)


@pytest.mark.parametrize("value", ["99999999999999h", "9999999999h", "300000000000000s"])
def test_a_duration_past_the_year_9999_is_a_clear_error(value):
    with pytest.raises(CliError, match=r"--deadline .*past the latest time there is"):
        deadline_text(value)


def test_cuzk_submit_with_an_overflowing_deadline_says_so_in_one_line(tmp_path):
    """Issue 27: ``cuzk submit --deadline 99999999999999h`` ended in a traceback. It is one
    line naming the option, exit 1, said before any server is asked (none answers here)."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]  # this checkout's cuzk, not an installed one
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUZK_")}
    env["PYTHONPATH"] = str(root)
    proc = subprocess.run(
        [sys.executable, "-m", "cuzk.cli.main", "submit", "winning-post",
         "--deadline", "99999999999999h", "--server", "http://127.0.0.1:9",
         "--retry-for", "0", "--no-wait", "--out", str(tmp_path / "proofs")],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("cuzk submit: --deadline '99999999999999h'")
    assert "past the latest time there is" in lines[0]
