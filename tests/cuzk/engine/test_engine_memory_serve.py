"""The memory budget against the real `cuzk serve` process (issue 9's first reproduction).

With 20 MB beside the prover's runtime (``WITNESS_RUNTIME_BYTES``) a porep-c2 partition
(proving key ~18 MB + working memory ~13 MB on the CPU backend, computed here as the server
computes it) can never fit: it used to be accepted and wait for ever with two memory waiters.
Now submit answers 507 naming the figures, and a kind that fits still runs to a real proof.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
import pytest

from cuzk.circuits.registry import bundled_circuits
from cuzk.engine.settings import EngineSettings, default_proof_kinds
from cuzk.prover.keystore import ensure_zkey
from cuzk.prover.real_prover import WITNESS_RUNTIME_BYTES, RealProver
from cuzk.serve_process import ServeProcess, serve_env
from tests.conftest import KEYS_DIR

BUDGET = 20_000_000 + WITNESS_RUNTIME_BYTES  # 20 MB beside the prover's runtime


@pytest.mark.slow
def test_serve_refuses_what_cannot_fit_with_507_and_proves_what_fits(tmp_path: Path) -> None:
    samples = {}
    for kind in ("porep-c2", "window-post"):
        circuit = bundled_circuits()[kind]
        ensure_zkey(kind, Path(circuit.r1cs_path), KEYS_DIR)  # the suite's cached dev keys
        samples[kind] = json.loads(Path(circuit.sample_input_path).read_text())
    working = RealProver(EngineSettings(
        backend="cpu", keys_dir=KEYS_DIR, proof_kinds=default_proof_kinds())).partition_memory_hint(
        "porep-c2").partition_bytes  # with its witness generator's working memory
    served = ServeProcess(serve_env(
        tmp_path / "journal.sqlite3", KEYS_DIR, CUZK_ENGINE_MEMORY_BUDGET_BYTES=str(BUDGET)))
    try:
        url = served.start(timeout=60)
        with httpx.Client(base_url=url, timeout=60) as client:
            t0 = time.monotonic()
            r = client.post("/v1/proofs", json={
                "proof_kind": "porep-c2", "inputs": [samples["porep-c2"]] * 10})
            assert r.status_code == 507, r.text
            msg = r.json()["error"]
            assert time.monotonic() - t0 < 30
            assert "porep-c2" in msg and str(working) in msg and str(BUDGET) in msg, msg
            assert re.search(rf"proving key \d+ \+ working memory {working} bytes", msg), msg
            status = client.get("/v1/status").json()
            assert status["memory"]["waiters"] == [] and status["jobs"] == []

            r = client.post("/v1/proofs", json={
                "proof_kind": "window-post", "inputs": [samples["window-post"]]})
            assert r.status_code == 202, r.text
            job_id = r.json()["id"]
            deadline = time.monotonic() + 90
            state = None
            while state not in ("succeeded", "failed", "cancelled"):
                assert time.monotonic() < deadline, f"window-post still {state}"
                state = client.get(f"/v1/proofs/{job_id}", params={"wait": 10}).json()["state"]
            assert state == "succeeded"
            memory = client.get("/v1/status").json()["memory"]
            assert memory["waiters"] == [] and memory["reserved_bytes"] <= BUDGET
            assert memory["reserved_by_consumer"].get("partition", 0) == 0
    finally:
        served.stop(20)
