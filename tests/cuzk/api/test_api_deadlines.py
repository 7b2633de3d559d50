"""Deadlines over HTTP: the field, its errors, and the 503 of an infeasible deadline."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from cuzk.engine.engine import Engine
from cuzk.engine.settings import ProofKindSettings as K
from tests._doubles import make_test_engine

FIGS = (("synthesizing", 0.0), ("proving", 5.0), ("finalizing", 0.0))


@pytest.fixture
def engine() -> Iterator[Engine]:
    eng, _, _ = make_test_engine({
        "plain": (1, "normal"),
        "strict": K("strict", 1, "critical", deadline_admission="reject", phase_seconds=FIGS),
    })
    eng.start()
    yield eng
    eng.shutdown(5)


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def test_a_deadline_travels_and_is_reported(client):
    at = time.time() + 120
    r = client.post("/v1/proofs", json={"proof_kind": "plain", "inputs": [{"tag": "1"}],
                                        "deadline": rfc3339(at)})
    assert r.status_code == 202, r.text
    assert r.json()["deadline"]["at"] == pytest.approx(at, abs=1e-3)
    done = client.get(f"/v1/proofs/{r.json()['id']}", params={"wait": 10}).json()
    assert done["state"] == "succeeded" and done["deadline"]["missed"] is False


@pytest.mark.parametrize(("value", "expected"), [
    ("tomorrow", "not an RFC 3339 time"),
    ("2030-01-01T00:00:00", "no UTC offset"),
    (17, "RFC 3339 time string"),
    ("2001-01-01T00:00:00Z", "already passed"),
    # ISO 8601 forms that are not RFC 3339 (Python's fromisoformat takes them; the document
    # says format date-time)
    ("20300101T000000Z", "\"20300101T000000Z\" is not an RFC 3339 time such as"),
    ("2030-01-01 00:00:00Z", "is not an RFC 3339 time"),
    ("2030-01-01T00:00Z", "is not an RFC 3339 time"),
    ("2030-02-30T00:00:00Z", "'deadline' \"2030-02-30T00:00:00Z\" is not a valid time (day is"),
])
def test_a_bad_deadline_is_a_400(client, value, expected):
    r = client.post("/v1/proofs", json={"proof_kind": "plain", "inputs": [{"tag": "1"}],
                                        "deadline": value})
    assert r.status_code == 400
    assert expected in r.json()["error"]


def test_an_infeasible_deadline_is_refused_with_the_prediction(client):
    at = time.time() + 1.0
    r = client.post("/v1/proofs", json={"proof_kind": "strict", "inputs": [{"tag": "2"}],
                                        "deadline": rfc3339(at)})
    assert r.status_code == 503
    assert "Retry-After" not in r.headers
    body = r.json()
    assert body["reason"] == "deadline" and body["proof_kind"] == "strict"
    assert body["slack_s"] < -3.0
    finish = datetime.fromisoformat(body["predicted_finish"]).timestamp()
    assert finish > at
    metrics = client.get("/metrics").text
    assert 'cuzk_jobs_rejected_total{proof_kind="strict",reason="deadline"} 1.0' in metrics


@pytest.mark.parametrize("value", [
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:59:59-01:00",  # past the last time a datetime holds, in UTC
    rfc3339(time.time() + 8 * 86400),
])
def test_a_deadline_beyond_the_horizon_is_a_400_that_changes_nothing(client, value):
    """Issue 27: a deadline in the year 9999 was accepted and, earliest deadline first, went
    before every job without one in its class. Beyond engine.deadline_horizon (7d by default)
    it is refused, naming the horizon, and nothing else changes."""
    before = client.get("/v1/status").json()
    r = client.post("/v1/proofs", json={"proof_kind": "plain", "inputs": [{"tag": "9"}],
                                        "deadline": value, "request_id": "far-1"})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert "horizon of 7d" in error and "engine.deadline_horizon" in error
    after = client.get("/v1/status").json()
    assert after["jobs"] == before["jobs"]
    metrics = client.get("/metrics").text
    assert 'cuzk_jobs_submitted_total{proof_kind="plain"} 0.0' in metrics
    rejected = [line for line in metrics.splitlines()
                if line.startswith("cuzk_jobs_rejected_total{") and not line.endswith(" 0.0")]
    assert rejected == []
    # The request id was not taken: the same id with a deadline within the horizon is a new job.
    ok = client.post("/v1/proofs", json={"proof_kind": "plain", "inputs": [{"tag": "9"}],
                                         "deadline": rfc3339(time.time() + 6 * 86400),
                                         "request_id": "far-1"})
    assert ok.status_code == 202, ok.text
