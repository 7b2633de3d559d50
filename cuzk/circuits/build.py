"""Build-time steps behind ``scripts/build_circuits.sh`` (circom itself runs in the script).

``python -m cuzk.circuits.build sources``
    write data/<kind>/circuit.circom from the registry
``python -m cuzk.circuits.build finish KIND SYM HASHER_WASM``
    write circuit.inputs.json (input names from circom's .sym, checked against the wasm) and a
    sample input.json whose roots are computed with the Poseidon helper circuit, then check that
    the sample satisfies the circuit.

Sample inputs are deterministic (seeded by the proof kind), so rebuilding gives the same files.
The Merkle trees are "virtual": only nodes on the challenged paths are hashed, the other siblings
are random field elements. That is still a valid set of paths to one root.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from cuzk.circuits.registry import BundledCircuit, CircuitParams, bundled_circuits
from cuzk.formats.limbs import limbs_to_ints
from cuzk.witness.wasm import WitnessCalculator, input_signals_from_sym, write_input_signals

_SOURCE = """pragma circom 2.0.0;

// {kind}: generated from cuzk/circuits/registry.py by scripts/build_circuits.sh.
// {description}
// Poseidon here uses circomlib's BN254 constants: a structural stand-in, not a secure hash.

include "../common/merkle_inclusion.circom";

component main {{public [root, challenge]}} = MerkleInclusion({n_trees}, {n_challenges}, {depth});
"""


def render_source(c: BundledCircuit) -> str:
    """The circuit.circom text for a bundled circuit (what the registry's parameters say)."""
    p = c.params
    return _SOURCE.format(
        kind=c.proof_kind,
        description=c.description,
        n_trees=p.n_trees,
        n_challenges=p.n_challenges,
        depth=p.depth,
    )


def write_sources() -> None:
    for c in bundled_circuits().values():
        c.directory.mkdir(parents=True, exist_ok=True)
        c.circom_path.write_text(render_source(c))


def make_sample_input(params: CircuitParams, hasher: WitnessCalculator, seed: str) -> dict:
    """A satisfying input: random leaves and siblings, distinct random challenges per tree."""
    rng = random.Random(seed)
    r = hasher.prime

    def h(left: int, right: int) -> int:
        w = hasher.calculate({"left": left, "right": right})
        return limbs_to_ints(w[1:2])[0]  # witness[1] is main's output

    roots, challenges, leaves, siblings = [], [], [], []
    for _ in range(params.n_trees):
        idx = rng.sample(range(1 << params.depth), params.n_challenges)
        level = {i: rng.randrange(r) for i in idx}  # leaves at the challenged positions
        tree_leaves = [level[i] for i in idx]
        levels = [level]
        for _ in range(params.depth):
            nxt: dict[int, int] = {}
            for i in sorted(level):
                if i // 2 in nxt:
                    continue
                sib = level.setdefault(i ^ 1, rng.randrange(r))
                left, right = (level[i], sib) if i % 2 == 0 else (sib, level[i])
                nxt[i // 2] = h(left, right)
            level = nxt
            levels.append(level)
        roots.append(str(level[0]))
        challenges.append([str(i) for i in idx])
        leaves.append([str(v) for v in tree_leaves])
        siblings.append([[str(levels[d][(i >> d) ^ 1]) for d in range(params.depth)] for i in idx])
    return {"root": roots, "challenge": challenges, "leaf": leaves, "siblings": siblings}


def finish(circuit: BundledCircuit, sym_path: Path, hasher_wasm: Path) -> None:
    signals = input_signals_from_sym(circuit.wasm_path, sym_path)
    write_input_signals(circuit.inputs_schema_path, signals)
    sample = make_sample_input(circuit.params, WitnessCalculator(hasher_wasm), circuit.proof_kind)
    circuit.sample_input_path.write_text(json.dumps(sample, indent=1) + "\n")
    WitnessCalculator(circuit.wasm_path).calculate(sample)  # raises if the sample is wrong


def main(argv: list[str]) -> int:
    if argv[:1] == ["sources"]:
        write_sources()
        return 0
    if len(argv) == 4 and argv[0] == "finish":
        finish(bundled_circuits()[argv[1]], Path(argv[2]), Path(argv[3]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
