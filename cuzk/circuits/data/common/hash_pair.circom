pragma circom 2.0.0;

// Build-time helper (not a proof kind): out = Poseidon(left, right) exactly as MerkleLevel hashes,
// so scripts/build_circuits.sh can compute sample roots with the same wasm machinery.

include "circomlib/circuits/poseidon.circom";

template HashPair() {
    signal input left;
    signal input right;
    signal output out;

    component h = Poseidon(2);
    h.inputs[0] <== left;
    h.inputs[1] <== right;
    out <== h.out;
}

component main = HashPair();
