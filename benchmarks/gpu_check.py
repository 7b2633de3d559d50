"""GPU figures for issue 5, on a machine with an NVIDIA GPU (run through gpu_check.sh).

Installs nothing. Every GPU result is compared with the CPU path at every size before its time
is reported; a mismatch is recorded (``"match": false``) and makes the exit status non-zero.
Sections are independent: a failure in one is written to the JSON and the next one runs, so the
kernel figures come out even when the engine part cannot run.

  NTT   2^16..2^24: forward NTT (natural order, device-resident, incl. the bit-reversal gather),
        and the H pipeline (3 x odd-coset NTT + joinABC) vs kernels.ntt / kernels.qap.
  MSM   2^16..2^24: G1 MSM with device-resident points and scalars, random scalars < 2^254,
        vs arkworks. Points: P_i = (i+1) G for i < 2^20, repeated beyond 2^20 (host point
        generation is the slow part); scalars repeat with the same period, so the reference is
        (m / period) * MSM_cpu(first period).
  proofs: each bundled circuit, gpu_phase on CudaBackend vs CpuBackend, the proof self-verified.
  engine: a backlog through the engine on the CUDA backend: per-worker busy fraction.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MAX_PERIOD = 1 << 20


def _timed(fn: Callable[[], Any], sync: Callable[[], None], repeats: int) -> tuple[Any, float]:
    """(last result, median ms) over ``repeats`` runs after one warm-up run."""
    out = fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return out, statistics.median(times)


def _rand_fr_mont(n: int, seed: int) -> np.ndarray:
    from kernels.field import FR

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 1 << 32, size=(n, 8), dtype=np.uint64).astype(np.uint32)
    x[:, 7] &= 0x3FFFFFFF                      # < 2^254 < r: a valid Fr element
    return FR.to_mont(x, threads=os.cpu_count() or 1)


def section_ntt(sizes: list[int], repeats: int) -> dict[str, Any]:
    import cupy

    from kernels import ntt as cpu_ntt
    from kernels import qap
    from kernels.gpu.launch import Executor
    from kernels.gpu.ntt import NttEngine
    from kernels.gpu.runtime import cuda_target

    stream = cupy.cuda.Stream(non_blocking=True)
    eng = NttEngine(Executor(cuda_target(), cupy, stream=stream))
    res: dict[str, Any] = {}
    with stream:
        for log_n in sizes:
            n = 1 << log_n
            a = _rand_fr_mont(n, log_n)
            x = eng.to_limb_major(cupy.asarray(a))
            eng.twiddles(log_n)
            y, ms = _timed(lambda x=x: eng.forward(x), stream.synchronize, repeats)
            got = eng.from_limb_major(y).get()
            match = bool(np.array_equal(got, cpu_ntt.fft(a)))
            b, c = _rand_fr_mont(n, log_n + 100), _rand_fr_mont(n, log_n + 200)
            dev = [cupy.asarray(v) for v in (a, b, c)]

            def h(dev=dev):
                return eng.h_from_abc(*(eng.to_limb_major(v) for v in dev))

            hout, h_ms = _timed(h, stream.synchronize, repeats)
            h_match = bool(np.array_equal(hout.get(), qap.h_evaluations(a, b, c, log_n)))
            res[f"2^{log_n}"] = {"forward_ms": round(ms, 4), "match": match,
                                 "h_pipeline_ms": round(h_ms, 4), "h_match": h_match}
            print(f"NTT 2^{log_n}: {ms:.3f} ms (match={match}); H {h_ms:.3f} ms "
                  f"(match={h_match})", flush=True)
            del x, y, dev, hout
            cupy.get_default_memory_pool().free_all_blocks()
    return res


def _points(period: int) -> tuple[list, np.ndarray]:
    from py_arkworks_bls12381 import G1Point

    from cuzk.curves import BLS12_381
    from cuzk.prover.points import g1_to_mont_array

    g = G1Point()
    pts = [g]
    for _ in range(period - 1):
        pts.append(pts[-1] + g)
    rows = g1_to_mont_array(BLS12_381, pts).reshape(period, 24)
    return pts, rows


def section_msm(sizes: list[int], repeats: int) -> dict[str, Any]:
    import cupy
    from py_arkworks_bls12381 import G1Point, Scalar

    from cuzk.prover.msm import msm as cpu_msm
    from kernels.gpu.launch import Executor
    from kernels.gpu.msm import MsmEngine, choose_window
    from kernels.gpu.runtime import cuda_target

    period = min(MAX_PERIOD, 1 << max(sizes))
    t0 = time.perf_counter()
    pts, rows = _points(period)
    print(f"MSM: {period} host points in {time.perf_counter() - t0:.1f}s", flush=True)
    rng = np.random.default_rng(7)
    sc_period = rng.integers(0, 1 << 32, size=(period, 8), dtype=np.uint64).astype(np.uint32)
    sc_period[:, 7] &= 0x3FFFFFFF
    ref_cache: dict[int, Any] = {}
    stream = cupy.cuda.Stream(non_blocking=True)
    eng = MsmEngine(Executor(cuda_target(), cupy, stream=stream))
    res: dict[str, Any] = {}
    with stream:
        for log_m in sizes:
            m = 1 << log_m
            p = min(m, period)
            reps = m // p
            d_pts = cupy.asarray(np.tile(rows[:p], (reps, 1)))
            d_sc = cupy.asarray(np.tile(sc_period[:p], (reps, 1)))
            got, ms = _timed(lambda d_pts=d_pts, d_sc=d_sc: eng.msm(d_pts, d_sc),
                             stream.synchronize, repeats)
            if p not in ref_cache:
                ref_cache[p] = cpu_msm(pts[:p], sc_period[:p], G1Point.identity())
            want = ref_cache[p] * Scalar(reps)
            match = bool(got == want)
            res[f"2^{log_m}"] = {"ms": round(ms, 3), "match": match, "window": choose_window(m),
                                 "distinct_points": p}
            print(f"MSM 2^{log_m}: {ms:.2f} ms (c={choose_window(m)}, match={match})", flush=True)
            del d_pts, d_sc
            cupy.get_default_memory_pool().free_all_blocks()
    return res


def section_proofs(budget_s: float) -> dict[str, Any]:
    from cuzk.circuits.registry import bundled_circuits
    from cuzk.prover import Circuit, CpuBackend, ProvingKey, finalize, gpu_phase, synthesize
    from cuzk.prover.cuda_backend import CudaBackend
    from cuzk.prover.keystore import ensure_zkey

    keys_dir = Path(os.environ.get("CUZK_TEST_KEYS_DIR", ROOT / ".cache" / "keys"))
    cuda, cpu = CudaBackend(0), CpuBackend()
    out: dict[str, Any] = {}
    start = time.perf_counter()
    for kind, c in bundled_circuits().items():
        if time.perf_counter() - start > budget_s:
            out[kind] = {"skipped": f"time budget of {budget_s:.0f}s spent"}
            continue
        try:
            t0 = time.perf_counter()
            key = ProvingKey.load(ensure_zkey(kind, Path(c.r1cs_path), keys_dir))
            circuit = Circuit.load(c.r1cs_path, c.wasm_path, kind)
            inputs = json.loads(Path(c.sample_input_path).read_text())
            setup_s = time.perf_counter() - t0
            synth = synthesize(key, circuit, inputs)
            device_bytes = cuda.upload_key(key)
            gpu_phase(key, synth, cuda)                         # warm-up (kernel JIT)
            t0 = time.perf_counter()
            g_gpu = gpu_phase(key, synth, cuda)
            gpu_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            g_cpu = gpu_phase(key, synth, cpu)
            cpu_s = time.perf_counter() - t0
            same = all(getattr(g_gpu, f) == getattr(g_cpu, f) for f in ("a", "b1", "c", "h"))
            t0 = time.perf_counter()
            finalize(key, synth, g_gpu)                         # raises if it does not verify
            fin_s = time.perf_counter() - t0
            out[kind] = {"domain": key.sizes.domain_size, "gpu_phase_cuda_s": round(gpu_s, 4),
                         "gpu_phase_cpu_s": round(cpu_s, 4),
                         "speedup": round(cpu_s / gpu_s, 2) if gpu_s else None,
                         "match": same, "verified": True, "finalize_s": round(fin_s, 4),
                         "key_setup_s": round(setup_s, 2), "device_key_bytes": device_bytes}
            print(f"proof {kind}: cuda {gpu_s:.3f}s cpu {cpu_s:.3f}s match={same}", flush=True)
            cuda.drop_key(key)
        except Exception:
            out[kind] = {"error": traceback.format_exc(limit=8)}
            print(f"proof {kind}: FAILED\n{out[kind]['error']}", flush=True)
    return out


def section_engine(jobs: int) -> dict[str, Any]:
    from dataclasses import replace

    from cuzk.cli import bench_engine as bench
    from cuzk.engine.real_prover import RealProver
    from cuzk.engine.settings import EngineSettings, default_proof_kinds

    settings = EngineSettings(proof_kinds=default_proof_kinds(), backend="cuda",
                              finalizer_threads=max(2, (os.cpu_count() or 4) // 2))
    inputs = bench._real_inputs(settings)
    backlog = bench._backlog(settings, jobs, 0)
    result = bench.run_once("cuda split", replace(settings), RealProver(settings), backlog, inputs)
    return result.summary()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "benchmarks" / "out"))
    ap.add_argument("--min-log", type=int, default=16)
    ap.add_argument("--max-log", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--proof-budget-s", type=float, default=240.0)
    ap.add_argument("--engine-jobs", type=int, default=12)
    ap.add_argument("--skip", default="", help="sections to skip, e.g. proofs,engine")
    args = ap.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    sizes = list(range(args.min_log, args.max_log + 1))
    skip = set(filter(None, args.skip.split(",")))
    report: dict[str, Any] = {"host": platform.node(),
                              "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        report["device"] = {"name": props["name"].decode(),
                            "cc": f"{props['major']}.{props['minor']}",
                            "memory_bytes": int(props["totalGlobalMem"]),
                            "driver": cupy.cuda.runtime.driverGetVersion(),
                            "runtime": cupy.cuda.runtime.runtimeGetVersion()}
    except Exception:
        report["device"] = {"error": traceback.format_exc(limit=4)}
    sections: list[tuple[str, Callable[[], Any]]] = [
        ("ntt", lambda: section_ntt(sizes, args.repeats)),
        ("msm", lambda: section_msm(sizes, args.repeats)),
        ("proofs", lambda: section_proofs(args.proof_budget_s)),
        ("engine", lambda: section_engine(args.engine_jobs)),
    ]
    ok = True
    for name, fn in sections:
        if name in skip:
            continue
        t0 = time.perf_counter()
        try:
            report[name] = fn()
        except Exception:
            report[name] = {"error": traceback.format_exc(limit=8)}
            ok = name in ("proofs", "engine") and ok   # engine parts depend on other packages
            print(f"{name}: FAILED\n{report[name]['error']}", flush=True)
        report.setdefault("section_seconds", {})[name] = round(time.perf_counter() - t0, 1)
        (out_dir / "gpu_check.json").write_text(json.dumps(report, indent=1))
    mismatches = [f"{sec}/{size}" for sec in ("ntt", "msm") if isinstance(report.get(sec), dict)
                  for size, v in report[sec].items()
                  if isinstance(v, dict) and not (v.get("match", True) and v.get("h_match", True))]
    mismatches += [f"proofs/{k}" for k, v in (report.get("proofs") or {}).items()
                   if isinstance(v, dict) and v.get("match") is False]
    report["mismatches"] = mismatches
    (out_dir / "gpu_check.json").write_text(json.dumps(report, indent=1))
    print(f"wrote {out_dir / 'gpu_check.json'}; mismatches: {mismatches or 'none'}")
    return 0 if ok and not mismatches else 1


if __name__ == "__main__":
    raise SystemExit(main())
