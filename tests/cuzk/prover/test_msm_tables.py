"""Precomputed MSM window tables at key load (``[prover] msm_precompute``): the budget charges
them exactly, before and at load, ``auto`` weighs them against the host budget, and proofs made
with them verify with snarkjs (the MSM itself is checked in test_native_msm.py)."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from cuzk.cli.main import main
from cuzk.config import MSM_PRECOMPUTE_BUDGET_SHARE
from cuzk.engine.settings import EngineSettings, default_proof_kinds
from cuzk.prover import native_msm
from cuzk.prover.real_prover import RealProver
from cuzk.prover.session import prove_timed
from tests.conftest import KEYS_DIR
from tests.cuzk.prover.test_key_layout import _held_objects

DATA = Path(__file__).resolve().parents[1] / "formats" / "data"


def _prover(mode: str, budget: int | None = None) -> RealProver:
    assert native_msm.available(), "the native MSM extension is not built (make native)"
    kinds = {k: v for k, v in default_proof_kinds().items() if k == "winning-post"}
    return RealProver(EngineSettings(backend="cpu", keys_dir=KEYS_DIR, proof_kinds=kinds,
                                     msm_precompute=mode, memory_budget_bytes=budget))


def test_auto_builds_tables_when_they_take_a_sixteenth_of_the_budget_or_less():
    prover = _prover("auto")
    layout = prover.key_layout("winning-post")
    tables = layout.table_bytes
    assert tables > 0
    edge = tables * MSM_PRECOMPUTE_BUDGET_SHARE
    for budget, wanted in ((edge, True), (edge - 1, False)):
        prover.settings = _prover("auto", budget).settings
        assert prover.msm_tables(layout) is wanted
        hint = prover.key_bytes_hint("winning-post")
        assert hint == (layout.host_bytes_for(native=True) + (tables if wanted else 0)
                        + prover.check_terms_bytes("winning-post"))
    for mode, wanted in (("on", True), ("off", False)):
        assert _prover(mode, 1 << 20).msm_tables(layout) is wanted  # whatever the budget
    with pytest.raises(ValueError, match="msm_precompute"):
        EngineSettings(msm_precompute="always")


def test_off_charges_no_tables_and_builds_none():
    prover = _prover("off")
    handle = prover.load_key("winning-post")
    assert handle.msm_table_bytes == 0 and not handle.key.key.tables
    assert handle.host_bytes == prover.key_bytes_hint("winning-post")


def test_a_key_with_tables_is_charged_what_it_holds_and_its_proof_verifies_with_snarkjs(
        snarkjs, tmp_path: Path):
    prover = _prover("on")
    hint = prover.key_bytes_hint("winning-post")
    handle = prover.load_key("winning-post")
    key = handle.key.key
    gc.collect()
    assert key.tables and handle.msm_table_bytes == key.table_bytes > 0
    terms = handle.key.terms.nbytes  # C's terms for the constraint check, held with the key
    assert hint == handle.host_bytes == _held_objects(key) + terms
    assert hint == key.layout.host_bytes_for(native=True) + key.table_bytes + terms
    proof, _ = prove_timed(key, handle.key.circuit, _sample_input(), prover._backends["cpu"])
    assert proof.verified
    (tmp_path / "proof.json").write_text(json.dumps(proof.proof))
    (tmp_path / "public.json").write_text(json.dumps(proof.public))
    (tmp_path / "vk.json").write_text(json.dumps(key.verification_key.to_json()))
    out = snarkjs("groth16", "verify", tmp_path / "vk.json", tmp_path / "public.json",
                  tmp_path / "proof.json")
    assert "OK" in out


def _sample_input() -> dict:
    from cuzk.circuits.registry import bundled_circuits

    return dict(json.loads(Path(bundled_circuits()["winning-post"].sample_input_path).read_text()))


def test_cli_prove_says_tables_are_used_and_its_proof_verifies(
        snarkjs, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch):
    """A ceremony key (snarkjs's own tiny.zkey): `cuzk prove -v` with msm_precompute = "on"."""
    monkeypatch.setenv("CUZK_PROVER_MSM_PRECOMPUTE", "on")
    out = tmp_path / "out"
    assert main(["prove", "--r1cs", str(DATA / "tiny.r1cs"), "--zkey", str(DATA / "tiny.zkey"),
                 "--wtns", str(DATA / "tiny.wtns"), "--backend", "cpu", "--out", str(out),
                 "-v"]) == 0
    err = capsys.readouterr().err
    assert "msm_tables=on (" in err, err
    snarkjs("zkey", "export", "verificationkey", DATA / "tiny.zkey", tmp_path / "vk.json")
    assert "OK" in snarkjs("groth16", "verify", tmp_path / "vk.json", out / "public.json",
                           out / "proof.json")
