pragma circom 2.0.0;

// snap-update: generated from cuzk/circuits/registry.py by scripts/build_circuits.sh.
// SnapDeals replica-update stand-in: a leaf in the old and in the new replica tree (two public roots, depth 7); domain 2^13.
// Poseidon here uses circomlib's BN254 constants: a structural stand-in, not a secure hash.

include "../common/merkle_inclusion.circom";

component main {public [root, challenge]} = MerkleInclusion(2, 1, 7);
