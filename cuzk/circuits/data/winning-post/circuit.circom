pragma circom 2.0.0;

// winning-post: generated from cuzk/circuits/registry.py by scripts/build_circuits.sh.
// WinningPoSt stand-in: one challenged leaf of one sector tree (depth 7); domain 2^12.
// Poseidon here uses circomlib's BN254 constants: a structural stand-in, not a secure hash.

include "../common/merkle_inclusion.circom";

component main {public [root, challenge]} = MerkleInclusion(1, 1, 7);
