"""Helpers for the real-process durability tests: a copy-and-read look into a journal, a
client that survives restarts, and one node process that verifies many proofs with snarkjs."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests._tools import require_tool
from tests.conftest import KEYS_DIR, ROOT

__all__ = ["KEYS_DIR", "journal_rows", "sample_inputs", "submit_until_accepted", "verify_all"]

_VERIFY_JS = r"""
const snarkjs = require(process.argv[2]);
const fs = require("fs");
(async () => {
  const items = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
  const bad = [];
  for (const it of items) {
    if (!(await snarkjs.groth16.verify(it.vk, it.public, it.proof))) bad.push(it.name);
  }
  console.log(JSON.stringify({ verified: items.length - bad.length, bad }));
  process.exit(bad.length ? 1 : 0);
})().catch((e) => { console.error(e); process.exit(2); });
"""


def sample_inputs(kind: str) -> dict[str, Any]:
    from cuzk.circuits.registry import bundled_circuits

    return json.loads(Path(bundled_circuits()[kind].sample_input_path).read_text())


def journal_rows(path: Path) -> tuple[dict[str, dict], dict[tuple[str, int], str]]:
    """(jobs by id, proof JSON by (job id, partition)) read from a *copy* of a journal that no
    server holds (the database and its WAL), so the reading changes nothing."""
    with tempfile.TemporaryDirectory() as tmp:
        for suffix in ("", "-wal"):
            src = Path(str(path) + suffix)
            if src.exists():
                shutil.copy(src, Path(tmp) / (path.name + suffix))
        db = sqlite3.connect(Path(tmp) / path.name)
        try:
            jobs = {
                r[0]: {"request_id": r[1], "proof_kind": r[2], "state": r[3], "attempt": r[4],
                       "error": r[5]}
                for r in db.execute(
                    "SELECT id, request_id, proof_kind, state, attempt, error FROM jobs")
            }
            proofs = {(r[0], r[1]): r[2]
                      for r in db.execute("SELECT job_id, idx, proof FROM partitions")}
        finally:
            db.close()
    return jobs, proofs


def submit_until_accepted(
    url: Callable[[], str | None], body: dict[str, Any], deadline: float
) -> dict[str, Any]:
    """POST until a 202 (or 200/202 replay), riding out restarts: connection errors and 503s
    are retried against whatever URL the server has now."""
    last = "never reached"
    while time.monotonic() < deadline:
        base = url()
        if base is not None:
            try:
                r = httpx.post(f"{base}/v1/proofs", json=body, timeout=10)
                if r.status_code == 202:
                    return r.json()
                last = f"{r.status_code} {r.text}"
                if r.status_code != 503:
                    raise AssertionError(f"submit refused: {last}")
            except httpx.HTTPError as e:
                last = repr(e)
        time.sleep(0.05)
    raise AssertionError(f"submit of {body.get('request_id')} never accepted: {last}")


def verify_all(items: list[dict[str, Any]]) -> int:
    """Verify ``[{name, vk, public, proof}]`` with snarkjs's groth16.verify in one node process
    (the code behind ``snarkjs groth16 verify``); returns how many verified, raises otherwise.
    Without node or snarkjs it skips, but fails under CI=true."""
    node = require_tool("node", hint="install Node.js")
    module = ROOT / "node_modules" / "snarkjs"
    require_tool("snarkjs", str(module) if module.exists() else "", hint="npm ci")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "verify.cjs"
        script.write_text(_VERIFY_JS)
        data = Path(tmp) / "items.json"
        data.write_text(json.dumps(items))
        proc = subprocess.run([node, str(script), str(module), str(data)], capture_output=True,
                              text=True, timeout=600)
    if proc.returncode != 0:
        raise AssertionError(f"snarkjs verification failed:\n{proc.stdout}\n{proc.stderr}")
    return int(json.loads(proc.stdout.strip().splitlines()[-1])["verified"])
