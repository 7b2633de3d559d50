"""Per-MSM figures for one proof's five MSMs: py_arkworks_bls12381 (the CPU prover before the
native MSM) against the native MSM on one thread, with and without window tables, and on every
core; side by side in one run, over the real scalars of a proof (witness, and H's evaluations).

Usage: python benchmarks/bench_msm_vs_arkworks.py [KIND] [--repeat 3]   (KIND: a bundled proof kind,
default porep-c2). Prints every run's milliseconds as min-max and the speed-ups of the
medians; the tests assert correctness, never timings. (benchmarks/bench_msm.py compares the
native MSM's bucket strategies with each other.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_msm import proof_scalars  # benchmarks/ is this script's directory
from py_arkworks_bls12381 import G1Point, G2Point

from cuzk.circuits.registry import bundled_circuits
from cuzk.prover import native_msm
from cuzk.prover.cpu_schedule import cores
from cuzk.prover.keys import ProvingKey
from cuzk.prover.keystore import DEFAULT_KEYS_DIR, ensure_zkey
from cuzk.prover.points import g1_from_mont_array, g2_from_mont_array, scalars_from_array

SECTIONS = ("A", "B1", "C", "H", "B2")


def _times(fn: Callable[[], Any], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def _arkworks(points: np.ndarray, scalars: np.ndarray, g2: bool) -> Callable[[], Any]:
    """One-thread arkworks multiexp as the prover called it: Python points and scalars built
    from the arrays on every call (only rows with a point and a non-zero scalar)."""
    from cuzk.curves import CURVES

    curve = CURVES["bls12381"]
    convert = g2_from_mont_array if g2 else g1_from_mont_array
    objs = convert(curve, points)
    kind = G2Point if g2 else G1Point
    present = points.reshape(points.shape[0], -1).any(axis=1)

    def run() -> Any:
        rows = np.flatnonzero(scalars.any(axis=1) & present)
        return kind.multiexp_unchecked([objs[i] for i in rows], scalars_from_array(scalars[rows]))

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", nargs="?", default="porep-c2")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if not native_msm.available():
        raise SystemExit("the native MSM extension is not built (pip install -e .)")
    c = bundled_circuits()[args.kind]
    zkey = ensure_zkey(args.kind, Path(c.r1cs_path), DEFAULT_KEYS_DIR)
    plain, scalars = proof_scalars(args.kind, zkey, tables=False)
    tabled = ProvingKey.load(zkey, tables=True)
    arrays = {"A": plain.zkey.a, "B1": plain.zkey.b1, "B2": plain.zkey.b2, "C": plain.zkey.c,
              "H": plain.zkey.h}
    n = cores()
    print(f"{args.kind}: MSM milliseconds over {args.repeat} runs (min-max), "
          f"field multiply {native_msm.arith_path()}, {n} cores, load "
          f"{os.getloadavg()[0]:.2f}")
    print(f"{'MSM':<4} {'points':>7} {'arkworks 1t':>14} {'native 1t':>14} {'tables 1t':>14} "
          f"{f'native {n}t':>14}  {'native/ark':>10} {'tables/ark':>10}")
    for name in SECTIONS:
        sc = scalars[name]
        g2 = name == "B2"

        def native(key: ProvingKey, threads: int, name: str = name, sc: Any = sc) -> Callable:
            if name == "B2":
                return lambda: key.msm_b2(sc, threads)
            return lambda: key.msm_g1(name, sc, threads)

        ark = _arkworks(arrays[name], sc, g2)
        assert ark() == native(plain, 1)(), f"{name}: native and arkworks disagree"
        runs = {
            "ark": _times(ark, args.repeat),
            "nat": _times(native(plain, 1), args.repeat),
            "tab": _times(native(tabled, 1), args.repeat),
            "par": _times(native(plain, n), args.repeat),
        }
        med = {k: statistics.median(v) for k, v in runs.items()}
        cells = " ".join(f"{min(v):6.0f}-{max(v):<7.0f}" for v in runs.values())
        print(f"{name:<4} {plain.msm_points(name):>7} {cells} "
              f"{med['ark'] / med['nat']:>9.2f}x {med['ark'] / med['tab']:>9.2f}x")
    print(f"tables: {tabled.table_bytes / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
