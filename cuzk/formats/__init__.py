"""Readers and writers for the circom/snarkjs binary formats (.r1cs, .wtns, .zkey)."""

from cuzk.formats.r1cs import R1CS, R1CSConstraints, read_r1cs
from cuzk.formats.wtns import Witness, read_wtns, write_wtns
from cuzk.formats.zkey import ZKey, coefficients_from_r1cs, read_zkey, write_zkey

__all__ = [
    "R1CS",
    "R1CSConstraints",
    "Witness",
    "ZKey",
    "coefficients_from_r1cs",
    "read_r1cs",
    "read_wtns",
    "read_zkey",
    "write_wtns",
    "write_zkey",
]
