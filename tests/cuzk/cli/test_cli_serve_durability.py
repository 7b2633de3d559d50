"""kill -9 against the real `cuzk serve` process: nothing accepted is lost, nothing proven twice.

A mixed backlog (winning-post, and window-post configured with 2 partitions so a job can be
half done when the server dies) is submitted with request ids, a wave per server life, while
the server is killed with SIGKILL at random moments (during submits, proving or idle) and
restarted. At the end every accepted job has succeeded exactly
once (one journal row per request id, attempt 1), the same request id still names the same job,
GET by job id works across restarts, no partition proof that was journaled was ever replaced
(a re-proof would journal a different proof: Groth16 proofs are randomized), the recovery
counter saw resumed jobs, and every proof passes snarkjs's groth16 verification with the
server's verification key.
"""

from __future__ import annotations

import json
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from cuzk.serve_process import (
    ServeFailed,
    ServeProcess,
    read_journal,
    serve_env,
    submit_until_accepted,
)
from tests.cuzk.cli._durability import KEYS_DIR, sample_inputs, verify_all

pytestmark = pytest.mark.slow

KILLS = 5
BUDGET_S = 240  # a bound on the whole test (about a minute on 2 idle cores)
WINDOW_PARTITIONS = 2
WAVE = 2  # jobs released per server life


def _env(tmp_path: Path) -> dict[str, str]:
    return serve_env(
        tmp_path / "journal.sqlite3", KEYS_DIR,
        CUZK_PROOF_KINDS_WINDOW_POST_PARTITIONS=str(WINDOW_PARTITIONS),
        CUZK_ENGINE_SYNTHESIS_THREADS="2", CUZK_ENGINE_FINALIZER_THREADS="2",
        # No default deadlines: a job recovered after a kill must finish, not be cut at its
        # deadline (deadline policy has its own tests).
        CUZK_PROOF_KINDS_WINNING_POST_DEADLINE="", CUZK_PROOF_KINDS_WINDOW_POST_DEADLINE="",
    )  # fmt: skip


def _backlog() -> list[dict[str, Any]]:
    win, window = sample_inputs("winning-post"), sample_inputs("window-post")
    jobs = []
    for i in range(6):
        jobs.append({"proof_kind": "winning-post", "inputs": [win], "request_id": f"win-{i}",
                     "priority": ["critical", "normal"][i % 2]})
    for i in range(4):
        jobs.append({"proof_kind": "window-post", "inputs": [window] * WINDOW_PARTITIONS,
                     "request_id": f"window-{i}", "priority": ["high", "low"][i % 2]})
    random.Random(7).shuffle(jobs)
    return jobs


def test_kill_9_loses_nothing_and_proves_nothing_twice(tmp_path: Path, bundled: Any) -> None:
    for kind in ("winning-post", "window-post"):
        bundled(kind)  # proving keys generated before the server starts (not under the kills)
    deadline = time.monotonic() + BUDGET_S
    journal = tmp_path / "journal.sqlite3"
    env = _env(tmp_path)
    rng = random.Random(2024)
    current: dict[str, ServeProcess | None] = {"server": None}

    def url() -> str | None:
        server = current["server"]
        return server.url if server is not None and server.running else None

    backlog = _backlog()
    accepted: dict[str, list[str]] = {b["request_id"]: [] for b in backlog}
    errors: list[BaseException] = []
    waves = threading.Semaphore(0)  # one wave of submits released per server life
    got_one = threading.Event()  # a 202 arrived (the kill comes at a random point after it)

    def submitter() -> None:
        try:
            for n, body in enumerate(backlog):
                if n % WAVE == 0:
                    waves.acquire()
                job = submit_until_accepted(url, body, deadline)
                accepted[body["request_id"]].append(job["id"])
                got_one.set()
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    journaled: dict[tuple[str, int], str] = {}  # first proof seen per partition
    replaced: list[tuple[str, int]] = []
    recovered_total = 0
    kills = 0
    sub = threading.Thread(target=submitter, name="submitter")
    try:
        server = ServeProcess(env)
        server.start()
        server.ready()
        current["server"] = server
        sub.start()
        while kills < KILLS:
            assert time.monotonic() < deadline, f"only {kills} kills within the budget"
            got_one.clear()
            waves.release()
            # A random point once this life has accepted work: while the wave's next submit
            # is in flight, partitions are proving, or all is done.
            assert got_one.wait(max(0.0, deadline - time.monotonic())), "no submit accepted"
            time.sleep(rng.uniform(0.0, 1.5))
            server.kill()
            kills += 1
            _, proofs = read_journal(journal)
            for key, proof in proofs.items():
                if journaled.setdefault(key, proof) != proof:
                    replaced.append(key)
            server = ServeProcess(env)
            current["server"] = server  # the submitter follows the new URL
            server.start()
            server.ready()
            recovered_total += _recovered(server.url)  # type: ignore[arg-type]

        sub.join(max(1.0, deadline - time.monotonic()))
        assert not sub.is_alive(), "submitter did not finish within the budget"
        assert not errors, errors

        final: dict[str, dict[str, Any]] = {}
        with httpx.Client(base_url=server.url, timeout=30) as client:  # type: ignore[arg-type]
            for body in backlog:
                rid = body["request_id"]
                job_id = accepted[rid][-1]
                while True:
                    r = client.get(f"/v1/proofs/{job_id}", params={"wait": 20})
                    assert r.status_code == 200, r.text
                    if r.json()["state"] in ("succeeded", "failed", "cancelled"):
                        break
                    assert time.monotonic() < deadline, f"{rid} not done within the budget"
                final[rid] = r.json()
                again = client.post("/v1/proofs", json=body)
                assert again.status_code == 202 and again.json()["id"] == job_id, again.text
            vks = {k: client.get(f"/v1/circuits/{k}/verification_key").json()
                   for k in ("winning-post", "window-post")}
        server.signal(signal.SIGTERM)
        assert server.wait(60) == 0, server.output
    finally:
        if current["server"] is not None:
            current["server"].kill()  # type: ignore[union-attr]
        sub.join(5)

    assert kills >= KILLS
    for rid, ids in accepted.items():  # the same request id named the same job every time
        assert len(ids) >= 1 and len(set(ids)) == 1, (rid, ids)
    assert {rid: job["state"] for rid, job in final.items()} == dict.fromkeys(final, "succeeded")

    jobs, proofs = read_journal(journal)
    by_request: dict[str, list[dict]] = {}
    for job in jobs.values():
        by_request.setdefault(job["request_id"], []).append(job)
    assert sorted(by_request) == sorted(accepted)
    for rid, rows in by_request.items():  # succeeded exactly once: one job, one attempt
        assert [(r["state"], r["attempt"]) for r in rows] == [("succeeded", 1)], (rid, rows)
    for key, proof in proofs.items():
        if journaled.setdefault(key, proof) != proof:
            replaced.append(key)
    assert replaced == [], f"partitions proven again after their proof was journaled: {replaced}"
    assert recovered_total >= 1, "no restart found an unfinished job to resume"

    items = []
    for rid, job in final.items():
        assert len(job["proofs"]) == len(next(b for b in backlog if b["request_id"] == rid)
                                         ["inputs"])
        for i, p in enumerate(job["proofs"]):
            assert json.loads(proofs[(job["id"], i)]) == p["proof"]  # served = journaled
            items.append({"name": f"{rid}[{i}]", "vk": vks[job["proof_kind"]],
                          "public": p["public"], "proof": p["proof"]})
    assert verify_all(items) == len(items) == 6 + 4 * WINDOW_PARTITIONS


def _recovered(url: str) -> int:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("cuzk_jobs_recovered_total{") and 'outcome="resumed"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def test_serve_refuses_a_corrupt_journal_and_says_why(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite3"
    journal.write_bytes(b"definitely not SQLite " * 64)
    before = journal.read_bytes()
    server = ServeProcess(serve_env(journal, KEYS_DIR))
    with pytest.raises(ServeFailed) as e:
        server.start(timeout=60)
    assert server.wait(10) == 2
    assert f"refusing to start: journal {journal}: the file is corrupt" in str(e.value)
    assert journal.read_bytes() == before  # never replaced


def test_serve_refuses_a_journal_another_server_holds(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite3"
    first = ServeProcess(serve_env(journal, KEYS_DIR))
    try:
        first.start()
        assert f"journal: {journal}" in first.output  # cuzk serve prints its journal path
        second = ServeProcess(serve_env(journal, KEYS_DIR))
        with pytest.raises(ServeFailed) as e:
            second.start(timeout=60)
        assert second.wait(10) == 2
        assert "in use by another process" in str(e.value)
        assert httpx.get(f"{first.url}/readyz", timeout=5).status_code == 200
    finally:
        first.kill()


def test_serve_refuses_an_unwritable_journal_location(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    server = ServeProcess(serve_env(blocker / "journal.sqlite3", KEYS_DIR))
    with pytest.raises(ServeFailed) as e:
        server.start(timeout=60)
    assert server.wait(10) == 2
    assert f"{blocker} is not a directory" in str(e.value)
