"""Journal integrity against the real `cuzk serve` process: damaged journaled proofs are proven
again (never served), a damaged or lost journal refuses the start, and a state directory deleted
under the running server stops it accepting (503 on submit and /readyz, a log line, a metric).
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from cuzk.engine.journal import proof_digest
from cuzk.serve_process import ServeFailed, ServeProcess, serve_env
from tests.cuzk.cli._durability import KEYS_DIR, sample_inputs, verify_all

pytestmark = pytest.mark.slow

KIND = "winning-post"
BOUND_S = 120.0  # a bound on each wait (proofs take seconds on 2 idle cores)


def _env(journal: Path) -> dict[str, str]:
    return serve_env(journal, KEYS_DIR)


def _body(rid: str) -> dict[str, Any]:
    return {"proof_kind": KIND, "inputs": [sample_inputs(KIND)], "request_id": rid}


def _finished(client: httpx.Client, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + BOUND_S
    while True:
        r = client.get(f"/v1/proofs/{job_id}", params={"wait": 10})
        assert r.status_code == 200, r.text
        if r.json()["state"] in ("succeeded", "failed", "cancelled"):
            return r.json()
        assert time.monotonic() < deadline, f"job {job_id} not finished within {BOUND_S:g}s"


def _prove(server: ServeProcess, rids: list[str]) -> dict[str, dict[str, Any]]:
    with httpx.Client(base_url=server.url or "", timeout=30) as client:
        ids = {}
        for rid in rids:
            r = client.post("/v1/proofs", json=_body(rid))
            assert r.status_code == 202, r.text
            ids[rid] = r.json()["id"]
        return {rid: _finished(client, job_id) for rid, job_id in ids.items()}


def _metric(url: str, name: str, **labels: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    want = [f'{k}="{v}"' for k, v in labels.items()]
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and all(w in line for w in want):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _checkpoint(journal: Path) -> None:
    """Fold the WAL into the main file (no server holds it), so byte edits hit the rows."""
    db = sqlite3.connect(journal)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def _swap_pi_a_pi_c(journal: Path, job_id: str, fix_digest: bool) -> dict:
    db = sqlite3.connect(journal)
    proof_text, public_text = db.execute(
        "SELECT proof, public FROM partitions WHERE job_id=? AND idx=0", (job_id,)).fetchone()
    proof = json.loads(proof_text)
    proof["pi_a"], proof["pi_c"] = proof["pi_c"], proof["pi_a"]
    new = json.dumps(proof, separators=(",", ":"))
    digest = proof_digest(job_id, 0, new, public_text) if fix_digest else None
    if digest is None:
        db.execute("UPDATE partitions SET proof=? WHERE job_id=? AND idx=0", (new, job_id))
    else:
        db.execute("UPDATE partitions SET proof=?, digest=? WHERE job_id=? AND idx=0",
                   (new, digest, job_id))
    db.commit()
    db.close()
    return proof


def test_damaged_journaled_proofs_are_proven_again_and_never_served(
    tmp_path: Path, bundled: Any
) -> None:
    bundled(KIND)
    journal = tmp_path / "state" / "journal.sqlite3"
    server = ServeProcess(_env(journal))
    try:
        server.start()
        server.ready()
        first = _prove(server, ["swapped", "forged", "flipped", "intact"])
        assert {j["state"] for j in first.values()} == {"succeeded"}
        assert server.stop(60) == 0, server.output
    finally:
        server.kill()
    _checkpoint(journal)
    ids = {rid: job["id"] for rid, job in first.items()}
    # pi_a and pi_c swapped (row checksum now wrong); the same with the checksum recomputed
    # (only verification can tell); digits of a proof flipped in the file's bytes.
    bad = [_swap_pi_a_pi_c(journal, ids["swapped"], fix_digest=False),
           _swap_pi_a_pi_c(journal, ids["forged"], fix_digest=True)]
    coordinate = first["flipped"]["proofs"][0]["proof"]["pi_c"][0].encode()
    data = bytearray(journal.read_bytes())
    at = data.find(coordinate)
    assert at > 0 and data.count(coordinate) == 1
    digit = data[at + 10]
    data[at + 10] = ord("1") if digit != ord("1") else ord("2")
    journal.write_bytes(bytes(data))

    server = ServeProcess(_env(journal))
    try:
        server.start()
        server.ready()
        url = server.url or ""
        with httpx.Client(base_url=url, timeout=30) as client:
            final = {rid: _finished(client, job_id) for rid, job_id in ids.items()}
            vk = client.get(f"/v1/circuits/{KIND}/verification_key").json()
        assert {rid: j["state"] for rid, j in final.items()} == dict.fromkeys(ids, "succeeded")
        assert final["intact"]["proofs"] == first["intact"]["proofs"]  # served as journaled
        served = [p["proof"] for j in final.values() for p in j["proofs"]]
        assert not any(p == b for p in served for b in bad)
        assert _metric(url, "cuzk_journal_proofs_rejected_total", reason="checksum") == 2
        assert _metric(url, "cuzk_journal_proofs_rejected_total", reason="verification") == 1
        assert "journaled proof rejected" in server.output
    finally:
        server.kill()
    items = [{"name": rid, "vk": vk, "public": p["public"], "proof": p["proof"]}
             for rid, j in final.items() for p in j["proofs"]]
    assert verify_all(items) == len(items) == 4


def test_random_bytes_in_data_pages_never_leave_ready_with_unanswerable_jobs(
    tmp_path: Path, bundled: Any
) -> None:
    """The file either is refused at start with the reason, or every job is answered (its
    proofs verified or proven again); never /readyz 200 while a job answers 503."""
    bundled(KIND)
    journal = tmp_path / "state" / "journal.sqlite3"
    server = ServeProcess(_env(journal))
    try:
        server.start()
        server.ready()
        first = _prove(server, ["a", "b"])
        assert server.stop(60) == 0, server.output
    finally:
        server.kill()
    _checkpoint(journal)
    data = bytearray(journal.read_bytes())
    page = 4096
    rng = random.Random(19)
    for n in range(1, len(data) // page):  # every page but the header page: 16 random bytes
        for _ in range(16):
            data[n * page + rng.randrange(page)] = rng.randrange(256)
    journal.write_bytes(bytes(data))

    server = ServeProcess(_env(journal))
    try:
        try:
            server.start()
        except ServeFailed as e:
            assert server.wait(10) == 2
            assert f"refusing to start: journal {journal}: the file is corrupt" in str(e)
            return
        server.ready()
        items = []
        with httpx.Client(base_url=server.url or "", timeout=30) as client:
            vk = client.get(f"/v1/circuits/{KIND}/verification_key").json()
            for job in first.values():
                r = client.get(f"/v1/proofs/{job['id']}")
                if r.status_code == 503:  # the journal cannot be read: then not ready either
                    assert client.get("/readyz").status_code == 503, r.text
                    continue
                assert r.status_code == 200, r.text
                final = _finished(client, job["id"])
                if final["state"] == "failed":  # could not be proven again: says why
                    assert "damaged" in final["error"], final
                    continue
                assert final["state"] == "succeeded", final
                items += [{"name": job["id"], "vk": vk, "public": p["public"],
                           "proof": p["proof"]} for p in final["proofs"]]
    finally:
        server.kill()
    if items:
        assert verify_all(items) == len(items)


def test_a_journal_emptied_between_starts_refuses_the_start(tmp_path: Path, bundled: Any) -> None:
    bundled(KIND)
    journal = tmp_path / "state" / "journal.sqlite3"
    server = ServeProcess(_env(journal))
    try:
        server.start()
        server.ready()
        assert server.stop(60) == 0, server.output
    finally:
        server.kill()
    journal.write_bytes(b"")
    server = ServeProcess(_env(journal))
    with pytest.raises(ServeFailed) as e:
        server.start()
    assert server.wait(10) == 2
    assert f"refusing to start: journal {journal}: is empty (0 bytes), but" in str(e.value)
    assert "existed here" in str(e.value)
    assert journal.read_bytes() == b""


def test_a_damaged_page_refuses_the_start_with_the_reason(tmp_path: Path, bundled: Any) -> None:
    bundled(KIND)
    journal = tmp_path / "state" / "journal.sqlite3"
    server = ServeProcess(_env(journal))
    try:
        server.start()
        server.ready()
        _prove(server, ["a"])
        assert server.stop(60) == 0, server.output
    finally:
        server.kill()
    _checkpoint(journal)
    data = bytearray(journal.read_bytes())
    for n in range(1, len(data) // 4096):  # every b-tree page's header
        data[n * 4096:n * 4096 + 16] = b"\xff" * 16
    journal.write_bytes(bytes(data))
    server = ServeProcess(_env(journal))
    with pytest.raises(ServeFailed) as e:
        server.start()
    assert server.wait(10) == 2
    assert f"refusing to start: journal {journal}: the file is corrupt" in str(e.value)


def test_a_state_directory_deleted_under_the_server_stops_it_accepting(
    tmp_path: Path, bundled: Any
) -> None:
    """The server notices on its own (no submit, no /readyz first): the metric and the log line
    come from the journal's watcher; the job it proved before stays answerable from memory; then
    /readyz and a submit answer 503 naming the loss and the remedy."""
    bundled(KIND)
    state = tmp_path / "state"
    journal = state / "journal.sqlite3"
    server = ServeProcess(_env(journal))
    try:
        server.start()
        server.ready()
        url = server.url or ""
        before = _prove(server, ["before-delete"])["before-delete"]
        assert before["state"] == "succeeded"
        assert _metric(url, "cuzk_journal_lost") == 0
        shutil.rmtree(state)
        deadline = time.monotonic() + 10.0  # a bound; the watcher looks every second
        while _metric(url, "cuzk_journal_lost") != 1:
            assert time.monotonic() < deadline, "cuzk_journal_lost still 0 after 10 s"
            time.sleep(0.1)
        assert "ERROR cuzk.engine.journal: journal " in server.output
        assert "was deleted while this server was writing to it" in server.output
        with httpx.Client(base_url=url, timeout=30) as client:
            known = client.get(f"/v1/proofs/{before['id']}")
            assert known.status_code == 200, known.text  # not a 404: this process still has it
            assert known.json()["state"] == "succeeded"
            ready = client.get("/readyz")
            assert ready.status_code == 503 and "was deleted" in ready.text
            assert "Restore the state directory, then restart the server" in ready.text
            r = client.post("/v1/proofs", json=_body("after-delete"))
            assert r.status_code == 503, r.text
            assert "was deleted" in r.text and "retry-after" not in r.headers
        assert _metric(url, "cuzk_journal_lost") == 1
        assert not state.exists()  # the server did not quietly start a new journal
        assert "Traceback" not in server.output
        server.kill()
        # Nothing was accepted after the loss, so nothing accepted is lost: the request id is
        # unknown to the next server, which starts on an empty journal (the marker went too).
        server = ServeProcess(_env(journal))
        server.start()
        server.ready()
        with httpx.Client(base_url=server.url or "", timeout=30) as client:
            r = client.post("/v1/proofs", json=_body("after-delete"))
            assert r.status_code == 202 and r.json()["attempt"] == 1, r.text
    finally:
        server.kill()
