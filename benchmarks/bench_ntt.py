"""CPU kernel figures: NTT milliseconds at 2^12..2^18 (1 and 2 threads) and Fr/Fq mont_mul rates.

Usage: python benchmarks/bench_ntt.py [--min-log 12] [--max-log 18] [--repeat 5]
Prints figures only; the tests assert correctness, never timings.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from kernels import ntt, qap
from kernels._threads import cpu_count
from kernels.field import FQ, FR, Field


def _best_ms(fn, repeat: int) -> float:
    fn()  # compile / warm caches and twiddle tables
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def _random_elems(f: Field, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2**32, size=(n, f.limbs), dtype=np.uint32)
    a[:, -1] %= np.uint32(f.p >> (32 * (f.limbs - 1)))   # below p: top limb under p's top limb
    return a


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-log", type=int, default=12)
    ap.add_argument("--max-log", type=int, default=18)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    threads = sorted({1, min(2, cpu_count())})
    print(f"cores available: {cpu_count()}")
    header = "  ".join(f"fft {t}t ms".rjust(11) for t in threads)
    header += "  " + "  ".join(f"H(3 polys) {t}t ms".rjust(18) for t in threads)
    print(f"{'size':>6}  {header}")
    for log_n in range(args.min_log, args.max_log + 1):
        x = _random_elems(FR, 1 << log_n, log_n)
        row = [f"{_best_ms(lambda t=t, x=x: ntt.fft(x, threads=t), args.repeat):11.2f}"
               for t in threads]
        for t in threads:
            ms = _best_ms(lambda t=t, x=x, k=log_n: qap.h_evaluations(x, x, x, k, threads=t), 1)
            row.append(f"{ms:18.2f}")
        print(f"  2^{log_n:<2}  " + "  ".join(row))
    n = 1 << 18
    for f in (FR, FQ):
        a, b = _random_elems(f, n, 1), _random_elems(f, n, 2)
        for t in threads:
            ms = _best_ms(lambda a=a, b=b, t=t, f=f: f.mul(a, b, threads=t), args.repeat)
            add_ms = _best_ms(lambda a=a, b=b, t=t, f=f: f.add(a, b, threads=t), args.repeat)
            print(f"{f.params.name} mont_mul {t}t: {n / ms * 1e3 / 1e6:6.2f} M ops/s "
                  f"({ms * 1e6 / n:5.1f} ns/op);  add: {add_ms * 1e6 / n:5.1f} ns/op")


if __name__ == "__main__":
    main()
