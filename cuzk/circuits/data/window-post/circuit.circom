pragma circom 2.0.0;

// window-post: generated from cuzk/circuits/registry.py by scripts/build_circuits.sh.
// WindowPoSt stand-in: one challenged leaf in each of four sector trees (depth 6); domain 2^14.
// Poseidon here uses circomlib's BN254 constants: a structural stand-in, not a secure hash.

include "../common/merkle_inclusion.circom";

component main {public [root, challenge]} = MerkleInclusion(4, 1, 6);
