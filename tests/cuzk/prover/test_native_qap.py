"""The native QAP steps (cuzk/prover/_native/qap.c) against the numba kernels (kernels/qap.py),
which tests/kernels/test_kernels_qap.py checks against big-int transcriptions of snarkjs: the
same bytes on random and edge values, both multiply paths, any thread count, the same errors."""

from __future__ import annotations

import functools
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator

import numpy as np
import pytest

from cuzk.curves import BLS12_381
from cuzk.prover import native_msm, native_qap
from cuzk.prover import qap as prover_qap
from kernels import qap as numba_qap
from kernels.field import FR

R = BLS12_381.r
EDGES = [0, 1, R - 1, (1 << 256) % R, R - 2]


@pytest.fixture(params=["auto", "portable"])
def arith(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test runs on the fast multiply (where the CPU has it) and on the portable one."""
    assert native_qap.available(), "the native QAP extension is not built (make / pip install -e .)"
    native_msm.configure(request.param)
    try:
        yield request.param
    finally:
        native_msm.configure("auto")


def _fr(rng: np.random.Generator, n: int) -> np.ndarray:
    """n reduced Fr elements (uniform below 2^254 < r), the edge values first."""
    x = rng.integers(0, 1 << 32, size=(n, 8), dtype=np.uint32)
    x[:, 7] &= 0x3FFFFFFF
    edges = FR.from_ints(EDGES)[: min(n, len(EDGES))]
    x[: len(edges)] = edges
    return x


@functools.cache
def _h_case(log_n: int) -> tuple[np.ndarray, ...]:
    """Random a, b, c with the edge values, and numba's H of them (once for both paths)."""
    rng = np.random.default_rng(log_n)
    n = 1 << log_n
    a, b, c = _fr(rng, n), _fr(rng, n), _fr(rng, n)
    rng.shuffle(b)                                   # edge values meet other values too
    return a, b, c, numba_qap.h_evaluations(a, b, c, log_n)


@pytest.mark.parametrize("log_n", [1, 2, 3, 5, 11, 12, 13, 15])
def test_h_evaluations_bit_identical(arith: str, log_n: int) -> None:
    a, b, c, want = _h_case(log_n)
    n = 1 << log_n
    # 64 threads: more than rows for the small sizes; the largest size only on the plans it uses
    for threads in (1, 2, 3) if log_n > 13 else (1, 2, 3, 6, 64):
        got = native_qap.h_evaluations(a, b, c, log_n, threads=threads)
        assert got.dtype == np.uint32 and got.shape == (n, 8)
        assert np.array_equal(got, want), f"2^{log_n}, {threads} threads"


def test_h_evaluations_every_thread_plan(arith: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plans h_plan never picks today (2 groups: one takes two polynomials) still agree."""
    log_n = 12
    rng = np.random.default_rng(99)
    a, b, c = (_fr(rng, 1 << log_n) for _ in range(3))
    want = numba_qap.h_evaluations(a, b, c, log_n)
    for plan in ((2, 1), (2, 2), (1, 4), (3, 2), (1, 64)):
        monkeypatch.setattr(native_qap, "h_plan", lambda _log_n, _t, p=plan: p)
        assert np.array_equal(native_qap.h_evaluations(a, b, c, log_n), want), plan


def test_h_plan_shapes() -> None:
    assert native_qap.h_plan(11, 8) == (1, 1)       # small: one thread
    assert native_qap.h_plan(16, 1) == (1, 1)
    assert native_qap.h_plan(16, 2) == (1, 2)       # two threads split each transform
    assert native_qap.h_plan(16, 3) == (3, 1)       # three: a, b, c side by side
    assert native_qap.h_plan(16, 7) == (3, 2)
    assert native_qap.h_plan(12, 64) == (3, 16)


def test_h_bytes_is_the_measured_peak() -> None:
    """What the step estimates count for H (its scratch goes through PyMem_RawMalloc, which
    tracemalloc sees) is what it holds, on each plan (the estimates add their own slack)."""
    log_n = 13
    a, b, c, _ = _h_case(log_n)
    tracemalloc.start()
    try:
        for threads in (1, 2, 3, 6):
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            native_qap.h_evaluations(a, b, c, log_n, threads=threads)
            peak = tracemalloc.get_traced_memory()[1] - base
            want = native_qap.h_bytes(log_n, threads)
            # beside the vectors: the constants, the array header (a few hundred bytes)
            assert abs(peak - want) <= 4096, (threads, peak, want)
    finally:
        tracemalloc.stop()


def _system(rng: np.random.Generator, n: int, n_vars: int, m: int):
    matrix = rng.integers(0, 2, size=m, dtype=np.uint32)
    constraint = rng.integers(0, max(1, n - 1), size=m, dtype=np.uint32)
    constraint[:3] = n - 1                           # the last row is used too
    signal = rng.integers(0, n_vars, size=m, dtype=np.uint32)
    values = _fr(rng, m)
    witness = _fr(rng, n_vars)
    witness[0] = FR.from_ints([1])[0]
    return matrix, constraint, signal, values, witness


@pytest.mark.parametrize("log_n", [1, 4, 12, 14])
def test_build_abc_bit_identical(arith: str, log_n: int) -> None:
    n = 1 << log_n
    rng = np.random.default_rng(100 + log_n)
    system = _system(rng, n, 50, 4 * n)
    want = numba_qap.build_abc(*system, n, threads=1)
    for threads in (1, 2, 3, 64):
        got = native_qap.build_abc(*system, n, threads=threads)
        for name, x, y in zip("abc", got, want, strict=True):
            assert np.array_equal(x, y), f"{name}, 2^{log_n}, {threads} threads"


def test_build_abc_reads_unaligned_and_strided_input(arith: str) -> None:
    """A witness mapped from a file may be only 4-byte aligned; coefficients may be strided."""
    n = 1 << 5
    rng = np.random.default_rng(7)
    matrix, constraint, signal, values, witness = _system(rng, n, 9, 3 * n)
    raw = np.zeros(witness.size + 1, np.uint32)
    raw[1:] = witness.ravel()
    unaligned = raw[1:].reshape(witness.shape)
    assert unaligned.ctypes.data % 8 == 4
    wide = np.zeros((3 * n, 2), np.uint32)
    wide[:, 0] = constraint
    want = numba_qap.build_abc(matrix, constraint, signal, values, witness, n)
    got = native_qap.build_abc(matrix, wide[:, 0], signal, values, unaligned, n)
    assert all(np.array_equal(x, y) for x, y in zip(got, want, strict=True))


def _words(x: int) -> np.ndarray:
    """Any 256-bit value as 8 limbs (FR.from_ints refuses the unreduced ones)."""
    return np.frombuffer(x.to_bytes(32, "little"), "<u4")


def _bad_inputs():
    rng = np.random.default_rng(3)
    n = 8
    ok = _system(rng, n, 5, 12)

    def with_(i: int, fn):
        parts = [p.copy() for p in ok]
        fn(parts[i])
        return (*parts, n)

    def unreduce(x):
        x[4] = _words(R)

    return {
        "matrix 2": with_(0, lambda x: x.__setitem__(5, 2)),
        "constraint out of domain": with_(1, lambda x: x.__setitem__(6, n)),
        "signal past the witness": with_(2, lambda x: x.__setitem__(7, 5)),
        "unreduced coefficient": with_(3, unreduce),
        "unreduced witness": with_(4, unreduce),
        "short signal array": (ok[0], ok[1], ok[2][:-1], ok[3], ok[4], n),
        "values of wrong dtype": (ok[0], ok[1], ok[2], ok[3].astype(np.uint64), ok[4], n),
    }


@pytest.mark.parametrize("case", list(_bad_inputs()))
def test_build_abc_errors_match(case: str) -> None:
    args = _bad_inputs()[case]
    with pytest.raises(ValueError) as want:
        numba_qap.build_abc(*args)
    with pytest.raises(ValueError) as got:
        native_qap.build_abc(*args)
    assert str(got.value) == str(want.value)


def test_h_evaluations_errors_match() -> None:
    rng = np.random.default_rng(4)
    a = _fr(rng, 8)
    for args in ((a, a, a[:4], 3), (a, a.astype(np.int32), a, 3)):
        with pytest.raises(ValueError) as want:
            numba_qap.h_evaluations(*args)
        with pytest.raises(ValueError) as got:
            native_qap.h_evaluations(*args)
        assert str(got.value) == str(want.value)


def test_first_unreduced_at_the_modulus() -> None:
    x = FR.from_ints([0, R - 1, 5])
    assert native_qap.first_unreduced(x) == -1
    for bad in (R, R + 1, (1 << 256) - 1, R + (1 << 192), 1 << 255):
        y = x.copy()
        y[2] = _words(bad)
        assert native_qap.first_unreduced(y) == 2 == FR.first_unreduced(y)


def test_prover_falls_back_to_numba_without_the_extension(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    system = _system(rng, 16, 6, 40)
    native = prover_qap.build_abc(*system, 16)
    h_native = prover_qap.h_evaluations(*native, 4)
    monkeypatch.setattr(native_qap, "_qap", None)
    assert not prover_qap.native()
    fallback = prover_qap.build_abc(*system, 16)
    assert all(np.array_equal(x, y) for x, y in zip(native, fallback, strict=True))
    assert np.array_equal(prover_qap.h_evaluations(*fallback, 4), h_native)


def test_native_qap_imports_no_numba() -> None:
    """A one-proof `cuzk prove` must not pay numba's import for the QAP steps (the package's own
    __init__ is left out: it imports the whole prover, a separate concern)."""
    code = (
        "import importlib, importlib.util, sys, types\n"
        "import cuzk\n"
        "spec = importlib.util.find_spec('cuzk.prover')\n"
        "pkg = types.ModuleType('cuzk.prover')\n"
        "pkg.__path__ = list(spec.submodule_search_locations)\n"
        "sys.modules['cuzk.prover'] = pkg\n"
        "importlib.import_module('cuzk.prover.qap')\n"
        "assert importlib.import_module('cuzk.prover.native_qap').available()\n"
        "print(sorted(m for m in sys.modules if m == 'numba' or m.startswith('numba.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "[]"
