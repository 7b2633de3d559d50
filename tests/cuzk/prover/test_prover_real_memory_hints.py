"""RealProver's memory hints: exact before loading (even before the key exists), and never the
cause of a key generation."""

from __future__ import annotations

from pathlib import Path

from cuzk.circuits.registry import bundled_circuits
from cuzk.engine.settings import EngineSettings, default_proof_kinds
from cuzk.prover.keystore import ensure_zkey
from cuzk.prover.real_prover import WITNESS_CACHE, RealProver
from tests.conftest import KEYS_DIR


def _prover(keys_dir: Path) -> RealProver:
    return RealProver(EngineSettings(backend="cpu", proof_kinds=default_proof_kinds(),
                                     keys_dir=keys_dir))


def test_partition_hint_from_the_zkey_header_equals_what_loading_reports():
    kind = "winning-post"
    ensure_zkey(kind, Path(bundled_circuits()[kind].r1cs_path), KEYS_DIR)
    prover = _prover(KEYS_DIR)
    hint = prover.partition_memory_hint(kind)
    handle = prover.load_key(kind)
    assert hint == handle.estimate
    assert prover.key_bytes_hint(kind) == handle.host_bytes


def test_hints_without_a_key_are_exact_and_generate_nothing(tmp_path: Path):
    """Submit asks for hints; generating a key there would block it for up to a minute. With no
    key yet the figures come from the r1cs, and are those the key will have once loaded. (The
    partition's figure counts the witness generator's working memory: its compiled code is
    cached beside the keys, in ``witness/``, and nothing else is written.)"""
    kind = "porep-c2"
    cold = _prover(tmp_path)
    key_bytes, partition = cold.key_bytes_hint(kind), cold.partition_memory_hint(kind)
    assert [p.name for p in tmp_path.iterdir()] == [WITNESS_CACHE]
    assert all(p.suffix == ".cwasm" for p in (tmp_path / WITNESS_CACHE).iterdir())
    ensure_zkey(kind, Path(bundled_circuits()[kind].r1cs_path), KEYS_DIR)
    handle = _prover(KEYS_DIR).load_key(kind)
    assert key_bytes == handle.host_bytes
    assert partition == handle.estimate


def test_a_loaded_key_is_charged_its_check_terms_and_its_circuit_keeps_no_terms():
    """Issue 27: a kind's r1cs stayed resident beside its key, counted nowhere. The circuit
    keeps the r1cs header (mapped, not read); C's terms for the constraint check go with the
    key and are charged with it, exactly as the hint said before the load."""
    import numpy as np

    from cuzk.formats.r1cs import count_terms
    from cuzk.prover.circuit import check_terms_bytes

    kind = "winning-post"
    ensure_zkey(kind, Path(bundled_circuits()[kind].r1cs_path), KEYS_DIR)
    prover = _prover(KEYS_DIR)
    handle = prover.load_key(kind)
    terms = handle.key.terms
    expected = check_terms_bytes(count_terms(bundled_circuits()[kind].r1cs_path)[2], 32)
    assert terms.nbytes == expected == prover.check_terms_bytes(kind) > 0
    assert handle.host_bytes == handle.key.key.host_bytes + terms.nbytes
    kept = prover.circuit(kind).r1cs
    assert kept.constraints is None and isinstance(kept._file.data, np.memmap)


def test_a_partition_counts_its_witness_generator_while_it_computes():
    """Issue 27: a generator holds nothing between computations (it is mapped from its compiled
    file per computation); while it computes, its instance's linear memory and its code are
    the partition's, before a/b/c exist. For snap-update that step is the partition's
    largest, so its reservation grows by it, before and after the load alike."""
    from cuzk.prover import estimate_memory

    kind = "snap-update"
    ensure_zkey(kind, Path(bundled_circuits()[kind].r1cs_path), KEYS_DIR)
    prover = _prover(KEYS_DIR)
    circuit = prover.circuit(kind)
    calc = circuit.calculator
    assert circuit.generator_bytes == calc.instance_bytes + calc.code_bytes > 0
    sizes = prover.key_layout(kind).sizes
    with_generator = estimate_memory(sizes, True, circuit.generator_bytes).reservation_bytes
    assert with_generator > estimate_memory(sizes, True).reservation_bytes
    assert prover.partition_memory_hint(kind).partition_bytes == with_generator
    assert prover.load_key(kind).estimate.partition_bytes == with_generator
