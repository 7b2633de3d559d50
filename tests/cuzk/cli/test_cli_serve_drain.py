"""SIGTERM and SIGINT against the real `cuzk serve` process: a graceful drain, then exit 0.

At the signal /readyz turns 503 and submits get 503 with Retry-After at once, while partitions
on the GPU worker or finalizing finish and are journaled; queued ones stay in the journal and
resume after a restart; an open long-poll gets a JSON answer with its job's state; the drain
ends within server.drain_timeout_s and the process exits 0. A second signal exits at once, and
the restart still finds every accepted job.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from cuzk.serve_process import ServeProcess, read_journal, serve_env
from tests.cuzk.cli._durability import KEYS_DIR, sample_inputs

pytestmark = pytest.mark.slow

DRAIN_TIMEOUT_S = 20
ON_WORKER = ("proving", "finalizing")


def _env(tmp_path: Path) -> dict[str, str]:
    # One thread per stage keeps most of the backlog queued while one partition is proving
    # (window-post is high: no GPU worker reserved for critical and high work either).
    return serve_env(
        tmp_path / "journal.sqlite3", KEYS_DIR,
        CUZK_SERVER_DRAIN_TIMEOUT_S=str(DRAIN_TIMEOUT_S), CUZK_ENGINE_SYNTHESIS_THREADS="1",
        CUZK_ENGINE_FINALIZER_THREADS="1", CUZK_ENGINE_GPU_WORKERS_PER_DEVICE="1",
        CUZK_ENGINE_RESERVED_GPU_WORKERS_PER_DEVICE="0",
    )  # fmt: skip


def _submit(url: str, n: int) -> list[dict[str, Any]]:
    window = sample_inputs("window-post")
    jobs = []
    for i in range(n):
        body = {"proof_kind": "window-post", "inputs": [window], "request_id": f"w-{i}"}
        r = httpx.post(f"{url}/v1/proofs", json=body, timeout=30)
        assert r.status_code == 202, r.text
        jobs.append(r.json() | {"body": body})
    return jobs


def _phases(url: str) -> dict[str, list[str]]:
    status = httpx.get(f"{url}/v1/status", timeout=10).json()
    return {j["id"]: [p["phase"] for p in j["partitions"]] for j in status["jobs"]}


def _wait_for_a_partition_on_the_worker(url: str, timeout: float = 120) -> dict[str, list[str]]:
    deadline = time.monotonic() + timeout
    while True:
        phases = _phases(url)
        if any(ph in ON_WORKER for pp in phases.values() for ph in pp):
            return phases
        assert time.monotonic() < deadline, f"nothing reached the GPU worker: {phases}"
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_drains_in_flight_work_and_queued_jobs_resume(
    tmp_path: Path, bundled: Any, sig: signal.Signals
) -> None:
    bundled("window-post")  # its proving key exists before the server needs it
    journal = tmp_path / "journal.sqlite3"
    server = ServeProcess(_env(tmp_path))
    try:
        url = server.start()
        server.ready()
        jobs = _submit(url, 4)
        polled: dict[str, Any] = {}

        def long_poll() -> None:
            r = httpx.get(f"{url}/v1/proofs/{jobs[-1]['id']}", params={"wait": 120}, timeout=180)
            polled.update(status=r.status_code, type=r.headers["content-type"], body=r.json())

        poller = threading.Thread(target=long_poll)
        poller.start()
        before = _wait_for_a_partition_on_the_worker(url)
        t0 = time.monotonic()
        server.signal(sig)

        ready = httpx.get(f"{url}/readyz", timeout=5)
        late = httpx.post(f"{url}/v1/proofs", json=jobs[0]["body"] | {"request_id": "late"},
                          timeout=5)
        assert time.monotonic() - t0 < 2, "the refusals must be at once"
        assert ready.status_code == 503 and "draining" in ready.json()["reason"]
        assert late.status_code == 503 and int(late.headers["retry-after"]) >= 1
        assert "shutting down" in late.json()["error"]

        assert server.wait(DRAIN_TIMEOUT_S + 15) == 0, server.output
        exited = time.monotonic() - t0
        poller.join(10)
        assert polled["status"] == 200 and polled["type"] == "application/json", polled
        assert polled["body"]["id"] == jobs[-1]["id"]
        assert polled["body"]["state"] in ("queued", "running", "succeeded")
        drained = re.search(r"drain complete after ([\d.]+)s", server.output)
        assert drained, server.output
        assert float(drained.group(1)) <= DRAIN_TIMEOUT_S and exited < DRAIN_TIMEOUT_S + 15
    finally:
        server.kill()

    rows, proofs = read_journal(journal)
    for job_id, phases in before.items():
        if any(ph in ON_WORKER for ph in phases):  # on the worker at the signal: finished
            assert rows[job_id]["state"] == "succeeded" and (job_id, 0) in proofs
    queued = [j["id"] for j in jobs if rows[j["id"]]["state"] == "accepted"]
    assert queued, f"nothing was left queued to resume: {rows}"
    assert all((job_id, 0) not in proofs for job_id in queued)

    again = ServeProcess(_env(tmp_path))
    try:
        url = again.start()
        again.ready()
        assert f"recovered from the journal: {len(queued)} window-post resumed" in again.output
        with httpx.Client(base_url=url, timeout=60) as client:
            for job in jobs:
                r = client.get(f"/v1/proofs/{job['id']}", params={"wait": 60})
                assert r.json()["state"] == "succeeded", r.text
                assert client.post("/v1/proofs", json=job["body"]).json()["id"] == job["id"]
        again.signal(signal.SIGTERM)
        assert again.wait(DRAIN_TIMEOUT_S + 15) == 0
    finally:
        again.kill()


def test_a_second_signal_exits_at_once_and_loses_nothing_journaled(
    tmp_path: Path, bundled: Any
) -> None:
    bundled("window-post")
    server = ServeProcess(_env(tmp_path))
    try:
        url = server.start()
        server.ready()
        jobs = _submit(url, 3)
        _wait_for_a_partition_on_the_worker(url)
        server.signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        while "SIGTERM: draining" not in server.output:  # the first signal was handled
            assert time.monotonic() < deadline, server.output
            time.sleep(0.02)
        t0 = time.monotonic()
        server.signal(signal.SIGTERM)
        assert server.wait(10) == 128 + signal.SIGTERM
        assert time.monotonic() - t0 < 3
        assert "exiting at once" in server.output
    finally:
        server.kill()
    again = ServeProcess(_env(tmp_path))
    try:
        url = again.start()
        again.ready()
        for job in jobs:
            r = httpx.get(f"{url}/v1/proofs/{job['id']}", params={"wait": 60}, timeout=90)
            assert r.json()["state"] == "succeeded", r.text
    finally:
        again.kill()
