"""Curve parameters in one object, so a second curve (BN254) needs no hunt for constants.

They live in ``kernels`` (the lowest layer, which imports nothing from ``cuzk``); ``cuzk.curves``
adds the lookups the file formats need.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def _two_adicity(p: int) -> tuple[int, int]:
    s, t = 0, p - 1
    while t % 2 == 0:
        s, t = s + 1, t // 2
    return s, t


def _smallest_non_residue(p: int) -> int:
    n = 2
    while pow(n, (p - 1) // 2, p) == 1:
        n += 1
    return n


@dataclass(frozen=True)
class Curve:
    """A pairing-friendly curve as snarkjs names and encodes it.

    ``roots_of_unity[k]`` is the primitive 2^k-th root of unity that snarkjs (ffjavascript) uses:
    the smallest quadratic non-residue raised to the odd part of r-1, then squared down. Using any
    other root would make H disagree with the zkey's H section.
    """

    name: str  # as snarkjs writes it in proof.json ("bls12381")
    r: int  # scalar field modulus
    q: int  # base field modulus
    n8r: int  # bytes of an Fr element
    n8q: int  # bytes of an Fq element
    g1: tuple[int, int]  # G1 generator (affine, normal form)
    g2: tuple[tuple[int, int], tuple[int, int]]  # G2 generator ((x0, x1), (y0, y1))
    two_adicity: int = field(init=False)
    nqr: int = field(init=False)
    roots_of_unity: tuple[int, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        s, t = _two_adicity(self.r)
        nqr = _smallest_non_residue(self.r)
        roots = [0] * (s + 1)
        roots[s] = pow(nqr, t, self.r)
        for k in range(s - 1, -1, -1):
            roots[k] = roots[k + 1] * roots[k + 1] % self.r
        object.__setattr__(self, "two_adicity", s)
        object.__setattr__(self, "nqr", nqr)
        object.__setattr__(self, "roots_of_unity", tuple(roots))

    @property
    def fr_limbs(self) -> int:
        return self.n8r // 4

    @property
    def fq_limbs(self) -> int:
        return self.n8q // 4

    def root_of_unity(self, log_n: int) -> int:
        if not 0 <= log_n <= self.two_adicity:
            raise ValueError(
                f"{self.name}: no 2^{log_n}-th root of unity (two-adicity {self.two_adicity})"
            )
        return self.roots_of_unity[log_n]


BLS12_381 = Curve(
    name="bls12381",
    r=0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001,
    q=0x1A0111EA397FE69A4B1BA7B6434BACD764774B84F38512BF6730D2A0F6B0F6241EABFFFEB153FFFFB9FEFFFFFFFFAAAB,
    n8r=32,
    n8q=48,
    g1=(
        0x17F1D3A73197D7942695638C4FA9AC0FC3688C4F9774B905A14E3A3F171BAC586C55E83FF97A1AEFFB3AF00ADB22C6BB,
        0x08B3F481E3AAA0F1A09E30ED741D8AE4FCF5E095D5D00AF600DB18CB2C04B3EDD03CC744A2888AE40CAA232946C5E7E1,
    ),
    g2=(
        (
            0x024AA2B2F08F0A91260805272DC51051C6E47AD4FA403B02B4510B647AE3D1770BAC0326A805BBEFD48056C8C121BDB8,
            0x13E02B6052719F607DACD3A088274F65596BD0D09920B61AB5DA61BBDC7F5049334CF11213945D57E5AC7D055D042B7E,
        ),
        (
            0x0CE5D527727D6E118CC9CDC6DA2E351AADFD9BAA8CBDD3A76D429A695160D12C923AC9CC3BACA289E193548608B82801,
            0x0606C4A02EA734CC32ACD2B02BC28B99CB3E287E85A763AF267492AB572E99AB3F370D275CEC1DA1AAA9075FF05F79BE,
        ),
    ),
)
