"""``cuzk status``: the jobs table's slack column."""

from __future__ import annotations

from typing import Any

from cuzk.cli.status import slack_cell


def job(deadline: dict[str, Any] | None) -> Any:
    return {"deadline": deadline}


def d(slack: float | None, at_risk: bool = False, missed: bool = False) -> dict[str, Any]:
    return {"at": 0.0, "predicted_finish": None, "slack_s": slack, "at_risk": at_risk,
            "missed": missed, "on_miss": "cancel"}


def test_slack_cells():
    assert slack_cell(job(None)).plain == "-"
    assert slack_cell(job(d(None))).plain == "?"
    assert "AT RISK" not in slack_cell(job(d(90.0))).plain
    assert slack_cell(job(d(-4.0, at_risk=True))).plain.startswith("-")
    assert "AT RISK" in slack_cell(job(d(-4.0, at_risk=True))).plain
    assert "AT RISK" in slack_cell(job(d(30.0, at_risk=True))).plain  # admitted infeasible
    assert slack_cell(job(d(None, missed=True))).plain == "MISSED"
