"""Native MSM figures: each MSM of a bundled kind (A, B1, C, H in G1, B2 in G2) with the proof's
real scalars, batch-affine bucket accumulation against XYZZ-only buckets, 1 and 2 threads.

Usage: python benchmarks/bench_msm.py [--kinds porep-c2 winning-post] [--repeat 3]
       [--batch 1024] [--min-points 4096]
The keys must exist (``cuzk keys make KIND`` or any ``cuzk prove KIND``). Old and new runs are
interleaved; prints min..max milliseconds over the runs. Prints figures only; the tests assert
correctness, never timings.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from cuzk.circuits.registry import bundled_circuits
from cuzk.prover import native_msm
from cuzk.prover.circuit import Circuit
from cuzk.prover.cpu_backend import CpuBackend
from cuzk.prover.groth16 import synthesize
from cuzk.prover.keys import ProvingKey

KEYS = Path("~/.cache/cuzk/keys").expanduser()


def proof_scalars(kind: str, zkey: Path, tables: bool) -> tuple[ProvingKey, dict[str, np.ndarray]]:
    """The key of a bundled kind and the scalars of its five MSMs in one proof of the kind's
    sample input (the witness; H's evaluations for H)."""
    b = bundled_circuits()[kind]
    key = ProvingKey.load(zkey, tables=tables)
    circuit = Circuit.load(b.r1cs_path, b.wasm_path, kind)
    synth = synthesize(key, circuit, json.loads(Path(b.sample_input_path).read_text()))
    a, bb, c = synth.abc
    w = synth.witness
    h = CpuBackend().h_evaluations(key, a, bb, c)
    return key, {"A": w, "B1": w, "C": w[key.sizes.n_public + 1:], "H": h, "B2": w}


def _scalars(kind: str, tables: bool) -> tuple[ProvingKey, dict[str, np.ndarray]]:
    zkeys = sorted(KEYS.glob(f"{kind}-*.zkey"))
    if not zkeys:
        raise SystemExit(f"no key for {kind} in {KEYS}: run `cuzk keys make {kind}` first")
    return proof_scalars(kind, zkeys[0], tables)


def _run(key: ProvingKey, name: str, scalars: np.ndarray, threads: int, cpu: bool) -> float:
    """Milliseconds of one MSM: CPU time of the process (all its threads: robust to other
    processes' load) when ``cpu``, else wall time."""
    clock = time.process_time if cpu else time.perf_counter
    t0 = clock()
    if name == "B2":
        key.msm_b2(scalars, threads)
    else:
        key.msm_g1(name, scalars, threads)
    return (clock() - t0) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", nargs="+", default=["porep-c2", "winning-post"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--batch", type=int, default=None, help="bucket batch size (default: built-in)")
    ap.add_argument("--min-g1", type=int, default=None, help="smallest G1 batch that batches")
    ap.add_argument("--min-g2", type=int, default=None, help="smallest G2 batch that batches")
    ap.add_argument("--tables", action="store_true", help="with precomputed window tables")
    ap.add_argument("--cpu", action="store_true", help="CPU time (all threads) instead of wall")
    args = ap.parse_args()
    default = native_msm.batch_affine(0, 0, 0)
    new = (args.batch or default[0], default[1] if args.min_g1 is None else args.min_g1,
           default[2] if args.min_g2 is None else args.min_g2)
    native_msm.batch_affine(*default)
    print(f"arith {native_msm.arith_path()}, load {os.getloadavg()[0]:.2f}, "
          f"{'CPU' if args.cpu else 'wall'} time, "
          f"batch {new[0]}, smallest batch G1 {new[1]} G2 {new[2]}, tables {args.tables}")
    for kind in args.kinds:
        key, scalars = _scalars(kind, args.tables)
        for name in ("A", "B1", "C", "H", "B2"):
            for threads in args.threads:
                old_ms: list[float] = []
                new_ms: list[float] = []
                _run(key, name, scalars[name], threads, args.cpu)  # warm the mapping
                for _ in range(args.repeat):
                    native_msm.batch_affine(0, 0, 0)
                    old_ms.append(_run(key, name, scalars[name], threads, args.cpu))
                    native_msm.batch_affine(*new)
                    new_ms.append(_run(key, name, scalars[name], threads, args.cpu))
                native_msm.batch_affine(*default)
                print(f"{kind:13s} {name:3s} n={key.msm_points(name):6d} t={threads} "
                      f"xyzz {min(old_ms):8.1f}..{max(old_ms):8.1f} ms  "
                      f"batch-affine {min(new_ms):8.1f}..{max(new_ms):8.1f} ms  "
                      f"speed-up {min(old_ms) / min(new_ms):.2f}x (best of each)")
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
