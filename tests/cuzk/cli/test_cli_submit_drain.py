"""`cuzk submit` against a real `cuzk serve` that drains (SIGTERM) and is restarted on the same
port and journal: the submit, started while the first server answers 503, rides out the drain
and the restart and ends with its proofs, as one job."""

from __future__ import annotations

import io
import json
import signal
import socket
import threading
import time
from argparse import Namespace
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console

from cuzk.cli import submit as submit_cmd
from cuzk.serve_process import ServeProcess, serve_env
from tests.cuzk.cli._durability import KEYS_DIR, sample_inputs

pytestmark = pytest.mark.slow

BOUND_S = 240


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_submit_rides_out_a_drain_and_a_restart(tmp_path: Path, bundled: Any) -> None:
    bundled("porep-c2")
    bundled("winning-post")
    port = _free_port()
    env = serve_env(
        tmp_path / "journal.sqlite3", KEYS_DIR, CUZK_SERVER_LISTEN=f"127.0.0.1:{port}",
        CUZK_SERVER_DRAIN_TIMEOUT_S="60", CUZK_ENGINE_SYNTHESIS_THREADS="1",
        CUZK_ENGINE_FINALIZER_THREADS="1", CUZK_ENGINE_GPU_WORKERS_PER_DEVICE="1",
    )  # fmt: skip
    first = ServeProcess(env)
    second = ServeProcess(env)
    outcome: dict[str, Any] = {}
    try:
        url = first.start()
        first.ready()
        # Work in flight, so the drain lasts while the submit starts: ten porep-c2 partitions
        # on one GPU worker (two window-posts no longer did: critical and high work has a
        # synthesis thread of its own, and they were done before the submit's first request).
        r = httpx.post(f"{url}/v1/proofs", timeout=30, json={
            "proof_kind": "porep-c2", "inputs": [sample_inputs("porep-c2")] * 10,
            "request_id": "busy"})
        assert r.status_code == 202, r.text
        job_url = f"{url}/v1/proofs/{r.json()['id']}"
        deadline = time.monotonic() + 60
        # A partition waiting for its kind's key is parked by a drain, not waited for: signal
        # once the key is resident and partitions are being proven.
        while not any(p["phase"] in ("proving", "finalizing", "done")
                      for p in httpx.get(job_url, timeout=10).json()["partitions"]):
            assert time.monotonic() < deadline, "no porep-c2 partition reached a GPU worker"
            time.sleep(0.02)
        first.signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        while httpx.get(f"{url}/readyz", timeout=5).status_code != 503:
            assert time.monotonic() < deadline, "the first server never started draining"
            time.sleep(0.02)

        err = io.StringIO()
        args = Namespace(proof_kind="winning-post", input=None, server=url,
                         out=str(tmp_path / "proofs"), request_id=None, priority=None,
                         timeout=BOUND_S, no_wait=False, retry_for=BOUND_S)

        def submit() -> None:
            with httpx.Client(base_url=url, timeout=30) as client:
                try:
                    outcome["code"] = submit_cmd.submit(
                        client, args, console=Console(file=err, width=200), out=io.StringIO())
                except Exception as e:
                    outcome["error"] = e

        thread = threading.Thread(target=submit, name="cuzk-submit")
        thread.start()
        assert first.wait(90) == 0, first.output  # the drain ended; the port is free
        second.start()
        thread.join(BOUND_S)
        assert not thread.is_alive(), "cuzk submit did not finish within its bound"
        assert outcome.get("code") == 0, (outcome, err.getvalue(), second.output)
        said = err.getvalue()
        assert "retrying" in said and "503" in said, (said, first.output)

        proofs = sorted(p.name for p in (tmp_path / "proofs").iterdir())
        assert proofs == ["proof_0.json", "public_0.json"]
        assert json.loads((tmp_path / "proofs" / "proof_0.json").read_text())["protocol"] == (
            "groth16")
        status = httpx.get(f"{url}/v1/status", timeout=10).json()
        mine = [j for j in status["jobs"] if j["proof_kind"] == "winning-post"]
        assert len(mine) == 1, mine  # retried, never submitted twice
        assert (mine[0]["request_id"] or "").startswith("cuzk-submit-")
    finally:
        first.kill()
        second.kill()
