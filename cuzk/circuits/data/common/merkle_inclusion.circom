pragma circom 2.0.0;

// Poseidon Merkle-inclusion circuits shared by every bundled proof kind.
//
// A circuit proves that, for each of nTrees public roots, nChallenges leaves sit at the
// public challenge indices of a binary Poseidon Merkle tree of the given depth.
// The circomlib Poseidon constants are BN254's: compiled for BLS12-381 they are a
// structural stand-in with the right shape and cost, NOT a secure hash.

include "circomlib/circuits/poseidon.circom";
include "circomlib/circuits/bitify.circom";

// One tree level: order (cur, sibling) by the path bit, then hash the pair.
template MerkleLevel() {
    signal input cur;
    signal input sibling;
    signal input bit;   // 0: cur is the left child, 1: cur is the right child
    signal output out;

    signal left;
    left <== bit * (sibling - cur) + cur;

    component h = Poseidon(2);
    h.inputs[0] <== left;
    h.inputs[1] <== cur + sibling - left;
    out <== h.out;
}

// The root a leaf at `index` reaches through `siblings` (bottom level first).
template MerkleRoot(depth) {
    signal input leaf;
    signal input index;
    signal input siblings[depth];
    signal output root;

    component bits = Num2Bits(depth);
    bits.in <== index;

    component levels[depth];
    for (var i = 0; i < depth; i++) {
        levels[i] = MerkleLevel();
        levels[i].cur <== i == 0 ? leaf : levels[i - 1].out;
        levels[i].sibling <== siblings[i];
        levels[i].bit <== bits.out[i];
    }
    root <== levels[depth - 1].out;
}

// The bundled circuit: every challenged leaf must hash up to its tree's public root.
// A wrong root fails witness generation (the === below is checked by the witness generator).
template MerkleInclusion(nTrees, nChallenges, depth) {
    signal input root[nTrees];
    signal input challenge[nTrees][nChallenges];
    signal input leaf[nTrees][nChallenges];
    signal input siblings[nTrees][nChallenges][depth];

    component paths[nTrees][nChallenges];
    for (var t = 0; t < nTrees; t++) {
        for (var c = 0; c < nChallenges; c++) {
            paths[t][c] = MerkleRoot(depth);
            paths[t][c].leaf <== leaf[t][c];
            paths[t][c].index <== challenge[t][c];
            for (var i = 0; i < depth; i++) {
                paths[t][c].siblings[i] <== siblings[t][c][i];
            }
            if (paths[t][c].root != root[t]) {
                log("root mismatch: public input root of tree", t, "differs from the root computed for its challenge", c);
            }
            paths[t][c].root === root[t];
        }
    }
}
