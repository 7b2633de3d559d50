pragma circom 2.0.0;

// porep-c2: generated from cuzk/circuits/registry.py by scripts/build_circuits.sh.
// PoRep C2 stand-in: five challenged leaves of one replica tree (depth 9); domain 2^15.
// Poseidon here uses circomlib's BN254 constants: a structural stand-in, not a secure hash.

include "../common/merkle_inclusion.circom";

component main {public [root, challenge]} = MerkleInclusion(1, 5, 9);
