"""The API side of durability: 409 for a reused request_id, 503 (+ Retry-After) while draining
or when the journal cannot be written, /readyz, and long-polls answered in JSON on a drain."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from cuzk.api.app import create_app
from cuzk.config import Config
from cuzk.simulated_prover import ScriptedProver
from tests._doubles import make_test_engine, wait_until

pytestmark = pytest.mark.filterwarnings("ignore::starlette.exceptions.StarletteDeprecationWarning")

KINDS = {"winning-post": (1, "critical"), "window-post": (1, "high")}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, Any, ScriptedProver]]:
    # Room to parse the large body below (parsing is reserved from the budget).
    engine, prover, _ = make_test_engine(KINDS, journal_path=tmp_path / "journal.sqlite3",
                                         synthesis_threads=1, memory_budget_bytes=64 << 20)
    engine.start()
    with TestClient(create_app(engine, Config())) as client:
        yield client, engine, prover
    engine.shutdown(5)


TAGS = {"a": "1", "b": "2", "x": "3", "inflight": "4", "blocker": "5", "queued": "6",
        "late": "7"}


def body(tag: str, kind: str = "window-post", **extra: Any) -> dict[str, Any]:
    """Signal values must be field elements (the API checks), so tags are small numbers."""
    return {"proof_kind": kind, "inputs": [{"tag": TAGS[tag]}], **extra}


def test_reused_request_id_with_another_body_is_409_naming_the_job(served) -> None:
    client, engine, prover = served
    first = client.post("/v1/proofs", json=body("a", request_id="r-1"))
    assert first.status_code == 202
    job_id = first.json()["id"]
    assert client.post("/v1/proofs", json=body("a", request_id="r-1")).json()["id"] == job_id
    # Settled first: a job still proving would change the call counts the 409 must not change.
    assert engine.wait(job_id, 10).state == "succeeded"
    calls = dict(prover.calls)
    jobs = len(engine.jobs())
    r = client.post("/v1/proofs", json=body("b", request_id="r-1", priority="low"))
    assert r.status_code == 409
    assert r.headers["content-type"] == "application/json"
    assert r.headers["location"] == f"/v1/proofs/{job_id}"
    message = r.json()["error"]
    assert job_id in message and "priority 'low' (was 'high')" in message and "inputs" in message
    assert len(engine.jobs()) == jobs and prover.calls == calls


def test_unwritable_journal_makes_submit_503_and_readyz_say_why(served) -> None:
    client, engine, prover = served
    db = engine.journal._db
    db.execute(f"PRAGMA max_page_count={db.execute('PRAGMA page_count').fetchone()[0]}")
    big = body("x", request_id="full")
    big["inputs"][0] |= {f"s{i}": "1" for i in range(10_000)}  # a record that needs new pages
    r = client.post("/v1/proofs", json=big)
    assert r.status_code == 503 and "disk is full" in r.json()["error"]
    assert "retry-after" in r.headers
    ready = client.get("/readyz")
    assert ready.status_code == 503 and "disk is full" in ready.json()["reason"]
    assert client.get("/v1/proofs/full").status_code == 404
    assert prover.calls["synthesize"] == 0
    db.execute("PRAGMA max_page_count=1073741823")
    engine._probe_at = 0.0
    assert client.get("/readyz").status_code == 200
    assert client.post("/v1/proofs", json=body("x", request_id="full")).status_code == 202


def test_drain_answers_503_with_retry_after_and_long_polls_in_json(served) -> None:
    client, engine, prover = served
    gate = prover.hold("gpu", TAGS["inflight"])
    inflight = client.post("/v1/proofs", json=body("inflight")).json()
    assert gate.wait_entered()
    blocker = prover.hold("synthesize", TAGS["blocker"])  # keeps the one synthesis thread busy
    client.post("/v1/proofs", json=body("blocker"))
    assert blocker.wait_entered()
    queued = client.post("/v1/proofs", json=body("queued", kind="winning-post")).json()
    answers: dict[str, Any] = {}

    def long_poll(job_id: str) -> None:
        r = client.get(f"/v1/proofs/{job_id}", params={"wait": 60})
        answers[job_id] = (r.status_code, r.headers["content-type"], r.json()["state"])

    polls = [threading.Thread(target=long_poll, args=(j["id"],)) for j in (inflight, queued)]
    for t in polls:
        t.start()
    drain = threading.Thread(target=engine.drain, args=(30,))
    t0 = time.monotonic()
    drain.start()
    assert wait_until(lambda: engine.draining)
    ready = client.get("/readyz")
    assert ready.status_code == 503 and "draining" in ready.json()["reason"]
    late = client.post("/v1/proofs", json=body("late"))
    assert late.status_code == 503 and int(late.headers["retry-after"]) >= 1
    assert "shutting down" in late.json()["error"]
    gate.release()
    blocker.release()
    drain.join(10)
    for t in polls:
        t.join(10)
    assert time.monotonic() - t0 < 10
    assert answers == {
        inflight["id"]: (200, "application/json", "succeeded"),
        queued["id"]: (200, "application/json", "queued"),
    }
