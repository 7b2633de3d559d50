"""A synthetic BLS12-381 circuit of any power-of-two size, made without circom or node.

``cuzk circuit synth`` writes one for proving at scale on a host that has neither compiler nor
room to receive a 2^20 r1cs: ``circuit.r1cs`` (circom's binary format, which snarkjs reads),
``witness.wtns`` (a witness that satisfies every constraint) and a development key
(``circuit.zkey`` and ``circuit.vk.json``, made by :func:`cuzk.prover.keystore.generate_zkey`,
exactly what ``cuzk keygen --r1cs`` makes).

The circuit is 2^k - 1 - nPublic constraints, the most whose Groth16 domain (snarkjs's: the
next power of two strictly above constraints + public signals) is 2^k. Each constraint defines
one new wire with one of the gadgets circom's standard library is made of, so rows have a few
terms and most witness values are small, as in circom circuits:

==========  ======================================  ==========  ================
gadget      constraint                              new wire    share of gadgets
==========  ======================================  ==========  ================
``BOOL``    ``z * (z - 1) = 0`` (Num2Bits' bits)     0 or 1      32%
``PACK``    ``z = sum 2^i * bit_i`` over 2..8 bits   < 2^8       14%
``SMUL``    ``s * bit = z``                          small       14%
``ISZERO``  circomlib's IsZero: ``-s * inv = out -   field, 0/1  5% (2 rows each)
            1`` and ``s * out = 0``
``MUL``     ``x * y = z``                            field       8%
``MULADD``  ``(x + c*s) * (y + k) = z``              field       8%
``MUX``     ``bit * (y - x) = z - x``                field       8%
``LIN``     ``z = x + c1*y + c2*s + K`` (C only)     field       6%
==========  ======================================  ==========  ================

``x`` is the newest field-size wire (a chain of multiplications), ``y`` an earlier one (half
from the last 64, half from anywhere), ``s`` a small wire, ``bit`` the newest boolean wire;
``c``, ``c1``, ``c2``, ``k`` come from 256 small constants and ``K`` from 16 field-size ones.
Wires: 0 the constant one, 1 the public output (the last constraint's product), 2 a public
input, 3..6 private inputs (two field-size, two small), then one wire per constraint. The
r1cs's terms are built with numpy, column by column; only the witness is a Python loop (one
step per constraint, about a microsecond each).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cuzk.curves import BLS12_381, Curve
from cuzk.formats.binfile import write_binfile
from cuzk.formats.limbs import ints_to_limbs
from cuzk.formats.wtns import write_wtns

Progress = Callable[[str, int, int], None]
"""``(stage, done, total)``, as :mod:`cuzk.prover.keygen` reports."""

# Gadgets. ISZ1/ISZ2 are IsZero's two rows; the others are one row each.
BOOL, PACK, SMUL, ISZ1, ISZ2, MUL, MULADD, MUX, LIN = range(9)
GADGET_NAMES = ("BOOL", "PACK", "SMUL", "ISZ1", "ISZ2", "MUL", "MULADD", "MUX", "LIN")
# Share of each gadget among those drawn (IsZero drawn once, two rows).
_DRAW = ((BOOL, 32), (PACK, 14), (SMUL, 14), (ISZ1, 5), (MUL, 8), (MULADD, 8), (MUX, 8), (LIN, 6))
# Which operand list a gadget's new wire joins: 0 booleans, 1 small integers, 2 field-size.
C_BOOL, C_SMALL, C_BIG = 0, 1, 2
_CLASS = np.array([C_BOOL, C_SMALL, C_SMALL, C_BIG, C_BOOL, C_BIG, C_BIG, C_BIG, C_BIG], np.int8)

N_PUB_OUT, N_PUB_IN, N_PRV_IN = 1, 1, 4
N_PUBLIC = N_PUB_OUT + N_PUB_IN
OUTPUT_WIRE, FIRST_INTERNAL = 1, 1 + N_PUBLIC + N_PRV_IN
# Operand-eligible input wires by class: the public input and two private inputs are field-size,
# the other two private inputs small.
_INPUT_WIRES = {C_BOOL: [], C_SMALL: [5, 6], C_BIG: [2, 3, 4]}
PREAMBLE_BOOLS = 8  # the first rows are bits, so PACK always finds 8 and MUX/SMUL one
MAX_PACK = 8
RECENT = 64  # half of the "earlier" operands come from this many newest wires of their kind
SMALL_INPUT_BITS = 16
MIN_LOG2, MAX_LOG2 = 5, 28

# The coefficient table: every coefficient is one of these (index -> value).
N_SMALL_CONSTS, N_BIG_CONSTS = 256, 16
K_ONE, K_NEG_ONE = 0, 1
K_NEG_POW2 = 2  # -(2^i), i < MAX_PACK
K_SMALL = K_NEG_POW2 + MAX_PACK  # c
K_NEG_SMALL = K_SMALL + N_SMALL_CONSTS  # -c
K_NEG_BIG = K_NEG_SMALL + N_SMALL_CONSTS  # -K
N_COEFS = K_NEG_BIG + N_BIG_CONSTS

_CHUNK = 1 << 16  # rows serialised per numpy pass (bounds the index arrays' memory)


@dataclass
class SyntheticCircuit:
    """A generated circuit: the r1cs's constraint section (u32 words, ready to write) and the
    witness (``(n_wires, 8)`` u32 limbs, normal form)."""

    log2: int
    seed: int
    curve: Curve
    n_constraints: int
    n_wires: int
    gadgets: np.ndarray  # (n_constraints,) uint8, one of BOOL..LIN per row
    constraint_words: np.ndarray  # (m,) uint32: section 2 of the r1cs
    witness: np.ndarray | None = None
    _rng: np.random.Generator | None = field(default=None, repr=False)
    _operands: _Operands | None = field(default=None, repr=False)
    _coefs: list[int] = field(default_factory=list, repr=False)

    def compute_witness(self, progress: Progress | None = None) -> np.ndarray:
        """The witness (computed once): ``(n_wires, 8)`` u32 limbs, normal form."""
        if self.witness is None:
            assert self._rng is not None and self._operands is not None
            tick = progress or (lambda _stage, _done, _total: None)
            values = _witness(self.curve, self._rng, self.gadgets, self._operands, self._coefs,
                              self.n_wires, tick)
            self.witness = ints_to_limbs(values, self.curve.fr_limbs)
        return self.witness

    @property
    def n_public(self) -> int:
        return N_PUBLIC

    @property
    def domain_size(self) -> int:
        return 1 << (self.n_constraints + N_PUBLIC).bit_length()


def n_constraints_for(log2: int) -> int:
    """The most constraints whose Groth16 domain is 2^log2."""
    if not MIN_LOG2 <= log2 <= MAX_LOG2:
        raise ValueError(f"--constraints-log2 must be {MIN_LOG2}..{MAX_LOG2}, got {log2}")
    return (1 << log2) - 1 - N_PUBLIC


def _gadgets(rng: np.random.Generator, n: int) -> np.ndarray:
    """Each row's gadget: bits first, then draws by share, IsZero as two rows, a MUL last (its
    wire is the public output)."""
    kinds = np.array([g for g, _ in _DRAW], dtype=np.uint8)
    share = np.array([w for _, w in _DRAW], dtype=np.float64)
    drawn = rng.choice(kinds, size=n, p=share / share.sum())
    size = np.where(drawn == ISZ1, 2, 1)
    rows = np.repeat(drawn, size)
    rows[(np.cumsum(size) - 1)[drawn == ISZ1]] = ISZ2  # the second row of each IsZero
    body = n - 1 - PREAMBLE_BOOLS
    out = np.concatenate(
        [np.full(PREAMBLE_BOOLS, BOOL, np.uint8), rows[:body], np.array([MUL], np.uint8)]
    )
    if out[-2] == ISZ1:  # its second row was cut off
        out[-2] = MUL
    return out


def _coefficients(curve: Curve, rng: np.random.Generator) -> tuple[list[int], np.ndarray]:
    r = curve.r
    small = [int(v) for v in rng.integers(2, 1 << 16, size=N_SMALL_CONSTS)]
    big = [int.from_bytes(rng.bytes(curve.n8r), "little") % r for _ in range(N_BIG_CONSTS)]
    values = [1, r - 1]
    values += [r - (1 << i) for i in range(MAX_PACK)]
    values += small + [r - c for c in small] + [r - k for k in big]
    assert len(values) == N_COEFS
    return values, ints_to_limbs(values, curve.fr_limbs)


@dataclass
class _Operands:
    out: np.ndarray  # each row's new wire
    x: np.ndarray
    y: np.ndarray
    s: np.ndarray
    bit: np.ndarray
    pack_m: np.ndarray  # PACK rows: how many bits
    bool_list: np.ndarray  # every boolean wire, oldest first
    bool_count: np.ndarray  # booleans defined before each row
    c1: np.ndarray  # coefficient indices (into the table)
    c2: np.ndarray
    k: np.ndarray


def _operands(rng: np.random.Generator, gadgets: np.ndarray) -> _Operands:
    n = gadgets.shape[0]
    out = np.arange(FIRST_INTERNAL, FIRST_INTERNAL + n, dtype=np.int64)
    out[-1] = OUTPUT_WIRE
    cls = _CLASS[gadgets]
    lists, before = {}, {}
    for c in (C_BOOL, C_SMALL, C_BIG):
        mine = cls == c
        pre = np.asarray(_INPUT_WIRES[c], dtype=np.int64)
        lists[c] = np.concatenate([pre, out[mine]])
        before[c] = pre.shape[0] + np.cumsum(mine) - mine  # of this kind, defined before row

    def earlier(c: int, exclude_newest: bool) -> np.ndarray:
        """A wire of kind ``c`` defined before each row: half recent, half anywhere."""
        avail = np.maximum(before[c] - (1 if exclude_newest else 0), 1)
        span = np.where(rng.random(n) < 0.5, np.minimum(avail, RECENT), avail)
        back = rng.integers(0, 1 << 62, size=n) % span
        return lists[c][np.maximum(avail - 1 - back, 0)]

    x = lists[C_BIG][before[C_BIG] - 1]
    y = earlier(C_BIG, exclude_newest=True)
    s = earlier(C_SMALL, exclude_newest=False)
    s[1:][gadgets[1:] == ISZ2] = s[:-1][gadgets[1:] == ISZ2]  # IsZero's two rows share s
    bit = lists[C_BOOL][np.maximum(before[C_BOOL] - 1, 0)]
    pack_m = np.minimum(rng.integers(2, MAX_PACK + 1, size=n), before[C_BOOL])
    c1 = np.asarray(rng.integers(0, N_SMALL_CONSTS, size=n)) + K_SMALL
    c2 = np.asarray(rng.integers(0, N_SMALL_CONSTS, size=n)) + K_SMALL
    k = np.asarray(rng.integers(0, N_BIG_CONSTS, size=n))
    return _Operands(out, x, y, s, bit, pack_m, lists[C_BOOL], before[C_BOOL], c1, c2, k)


def _row_terms(g: int, rows: np.ndarray, op: _Operands, m: int = 0) -> list[list[tuple]]:
    """The A, B and C terms (wire array, coefficient-index array) of ``rows`` (all gadget g)."""
    one = np.zeros(rows.shape[0], dtype=np.int64)

    def k(index: int) -> np.ndarray:
        return np.full(rows.shape[0], index, dtype=np.int64)

    z, x, y, s, b = op.out[rows], op.x[rows], op.y[rows], op.s[rows], op.bit[rows]
    if g == BOOL:
        return [[(z, k(K_ONE))], [(z, k(K_ONE)), (one, k(K_NEG_ONE))], []]
    if g == PACK:
        first = op.bool_count[rows] - m
        bits = [(op.bool_list[first + i], k(K_NEG_POW2 + i)) for i in range(m)]
        return [[], [], [(z, k(K_ONE)), *bits]]
    if g == SMUL:
        return [[(s, k(K_ONE))], [(b, k(K_ONE))], [(z, k(K_ONE))]]
    if g == ISZ1:  # -s * inv = out - 1, out being the next row's wire
        nxt = op.out[rows + 1]
        return [[(s, k(K_NEG_ONE))], [(z, k(K_ONE))], [(nxt, k(K_ONE)), (one, k(K_NEG_ONE))]]
    if g == ISZ2:  # s * out = 0
        return [[(s, k(K_ONE))], [(z, k(K_ONE))], []]
    if g == MUL:
        return [[(x, k(K_ONE))], [(y, k(K_ONE))], [(z, k(K_ONE))]]
    if g == MULADD:  # (x + c*s) * (y + k) = z
        return [
            [(x, k(K_ONE)), (s, op.c1[rows])],
            [(y, k(K_ONE)), (one, op.c2[rows])],
            [(z, k(K_ONE))],
        ]
    if g == MUX:  # bit * (y - x) = z - x
        return [[(b, k(K_ONE))], [(y, k(K_ONE)), (x, k(K_NEG_ONE))],
                [(z, k(K_ONE)), (x, k(K_NEG_ONE))]]
    if g == LIN:  # 0 = z - x - c1*y - c2*s - K
        neg = N_SMALL_CONSTS
        return [[], [], [
            (z, k(K_ONE)), (x, k(K_NEG_ONE)), (y, op.c1[rows] + neg), (s, op.c2[rows] + neg),
            (one, K_NEG_BIG + op.k[rows]),
        ]]
    raise ValueError(f"unknown gadget {g}")


def _row_words(g: int, m: int, n_limbs: int) -> int:
    terms = {BOOL: 3, PACK: 1 + m, SMUL: 3, ISZ1: 4, ISZ2: 2, MUL: 3, MULADD: 5, MUX: 5, LIN: 5}
    return 3 + terms[g] * (1 + n_limbs)


def _constraint_words(
    gadgets: np.ndarray, op: _Operands, table: np.ndarray, tick: Progress
) -> np.ndarray:
    """Section 2 of the r1cs: per row, for A, B, C, a term count then (wire, value) per term."""
    n, n_limbs = gadgets.shape[0], table.shape[1]
    # Row groups of equal layout: a gadget, and for PACK its bit count.
    key = gadgets.astype(np.int64) * (MAX_PACK + 1) + np.where(gadgets == PACK, op.pack_m, 0)
    lengths = np.zeros(n, dtype=np.int64)
    layouts = [(int(u) // (MAX_PACK + 1), int(u) % (MAX_PACK + 1)) for u in np.unique(key)]
    for g, m in layouts:
        lengths[key == g * (MAX_PACK + 1) + m] = _row_words(g, m, n_limbs)
    start = np.cumsum(lengths) - lengths
    words = np.empty(int(lengths.sum()), dtype=np.uint32)
    for lo in range(0, n, _CHUNK):
        hi = min(n, lo + _CHUNK)
        for g, m in layouts:
            rows = lo + np.flatnonzero(key[lo:hi] == g * (MAX_PACK + 1) + m)
            if rows.size == 0:
                continue
            cols = []
            for lc in _row_terms(g, rows, op, m):
                cols.append(np.full((rows.size, 1), len(lc), dtype=np.uint32))
                for wire, coef in lc:
                    cols.append(wire.astype(np.uint32)[:, None])
                    cols.append(table[coef])
            block = np.hstack(cols)
            words[start[rows][:, None] + np.arange(block.shape[1])] = block
        tick("r1cs", hi, n)
    return words


def _witness(
    curve: Curve, rng: np.random.Generator, gadgets: np.ndarray, op: _Operands,
    coefs: list[int], n_wires: int, tick: Progress,
) -> list[int]:
    """Every wire's value, row by row (the one sequential step)."""
    r = curve.r
    val = [0] * n_wires
    val[0] = 1
    for w in _INPUT_WIRES[C_BIG]:
        val[w] = int.from_bytes(rng.bytes(curve.n8r), "little") % r
    for w in _INPUT_WIRES[C_SMALL]:
        val[w] = int(rng.integers(0, 1 << SMALL_INPUT_BITS))
    bits: list[int] = np.asarray(rng.integers(0, 2, size=gadgets.shape[0])).tolist()
    out, xs, ys, ss, bs = (a.tolist() for a in (op.out, op.x, op.y, op.s, op.bit))
    ms, first = op.pack_m.tolist(), (op.bool_count - op.pack_m).tolist()
    bool_list = op.bool_list.tolist()
    c1 = [coefs[i] for i in op.c1.tolist()]
    c2 = [coefs[i] for i in op.c2.tolist()]
    big_k = [r - coefs[K_NEG_BIG + i] for i in op.k.tolist()]
    inverse: dict[int, int] = {0: 0}  # IsZero's inv is 0 when s is
    n = gadgets.shape[0]
    step = max(1, n // 64)
    for i, g in enumerate(gadgets.tolist()):
        if g == BOOL:
            v = bits[i]
        elif g == MUL:
            v = val[xs[i]] * val[ys[i]] % r
        elif g == PACK:
            f = first[i]
            v = 0
            for j in range(ms[i]):
                v += val[bool_list[f + j]] << j
        elif g == SMUL:
            v = val[ss[i]] * val[bs[i]]
        elif g == MULADD:
            v = (val[xs[i]] + c1[i] * val[ss[i]]) * (val[ys[i]] + c2[i]) % r
        elif g == MUX:
            v = val[ys[i]] if val[bs[i]] else val[xs[i]]
        elif g == LIN:
            v = (val[xs[i]] + c1[i] * val[ys[i]] + c2[i] * val[ss[i]] + big_k[i]) % r
        elif g == ISZ1:
            sv = val[ss[i]]
            v = inverse[sv] if sv in inverse else inverse.setdefault(sv, pow(sv, -1, r))
        else:  # ISZ2
            v = 1 if val[ss[i]] == 0 else 0
        val[out[i]] = v
        if i % step == 0:
            tick("witness", i, n)
    tick("witness", n, n)
    return val


def generate(
    log2: int, seed: int = 0, progress: Progress | None = None, witness: bool = True
) -> SyntheticCircuit:
    """The circuit of domain 2^log2 for ``seed`` (the same seed, the same files)."""
    tick = progress or (lambda _stage, _done, _total: None)
    n = n_constraints_for(log2)
    curve = BLS12_381
    rng = np.random.default_rng([seed, log2])
    gadgets = _gadgets(rng, n)
    coefs, table = _coefficients(curve, rng)
    op = _operands(rng, gadgets)
    words = _constraint_words(gadgets, op, table, tick)
    n_wires = FIRST_INTERNAL + n - 1
    circuit = SyntheticCircuit(log2, seed, curve, n, n_wires, gadgets, words, None, rng, op, coefs)
    if witness:
        circuit.compute_witness(progress)
    return circuit


def write_r1cs(path: str | Path, circuit: SyntheticCircuit) -> None:
    """circom's ``.r1cs`` (version 1): header, constraints, wire-to-label map (label = wire)."""
    curve = circuit.curve
    header = b"".join([
        curve.n8r.to_bytes(4, "little"),
        curve.r.to_bytes(curve.n8r, "little"),
        *(v.to_bytes(4, "little") for v in (circuit.n_wires, N_PUB_OUT, N_PUB_IN, N_PRV_IN)),
        circuit.n_wires.to_bytes(8, "little"),  # labels
        circuit.n_constraints.to_bytes(4, "little"),
    ])
    labels = np.arange(circuit.n_wires, dtype="<u8")
    write_binfile(path, "r1cs", 1, [(1, [header]), (2, [circuit.constraint_words]), (3, [labels])])


@dataclass(frozen=True)
class Density:
    """How circom-like a circuit is: terms per row of A, B and C, and witness values by size."""

    n_constraints: int
    terms_per_row: tuple[float, float, float]
    max_terms: int
    share_bool: float  # witness values 0 or 1
    share_small: float  # below 2^32, not 0/1
    share_big: float  # the rest

    def summary(self) -> str:
        a, b, c = self.terms_per_row
        return (
            f"terms per row A {a:.2f} B {b:.2f} C {c:.2f} (max {self.max_terms}); witness"
            f" 0/1 {self.share_bool:.0%}, other below 2^32 {self.share_small:.0%},"
            f" field-size {self.share_big:.0%}"
        )


def density(r1cs, witness: np.ndarray) -> Density:
    """The density figures of a circuit read back (``cuzk.formats.r1cs.read_r1cs``) and its
    witness limbs."""
    cons = r1cs.constraints
    n = r1cs.n_constraints
    per = np.bincount(
        cons.constraint.astype(np.int64) * 3 + cons.matrix, minlength=3 * n
    ).reshape(n, 3)
    w = np.asarray(witness)
    high_zero = ~w[:, 1:].any(axis=1)
    is_bool = high_zero & (w[:, 0] <= 1)
    total = w.shape[0]
    return Density(
        n_constraints=n,
        terms_per_row=tuple(float(v) for v in per.mean(axis=0)),  # type: ignore[arg-type]
        max_terms=int(per.max()),
        share_bool=float(is_bool.sum()) / total,
        share_small=float((high_zero & ~is_bool).sum()) / total,
        share_big=float((~high_zero).sum()) / total,
    )


@dataclass
class SynthResult:
    r1cs: Path
    wtns: Path
    zkey: Path | None
    vk: Path | None
    times: dict[str, float]
    circuit: SyntheticCircuit


def synthesize_files(
    out_dir: Path,
    log2: int,
    seed: int = 0,
    progress: Progress | None = None,
    key: bool = True,
    on_step: Callable[[str, float], None] | None = None,
) -> SynthResult:
    """Write ``circuit.r1cs``, ``witness.wtns`` and (``key``) ``circuit.zkey`` with its
    ``circuit.vk.json`` into ``out_dir``; ``on_step(name, seconds)`` after each step."""
    from cuzk.prover.keystore import generate_zkey, vk_path_for

    done = on_step or (lambda _name, _s: None)
    times: dict[str, float] = {}

    def timed(name: str, t0: float) -> None:
        times[name] = time.perf_counter() - t0
        done(name, times[name])

    out_dir.mkdir(parents=True, exist_ok=True)
    r1cs_path, wtns_path = out_dir / "circuit.r1cs", out_dir / "witness.wtns"
    t0 = time.perf_counter()
    circuit = generate(log2, seed, progress, witness=False)
    write_r1cs(r1cs_path, circuit)
    timed("r1cs", t0)
    t0 = time.perf_counter()
    write_wtns(wtns_path, circuit.compute_witness(progress), circuit.curve)
    timed("witness", t0)
    zkey = vk = None
    if key:
        t0 = time.perf_counter()
        zkey = generate_zkey(r1cs_path, out_dir / "circuit.zkey", progress, vk=True)
        vk = vk_path_for(zkey)
        timed("keygen", t0)
    return SynthResult(r1cs_path, wtns_path, zkey, vk, times, circuit)

