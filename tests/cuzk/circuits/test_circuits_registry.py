"""Bundled circuits: registry contents, committed files, r1cs headers and sizes per proof kind."""

from __future__ import annotations

import json

import pytest

from cuzk.circuits.build import render_source
from cuzk.circuits.registry import bundled_circuits
from cuzk.curves import BLS12_381
from cuzk.formats.r1cs import read_r1cs

CIRCUITS = bundled_circuits()

# proof kind -> (nConstraints, nPublic, domain, nWires), as compiled by scripts/build_circuits.sh
EXPECTED = {
    "winning-post": (3641, 2, 2**12, 3650),
    "snap-update": (7282, 4, 2**13, 7299),
    "window-post": (12484, 8, 2**14, 12513),
    "porep-c2": (23405, 6, 2**15, 23452),
}


def test_registry_kinds_partitions_priorities() -> None:
    assert list(CIRCUITS) == ["winning-post", "snap-update", "window-post", "porep-c2"]
    got = {k: (c.partitions, c.priority) for k, c in CIRCUITS.items()}
    assert got == {
        "winning-post": (1, "critical"),
        "snap-update": (16, "normal"),
        "window-post": (1, "high"),
        "porep-c2": (10, "normal"),
    }
    for kind, c in CIRCUITS.items():
        assert c.proof_kind == kind and c.description
        for path in (
            c.r1cs_path,
            c.wasm_path,
            c.sample_input_path,
            c.circom_path,
            c.inputs_schema_path,
        ):
            assert path.is_file(), path


@pytest.mark.parametrize("kind", list(CIRCUITS))
def test_r1cs_header(kind: str) -> None:
    c = CIRCUITS[kind]
    r1cs = read_r1cs(c.r1cs_path)
    n_constraints, n_public, domain, _ = EXPECTED[kind]
    p = c.params
    assert r1cs.curve is BLS12_381 and r1cs.prime == BLS12_381.r
    assert (r1cs.n_constraints, r1cs.n_public, r1cs.domain_size, r1cs.n_wires) == EXPECTED[kind]
    assert (r1cs.n_pub_out, r1cs.n_pub_in) == (
        0,
        p.n_trees * (1 + p.n_challenges),
    )  # roots + indices
    assert r1cs.n_prv_in == p.n_trees * p.n_challenges * (1 + p.depth)  # leaves + siblings
    assert domain == 1 << (n_constraints + n_public).bit_length()
    assert (
        r1cs.constraints is not None and int(r1cs.constraints.constraint.max()) == n_constraints - 1
    )


@pytest.mark.parametrize("kind", list(CIRCUITS))
def test_sources_and_samples_follow_registry(kind: str) -> None:
    c = CIRCUITS[kind]
    assert c.circom_path.read_text() == render_source(c)
    p = c.params
    sample = json.loads(c.sample_input_path.read_text())
    assert set(sample) == {"root", "challenge", "leaf", "siblings"}
    assert len(sample["root"]) == p.n_trees
    assert all(len(ch) == p.n_challenges for ch in sample["challenge"])
    assert all(len(path) == p.depth for tree in sample["siblings"] for path in tree)
    schema = json.loads(c.inputs_schema_path.read_text())["signals"]
    assert schema == {
        "root": p.n_trees,
        "challenge": p.n_trees * p.n_challenges,
        "leaf": p.n_trees * p.n_challenges,
        "siblings": p.n_trees * p.n_challenges * p.depth,
    }


def test_readme_says_stand_in() -> None:
    readme = (next(iter(CIRCUITS.values())).directory.parent.parent / "README.md").read_text()
    assert "not a secure hash" in readme and "BN254" in readme


@pytest.mark.parametrize("kind", list(CIRCUITS))
def test_sample_witness_satisfies_r1cs(kind: str) -> None:
    """The sample's witness (our runner) satisfies every constraint the r1cs reader returns."""
    from cuzk.formats.limbs import limbs_to_ints
    from cuzk.witness.wasm import WitnessCalculator

    c = CIRCUITS[kind]
    r1cs = read_r1cs(c.r1cs_path)
    sample = json.loads(c.sample_input_path.read_text())
    w = limbs_to_ints(WitnessCalculator(c.wasm_path).calculate(sample))
    r = BLS12_381.r
    assert len(w) == r1cs.n_wires and w[0] == 1
    # public signals follow ONE in order: roots, then challenge indices
    assert [str(v) for v in w[1 : 1 + c.params.n_trees]] == sample["root"]
    cons = r1cs.constraints
    assert cons is not None
    sums = [[0] * r1cs.n_constraints for _ in range(3)]
    for m, k, s, v in zip(
        cons.matrix.tolist(),
        cons.constraint.tolist(),
        cons.signal.tolist(),
        limbs_to_ints(cons.value),
        strict=True,
    ):
        sums[m][k] += v * w[s]
    bad = [k for k in range(r1cs.n_constraints) if (sums[0][k] * sums[1][k] - sums[2][k]) % r]
    assert not bad, f"{len(bad)} constraints unsatisfied, first {bad[0]}"
