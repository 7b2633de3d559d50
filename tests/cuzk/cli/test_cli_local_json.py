"""``--json`` on ``prove``, ``keygen``, ``verify`` and ``circuit check``, run as a script runs
them: one JSON object on stdout whatever the outcome, every field of the documented shape
present, ``ok`` true exactly when the exit status is 0; and the docs name every field."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cuzk.cli import _local_results as shapes
from tests.cuzk.cli._cli import cuzk, json_out, said
from tests.cuzk.prover.test_prover_keycheck import R1CS, WASM, ZKEY

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "cli.md"
WTNS = R1CS.parent / "tiny.wtns"
INPUT = R1CS.parent / "tiny.input.json"
SWAPPED = WASM.parents[1] / "tiny_swapped_js" / "tiny_swapped.wasm"


def _shaped(data: dict[str, Any], shape: type) -> dict[str, Any]:
    """Exactly the fields of ``shape`` (a TypedDict), none missing, none unknown."""
    assert set(data) == set(shape.__annotations__) | set(shapes.LocalResult.__annotations__), (
        sorted(data))
    assert data["format"] == shapes.FORMAT
    return data


def test_prove_json(tmp_path: Path):
    proc = cuzk(tmp_path, "prove", str(ZKEY), str(WTNS), "p.json", "q.json", "--backend", "cpu",
                "--json")
    data = _shaped(json_out(proc), shapes.ProveResult)
    assert data["ok"] and data["verified"] and data["error"] is None
    assert (data["command"], data["name"], data["backend"]) == ("prove", "tiny", "cpu")
    assert (data["proof"], data["public"], data["zkey"]) == ("p.json", "q.json", str(ZKEY))
    assert data["public_signals"] == json.loads((tmp_path / "q.json").read_text())
    assert data["development_key"] is False
    assert set(data["timings_ms"]) == set(shapes.Timings.__annotations__)
    assert all(v is None or v >= 0 for v in data["timings_ms"].values())
    # A failure: the same shape, the error line on stderr too, nothing written.
    proc = cuzk(tmp_path, "prove", str(ZKEY), "missing.wtns", "p2.json", "q2.json", "--json")
    data = _shaped(json_out(proc), shapes.ProveResult)
    assert proc.returncode == 2 and data["error"] == "WITNESS.wtns missing.wtns: no such file"
    assert said(proc, "prove") == f"cuzk prove: {data['error']}"
    assert data["proof"] is None and not (tmp_path / "p2.json").exists()


def test_keygen_json(tmp_path: Path):
    proc = cuzk(tmp_path, "keygen", "--r1cs", str(R1CS), "--out", "k.zkey", "--json")
    data = _shaped(json_out(proc), shapes.KeygenResult)
    assert data["keys"] == [{"proof_kind": None, "r1cs": str(R1CS), "zkey": "k.zkey",
                             "vk": "k.vk.json"}]
    assert (tmp_path / "k.zkey").is_file() and (tmp_path / "k.vk.json").is_file()
    data = _shaped(json_out(cuzk(tmp_path, "keygen", "nope", "--json")), shapes.KeygenResult)
    assert data["keys"] == [] and "unknown proof kind(s) nope" in data["error"]


def test_verify_json(tmp_path: Path):
    json_out(cuzk(tmp_path, "prove", str(ZKEY), str(WTNS), "p.json", "q.json", "--json"))
    data = _shaped(json_out(cuzk(tmp_path, "verify", "--zkey", str(ZKEY), "q.json", "p.json",
                                 "--json")), shapes.VerifyResult)
    assert data["valid"] is True and (data["proof"], data["public"]) == ("p.json", "q.json")
    (tmp_path / "w.json").write_text(json.dumps(["1", "3"]))
    proc = cuzk(tmp_path, "verify", "--zkey", str(ZKEY), "p.json", "w.json", "--json")
    data = _shaped(json_out(proc), shapes.VerifyResult)
    assert proc.returncode == 1 and data["valid"] is False
    assert data["error"] == "the proof does not verify"
    proc = cuzk(tmp_path, "verify", "--zkey", str(ZKEY), "p.json", "none.json", "--json")
    data = _shaped(json_out(proc), shapes.VerifyResult)
    assert proc.returncode == 2 and data["valid"] is None


@pytest.mark.parametrize(("wasm", "code", "belong", "satisfied"),
                         [(WASM, 0, True, True), (SWAPPED, 1, False, False)],
                         ids=["same-circuit", "same-shape-other-circuit"])
def test_circuit_check_json(tmp_path: Path, wasm: Path, code: int, belong: bool,
                            satisfied: bool):
    proc = cuzk(tmp_path, "circuit", "check", "--r1cs", str(R1CS), "--wasm", str(wasm),
                "--zkey", str(ZKEY), "--input", str(INPUT), "--json")
    data = _shaped(json_out(proc), shapes.CheckResult)
    assert proc.returncode == code and data["command"] == "circuit check"
    assert (data["belong"], data["input_satisfied"]) == (belong, satisfied)
    assert (data["constraints"], data["signals"], data["public_signals"]) == (2, 6, 2)
    if belong:
        assert data["phase2_contributions"] == 0 and len(data["circuit_hash"]) == 128


def test_the_doc_names_every_field_and_its_example_has_the_shape(tmp_path: Path):
    text = DOC.read_text()
    section = text.split("### Output for scripts: the local commands", 1)[1]
    for shape in (shapes.LocalResult, shapes.ProveResult, shapes.Timings, shapes.KeygenResult,
                  shapes.KeyFiles, shapes.VerifyResult, shapes.CheckResult):
        for field in shape.__annotations__:
            assert f"`{field}`" in section or f'"{field}"' in section, (shape.__name__, field)
    (example,) = re.findall(r"```json\n(.*?)\n```", section, re.S)
    _shaped(json.loads(example), shapes.ProveResult)
