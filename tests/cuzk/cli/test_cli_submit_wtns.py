"""``cuzk submit KIND --wtns P0.wtns ...`` run as a user runs it, against the real app and
prover on a loopback port (the engine ``cuzk serve`` builds, without its 20 s start): a
witness made by another generator (``snarkjs wtns calculate``, as circom's native one would
make it) is proven without the server's witness generator, and snarkjs verifies the proof
with the server's verification key; a missing file, the wrong number of files or a witness
cut short is one line, non-zero, before or instead of a job."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from cuzk.api.app import create_app
from cuzk.circuits.registry import bundled_circuits
from cuzk.engine.engine import Engine
from cuzk.engine.settings import EngineSettings, ProofKindSettings
from cuzk.prover.real_prover import RealProver
from cuzk.serve_process import uvicorn_in_thread
from tests.cuzk.cli._cli import cuzk, json_out, said

KIND = "winning-post"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, bundled) -> Iterator[str]:
    settings = EngineSettings(
        backend="cpu", synthesis_threads=1, finalizer_threads=1, memory_budget_bytes=1 << 30,
        journal_path=tmp_path_factory.mktemp("wtns-serve") / "journal.sqlite3",
        proof_kinds={KIND: ProofKindSettings(KIND, 1, "critical",
                                             zkey=bundled(KIND).zkey_path)},
    )
    engine = Engine(settings, RealProver(settings)).start()
    config = uvicorn.Config(create_app(engine), host="127.0.0.1", port=0, lifespan="off",
                            log_level="warning")
    try:
        with uvicorn_in_thread(config) as url:
            yield url
    finally:
        engine.shutdown(timeout=10)


@pytest.fixture(scope="module")
def witness(tmp_path_factory: pytest.TempPathFactory, snarkjs) -> Path:
    """winning-post's sample input through snarkjs's witness calculator (not cuzk's)."""
    c = bundled_circuits()[KIND]
    out = tmp_path_factory.mktemp("wtns") / "p0.wtns"
    snarkjs("wtns", "calculate", c.wasm_path, c.sample_input_path, out)
    return out


def test_submit_a_witness_and_snarkjs_verifies_the_proof(
    tmp_path: Path, served: str, witness: Path, snarkjs
) -> None:
    out = tmp_path / "proofs"
    proc = cuzk(tmp_path, "submit", KIND, "--wtns", str(witness), "--server", served,
                "--out", str(out), "--json")
    result = json_out(proc)
    assert proc.returncode == 0, proc.stderr
    assert (result["state"], result["partitions"], result["partitions_done"]) == (
        "succeeded", 1, 1)
    vk = tmp_path / "vk.json"
    vk.write_text(httpx.get(f"{served}/v1/circuits/{KIND}/verification_key", timeout=30).text)
    said_ok = snarkjs("groth16", "verify", vk, out / "public_0.json", out / "proof_0.json")
    assert "OK" in said_ok, said_ok
    public = json.loads((out / "public_0.json").read_text())
    sample = json.loads(Path(bundled_circuits()[KIND].sample_input_path).read_text())
    assert str(sample["root"][0]) in public  # the witness's own public signals


def test_witness_mistakes_are_one_line(tmp_path: Path, served: str, witness: Path) -> None:
    missing = cuzk(tmp_path, "submit", KIND, "--wtns", "nope.wtns", "--server", served)
    assert said(missing, "submit") == "cuzk submit: --wtns nope.wtns: no such file"

    two = cuzk(tmp_path, "submit", KIND, "--wtns", str(witness), str(witness), "--server",
               served)
    assert said(two, "submit") == (
        f"cuzk submit: proof kind {KIND!r} takes 1 partition: give one .wtns per partition, in"
        " partition order (--wtns P0.wtns P1.wtns ...), got 2")

    not_wtns = tmp_path / "input.json"
    not_wtns.write_text("{}")
    wrong = cuzk(tmp_path, "submit", KIND, "--wtns", str(not_wtns), "--server", served)
    assert said(wrong, "submit").startswith(
        f"cuzk submit: --wtns {not_wtns}: not a .wtns witness file")

    short = tmp_path / "short.wtns"
    short.write_bytes(witness.read_bytes()[:-64])
    cut = cuzk(tmp_path, "submit", KIND, "--wtns", str(short), "--server", served)
    line = said(cut, "submit")
    assert "witness 0 (at byte 0): truncated: section 2 of 2" in line, line

    both = cuzk(tmp_path, "submit", KIND, "--wtns", str(witness), "--input", str(not_wtns),
                "--server", served)
    assert both.returncode == 2 and "Traceback" not in both.stderr
    assert "argument --input: not allowed with argument --wtns" in both.stderr
