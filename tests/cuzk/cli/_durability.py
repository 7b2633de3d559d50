"""Helpers for the real-process durability tests: sample inputs, and one node process that
verifies many proofs with snarkjs."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests._tools import require_tool
from tests.conftest import KEYS_DIR, ROOT

__all__ = ["KEYS_DIR", "sample_inputs", "verify_all"]

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
