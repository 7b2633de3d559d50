"""``cuzk submit --deadline``: a time or a duration from now."""

from __future__ import annotations

from datetime import datetime

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
