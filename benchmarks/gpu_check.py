"""The device check: GPU figures on a machine with an NVIDIA GPU (run through gpu_check.sh).

Installs and compiles nothing: the kernels come from the ahead-of-time bundle named by
CUZK_GPU_KERNELS (scripts/build_gpu_kernels.py, verified against this tree's kernel sources).
Every GPU result is compared with the CPU path before its time is reported. Sections are
independent: a failure in one is written to the JSON and the next one runs. The exit status is
non-zero when anything went wrong: an error in any section, a mismatch, a proof that does not
verify, a failed engine job, a device test that failed or skipped, a device memory estimate below
the measured peak, or a section that did not run (see :func:`problems`).

  device_tests  tests/kernels/gpu/test_gpu_device.py with CUZK_REQUIRE_GPU=1 (no skips allowed).
  ntt   forward NTT (natural order, incl. the bit-reversal gather) and the H pipeline
        (3 x odd-coset NTT + joinABC) vs kernels.ntt / kernels.qap; CUDA-event and wall time;
        the numba NTT (limb-major, shared memory: the engine's default) and, under "cxx", the
        C++ one (kernels/gpu/cxx_ntt.py, row-major, CUZK_GPU_NTT=cxx) side by side, in the
        engine's build; under "cxx_ptx" the same with the multiply inlined (when the bundle
        has that build: the NTT's code is small, so the call may cost more than it saves).
  msm   G1 MSM with device-resident points and scalars < 2^254 vs arkworks; CUDA-event and wall
        time, device memory estimate vs measured peak. Points: P_i = (i+1) G for i < PERIOD,
        repeated beyond; scalars repeat with the same period, so the reference is
        (m / period) * MSM_cpu(first period).
  proofs  each bundled circuit: gpu_phase on CUDA vs CPU, the proof self-verified, device
        memory estimate vs measured peak for H and each MSM.
  engine  a backlog through the engine on the CUDA backend with 1 and 2 GPU workers per device
        (each worker on a lane of its own: streams, pinned staging, executor): throughput,
        per-worker busy fraction, failed jobs, lanes per device.

``--runtime cpu`` runs the same sections on the CPU executor (tiny sizes in the tests), which is
how CI keeps this script's reference paths working without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PERIOD = 1 << 18          # distinct MSM points generated on the host (the slow host part)
TABLE_FACTOR = 8          # the msm section's tabled G1 plan: a window table of 8x the points
SECTIONS = ("device_tests", "msm", "proofs", "ntt", "engine", "scale")
# The GPU issue's targets on an H200 (reported beside the figures, not part of the exit status).
TARGETS = {"msm_2^16_ms": 3.0, "msm_2^18_ms": 6.0, "msm_2^20_ms": 15.0, "msm_2^22_ms": 50.0,
           "g2_msm_2^20_ms": 45.0, "ntt_2^20_ms": 0.3, "h_2^20_ms": 1.5,
           "porep_c2_speedup": 20.0, "engine_device_utilization": 0.9}


# --------------------------------------------------------------------------- runtimes

class CpuRuntime:
    """The kernels' CPU twin (numba.njit per-thread bodies, NumPy memory): wall time only."""

    name = "cpu"

    def __init__(self) -> None:
        from kernels.gpu.launch import Executor
        from kernels.gpu.runtime import cpu_target

        self.xp = np
        self.ex = Executor(cpu_target(), np)

    def timed(self, fn: Callable[[], Any], repeats: int) -> tuple[Any, dict[str, Any]]:
        out = fn()
        walls = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = fn()
            walls.append((time.perf_counter() - t0) * 1e3)
        return out, {"event_ms": None, "wall_ms": round(statistics.median(walls), 4)}

    def host(self, a: Any) -> np.ndarray:
        return np.asarray(a)

    def cxx_variants(self) -> list[str]:
        return ["portable"]                  # the host twin runs the portable multiply

    def cxx_kernels(self, variant: str) -> Any:
        from kernels.gpu.cxx_kernels import host_kernels

        return host_kernels()

    @contextmanager
    def step(self) -> Iterator[dict[str, int]]:
        yield {}

    @contextmanager
    def active(self) -> Iterator[None]:
        yield

    def release(self) -> None:
        pass


class CudaRuntime:
    """CuPy memory and one non-blocking stream; kernels from the AOT bundle; CUDA-event timing;
    a peak-tracking allocator for device memory high-water marks."""

    name = "cuda"

    def __init__(self) -> None:
        import cupy

        from kernels.gpu.aot import configured_bundle
        from kernels.gpu.launch import Executor
        from kernels.gpu.memtrack import PeakTracker
        from kernels.gpu.runtime import cuda_target

        self.cp = cupy
        self.xp = cupy
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.pool = cupy.get_default_memory_pool()
        self.tracker = PeakTracker(self.pool)
        cupy.cuda.set_allocator(self.tracker.malloc)
        self.ex = Executor(cuda_target(), cupy, stream=self.stream, kernels=configured_bundle())

    def timed(self, fn: Callable[[], Any], repeats: int) -> tuple[Any, dict[str, Any]]:
        cp = self.cp
        with self.stream:
            out = fn()
            self.stream.synchronize()
            events, walls = [], []
            for _ in range(repeats):
                start, end = cp.cuda.Event(), cp.cuda.Event()
                t0 = time.perf_counter()
                start.record(self.stream)
                out = fn()
                end.record(self.stream)
                end.synchronize()
                walls.append((time.perf_counter() - t0) * 1e3)
                events.append(cp.cuda.get_elapsed_time(start, end))
        return out, {"event_ms": round(statistics.median(events), 4),
                     "wall_ms": round(statistics.median(walls), 4)}

    def cxx_variants(self) -> list[str]:
        from kernels.gpu.aot import configured_bundle

        bundle = configured_bundle()
        return list(bundle.manifest["cxx"]["variants"]) if bundle else ["ptx"]

    def cxx_kernels(self, variant: str) -> Any:
        from kernels.gpu.cxx_kernels import device_kernels

        return device_kernels(self.cp, self.stream, variant)

    def host(self, a: Any) -> np.ndarray:
        with self.stream:
            out = a.get()
            self.stream.synchronize()
        return out

    @contextmanager
    def step(self) -> Iterator[dict[str, int]]:
        """The pool's high-water mark over the block (recorded at allocation time)."""
        with self.tracker.step() as m:
            yield m

    @contextmanager
    def active(self) -> Iterator[None]:
        """The check's stream is current: CuPy work is ordered with the kernels on it."""
        with self.stream:
            yield
            self.stream.synchronize()

    def release(self) -> None:
        self.stream.synchronize()
        self.pool.free_all_blocks()


def make_runtime(name: str) -> Any:
    return CudaRuntime() if name == "cuda" else CpuRuntime()


# --------------------------------------------------------------------------- inputs

def rand_fr_mont(n: int, seed: int) -> np.ndarray:
    from kernels.field import FR

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 1 << 32, size=(n, 8), dtype=np.uint64).astype(np.uint32)
    x[:, 7] &= 0x3FFFFFFF                      # < 2^254 < r: a valid Fr element
    return FR.to_mont(x, threads=os.cpu_count() or 1)


def host_points(period: int, group: str = "g1") -> tuple[np.ndarray, np.ndarray]:
    """(object array of the points (i+1)G of G1 or G2, (period, 24 or 48) uint32 Montgomery
    rows)."""
    from py_arkworks_bls12381 import G1Point, G2Point

    from cuzk.curves import BLS12_381
    from cuzk.prover.points import g1_to_mont_array, g2_to_mont_array

    g = G1Point() if group == "g1" else G2Point()
    pts = np.empty(period, dtype=object)
    acc = g
    for i in range(period):
        pts[i] = acc
        acc = acc + g
    to_rows = g1_to_mont_array if group == "g1" else g2_to_mont_array
    return pts, to_rows(BLS12_381, list(pts)).reshape(period, -1)


# --------------------------------------------------------------------------- sections

def section_ntt(rt: Any, sizes: list[int], repeats: int) -> dict[str, Any]:
    from kernels import ntt as cpu_ntt
    from kernels import qap
    from kernels.gpu.cxx_kernels import DEFAULT_VARIANT
    from kernels.gpu.cxx_ntt import CxxNtt
    from kernels.gpu.ntt import NttEngine

    eng = NttEngine(rt.ex)
    variants = rt.cxx_variants()
    engine_variant = DEFAULT_VARIANT if DEFAULT_VARIANT in variants else variants[0]
    cxx = {"cxx": CxxNtt(rt.cxx_kernels(engine_variant))}
    if "ptx" in variants and engine_variant != "ptx":
        cxx["cxx_ptx"] = CxxNtt(rt.cxx_kernels("ptx"))
    xp = rt.xp
    res: dict[str, Any] = {}
    with rt.active():
        for log_n in sizes:
            n = 1 << log_n
            a = rand_fr_mont(n, log_n)
            x = eng.to_limb_major(xp.asarray(a))
            eng.twiddles(log_n)
            y, t_fwd = rt.timed(lambda x=x: eng.forward(x), repeats)
            match = bool(np.array_equal(rt.host(eng.from_limb_major(y)), cpu_ntt.fft(a)))
            b, c = rand_fr_mont(n, log_n + 100), rand_fr_mont(n, log_n + 200)
            dev = [xp.asarray(v) for v in (a, b, c)]

            def h(dev: list = dev) -> Any:
                return eng.h_from_abc(*(eng.to_limb_major(v) for v in dev))

            hout, t_h = rt.timed(h, repeats)
            h_match = bool(np.array_equal(rt.host(hout), qap.h_evaluations(a, b, c, log_n)))
            res[f"2^{log_n}"] = {"forward": t_fwd, "match": match, "h_pipeline": t_h,
                                 "h_match": h_match}
            print(f"NTT 2^{log_n}: {_ms(t_fwd)} (match={match}); H {_ms(t_h)} (match={h_match})",
                  flush=True)
            del x, y, hout
            rt.release()
            for key, cxx_eng in cxx.items():
                res[f"2^{log_n}"][key] = _cxx_ntt_figures(rt, cxx_eng, a, b, c, log_n, repeats)
                rt.release()
            del dev
            rt.release()
    return res


def _cxx_ntt_figures(rt: Any, eng: Any, a: np.ndarray, b: np.ndarray, c: np.ndarray,
                     log_n: int, repeats: int) -> dict[str, Any]:
    """The C++ NTT's forward and H on the same inputs. H transforms its inputs in place (as the
    engine's uploads): the timed runs reuse scratch copies (the work does not depend on the
    values), the match is a separate run on fresh copies."""
    from kernels import ntt as cpu_ntt
    from kernels import qap

    xp = rt.xp
    x = xp.asarray(a)
    eng.twiddles(log_n)
    eng.coset_tables(log_n)
    y, t_fwd = rt.timed(lambda: eng.forward(x), repeats)
    match = bool(np.array_equal(rt.host(y), cpu_ntt.fft(a)))
    scratch = [xp.array(v) for v in (a, b, c)]      # copies: NumPy's asarray would alias
    _, t_h = rt.timed(lambda: eng.h(*scratch), repeats)
    out = eng.h(*(xp.array(v) for v in (a, b, c)))
    h_match = bool(np.array_equal(rt.host(out), qap.h_evaluations(a, b, c, log_n)))
    print(f"C++ NTT 2^{log_n}: {_ms(t_fwd)} (match={match}); H {_ms(t_h)} (match={h_match})",
          flush=True)
    return {"forward": t_fwd, "match": match, "h_pipeline": t_h, "h_match": h_match}


class StepTimer:
    """CUDA events at each step of a C++ MSM (``CxxMsm.on_step``): milliseconds per step."""

    def __init__(self, rt: Any) -> None:
        self.rt = rt
        self.marks: list[tuple[str, Any]] = []

    def __call__(self, name: str) -> None:
        if getattr(self.rt, "cp", None) is None:
            self.marks.append((name, time.perf_counter()))
            return
        ev = self.rt.cp.cuda.Event()
        ev.record(self.rt.stream)
        self.marks.append((name, ev))

    def millis(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for (_, a), (name, b) in zip(self.marks, self.marks[1:], strict=False):
            if isinstance(a, float):
                ms = (b - a) * 1e3
            else:
                b.synchronize()
                ms = self.rt.cp.cuda.get_elapsed_time(a, b)
            out[name] = round(out.get(name, 0.0) + ms, 4)
        return out


def _msm_inputs(rows: np.ndarray, sc_period: np.ndarray, m: int,
                xp: Any) -> tuple[Any, Any, int]:
    """m points and scalars on the runtime: the first p = min(m, period) repeated m / p times."""
    p = min(m, rows.shape[0])
    reps = m // p
    return (xp.asarray(np.tile(rows[:p], (reps, 1))), xp.asarray(np.tile(sc_period[:p], (reps, 1))),
            p)


def section_msm(rt: Any, sizes: list[int], repeats: int, period: int = PERIOD,
                g2_max_log: int = 20, g2_period: int = 1 << 12,
                table_factor: int = TABLE_FACTOR) -> dict[str, Any]:
    """G1: the C++ kernels, each variant of the bundle side by side, per size, with each step's
    time; beside them ``tabled_<engine variant>``: the plan a window table of table_factor x the
    points' bytes buys (``cxx_msm.device_plan``; the copies built by the native extension, as a
    resident key's are), its time, plan, table bytes, modelled work against the plain plan and
    estimate vs peak; G2: the C++ kernels (the first variant, or the host twin on the CPU
    runtime) up to 2^g2_max_log. (The numba MSM these replaced measured 13.7 / 23.8 / 55.8 /
    193.2 ms at 2^16 / 2^18 / 2^20 / 2^22 in the same run as
    docs/figures/gpu-check-2026-12-04.json.)"""
    from py_arkworks_bls12381 import G1Point, G2Point, Scalar

    from cuzk.prover.msm import msm as cpu_msm
    from kernels.gpu import cxx_msm

    period = min(period, 1 << max(sizes))
    t0 = time.perf_counter()
    pts, rows = host_points(period)
    g2_period = min(g2_period, 1 << max(sizes))
    g2_pts, g2_rows = host_points(g2_period, "g2")
    print(f"MSM: {period} G1 and {g2_period} G2 host points in "
          f"{time.perf_counter() - t0:.1f}s", flush=True)
    rng = np.random.default_rng(7)
    sc_period = rng.integers(0, 1 << 32, size=(period, 8), dtype=np.uint64).astype(np.uint32)
    sc_period[:, 7] &= 0x3FFFFFFF
    refs: dict[tuple[str, int], Any] = {}

    def reference(group: str, p: int) -> Any:
        if (group, p) not in refs:
            src, ident = (pts, G1Point.identity()) if group == "g1" else (g2_pts,
                                                                          G2Point.identity())
            refs[(group, p)] = cpu_msm(src[:p], sc_period[:p], ident)
        return refs[(group, p)]

    variants = rt.cxx_variants()
    from kernels.gpu.cxx_kernels import configured_variant

    engine_variant = configured_variant()           # what the engine runs (CUZK_GPU_FIELD)
    xp = rt.xp
    res: dict[str, Any] = {}
    with rt.active():
        for log_m in sizes:
            m = 1 << log_m
            d_pts, d_sc, p = _msm_inputs(rows, sc_period, m, xp)
            want = reference("g1", p) * Scalar(m // p)
            entry: dict[str, Any] = {"window": cxx_msm.choose_window(m), "distinct_points": p}
            for variant in variants:
                eng = cxx_msm.CxxMsm(rt.cxx_kernels(variant))
                with rt.step() as mem:
                    eng.window_sums(cxx_msm.G1, d_pts, d_sc)
                (sums, c), t = rt.timed(
                    lambda eng=eng, d_pts=d_pts, d_sc=d_sc: eng.window_sums(cxx_msm.G1, d_pts,
                                                                            d_sc), repeats)
                got = cxx_msm.combine_windows(cxx_msm.G1, rt.host(sums), c)
                v: dict[str, Any] = {**t, "match": bool(got == want)}
                if "peak_bytes" in mem:
                    v["memory"] = memory_entry(cxx_msm.device_bytes_estimate(m),
                                               mem["peak_bytes"])
                timer = StepTimer(rt)
                eng.on_step = timer
                with rt.step():
                    eng.window_sums(cxx_msm.G1, d_pts, d_sc)
                v["steps_ms"] = timer.millis()
                entry[f"cxx_{variant}"] = v
                print(f"MSM G1 2^{log_m} C++ {variant}: {_ms(t)} (match={v['match']}) "
                      f"steps {v['steps_ms']}", flush=True)
                del sums
            tab_variant = engine_variant if engine_variant in variants else variants[0]
            entry[f"tabled_{tab_variant}"] = _msm_tabled(
                rt, cxx_msm.CxxMsm(rt.cxx_kernels(tab_variant)), rows, sc_period, m, d_sc, want,
                table_factor, repeats)
            del d_pts, d_sc
            rt.release()
            if log_m <= g2_max_log:
                g_pts, g_sc, p2 = _msm_inputs(g2_rows, sc_period, m, xp)
                g2_variant = engine_variant if engine_variant in variants else variants[0]
                eng = cxx_msm.CxxMsm(rt.cxx_kernels(g2_variant))
                with rt.step() as mem:
                    eng.window_sums(cxx_msm.G2, g_pts, g_sc)
                (sums, c), t = rt.timed(
                    lambda eng=eng, g_pts=g_pts, g_sc=g_sc: eng.window_sums(cxx_msm.G2, g_pts,
                                                                            g_sc), repeats)
                got = cxx_msm.combine_windows(cxx_msm.G2, rt.host(sums), c)
                g2: dict[str, Any] = {**t, "variant": g2_variant,
                                      "match": bool(got == reference("g2", p2) * Scalar(m // p2))}
                if "peak_bytes" in mem:
                    g2["memory"] = memory_entry(cxx_msm.device_bytes_estimate(m, cxx_msm.G2),
                                                mem["peak_bytes"])
                entry["g2"] = g2
                print(f"MSM G2 2^{log_m} C++ {g2_variant}: {_ms(t)} (match={g2['match']})",
                      flush=True)
                del g_pts, g_sc, sums
                rt.release()
            res[f"2^{log_m}"] = entry
    return res


def _msm_tabled(rt: Any, eng: Any, rows: np.ndarray, sc_period: np.ndarray, m: int, d_sc: Any,
                want: Any, table_factor: int, repeats: int) -> dict[str, Any]:
    """One G1 size with a window table: the plan for a budget of table_factor x m rows, its
    copies built on the host from the distinct points (each copy tiled as the points are),
    timed and checked like the plain MSM."""
    from cuzk.prover import native_msm
    from kernels.gpu import cxx_msm

    plain = cxx_msm.device_plan(m, cxx_msm.G1, 0)
    plan = cxx_msm.device_plan(m, cxx_msm.G1, table_factor * m * 96)
    out: dict[str, Any] = {
        "plan": {"c": plan.c, "copies": plan.copies, "windows": plan.windows,
                 "passes": plan.passes},
        "plain_plan": {"c": plain.c, "windows": plain.windows},
        "table_bytes": plan.table_bytes(m, 96),
        "table_budget_bytes": table_factor * m * 96,
        "modelled_work_ratio": round(plan.work(m) / plain.work(m), 4)}
    if plan.copies > 1 and not native_msm.available():
        out["note"] = "no native extension to build the copies: not timed"
        return out
    p = min(m, rows.shape[0])
    t0 = time.perf_counter()
    copies = native_msm.fill_copies(rows[:p], plan.copies, plan.shift, os.cpu_count() or 1)
    host = np.concatenate([np.tile(c, (m // p, 1)) for c in (rows[:p], *copies)])
    out["table_build_s"] = round(time.perf_counter() - t0, 3)
    del copies
    d_pts = rt.xp.asarray(host)
    del host
    with rt.step() as mem:
        eng.window_sums(cxx_msm.G1, d_pts, d_sc, plan)
    (sums, got_plan), t = rt.timed(
        lambda d_pts=d_pts: eng.window_sums(cxx_msm.G1, d_pts, d_sc, plan), repeats)
    out.update(t)
    out["match"] = bool(cxx_msm.combine_windows(cxx_msm.G1, rt.host(sums), got_plan) == want)
    if "peak_bytes" in mem:
        out["memory"] = memory_entry(cxx_msm.device_bytes_estimate(m, cxx_msm.G1, plan),
                                     mem["peak_bytes"])
    timer = StepTimer(rt)
    eng.on_step = timer
    with rt.step():
        eng.window_sums(cxx_msm.G1, d_pts, d_sc, plan)
    out["steps_ms"] = timer.millis()
    print(f"MSM G1 2^{m.bit_length() - 1} tabled c={plan.c} copies={plan.copies} "
          f"passes={plan.passes} ({out['table_bytes'] / 2**20:.1f} MiB table, modelled work "
          f"x{out['modelled_work_ratio']}): {_ms(t)} (match={out['match']})", flush=True)
    del sums, d_pts
    rt.release()
    return out


def memory_entry(estimate: int, measured: int) -> dict[str, Any]:
    """Estimate vs measured peak; ``ok`` is False when the estimate is below what was used."""
    return {"estimate_bytes": int(estimate), "measured_peak_bytes": int(measured),
            "ratio": round(estimate / measured, 3) if measured else None,
            "ok": int(estimate) >= int(measured)}


class StepMeter:
    """Records each GPU-phase step's device memory peak against the backend's estimate.

    A backend with ``step_meter``/``step_estimates`` (CUDA) measures the steps of its
    device-resident GPU phase; otherwise h_evaluations and msm_g1 are wrapped one by one.
    """

    def __init__(self, backend: Any, rt: Any, key: Any) -> None:
        self.backend = backend
        self.rt = rt
        self.key = key
        self.steps: dict[str, dict[str, Any]] = {}

    def _record(self, name: str, estimate: int, mem: dict[str, int]) -> None:
        if "peak_bytes" in mem:
            self.steps[name] = memory_entry(estimate, mem["peak_bytes"])

    @contextmanager
    def installed(self) -> Iterator[StepMeter]:
        backend = self.backend
        if hasattr(backend, "step_meter") and hasattr(backend, "step_estimates"):
            estimates = backend.step_estimates(self.key)

            @contextmanager
            def meter(name: str) -> Iterator[None]:
                with self.rt.step() as mem:
                    yield
                self._record(name, estimates[name], mem)

            backend.step_meter = meter
            try:
                yield self
            finally:
                backend.step_meter = None
            return
        from cuzk.prover.cuda_backend import h_device_bytes
        from kernels.gpu.cxx_msm import device_bytes_estimate

        h_step, msm_step = backend.h_evaluations, backend.msm_g1

        def h(key: Any, a: Any, b: Any, c: Any) -> Any:
            with self.rt.step() as mem:
                out = h_step(key, a, b, c)
            kind = getattr(backend, "ntt_kind", "numba")
            self._record("H", h_device_bytes(a.shape[0], ntt=kind), mem)
            return out

        def msm(key: Any, section: str, scalars: Any) -> Any:
            with self.rt.step() as mem:
                out = msm_step(key, section, scalars)
            self._record(f"MSM {section}", device_bytes_estimate(max(1, scalars.shape[0])), mem)
            return out

        backend.h_evaluations, backend.msm_g1 = h, msm
        try:
            yield self
        finally:
            del backend.h_evaluations, backend.msm_g1


def section_proofs(rt: Any, backend: Any, kinds: list[str] | None,
                   keys_dir: Path) -> dict[str, Any]:
    from cuzk.circuits.registry import bundled_circuits
    from cuzk.prover import Circuit, CpuBackend, ProvingKey, finalize, gpu_phase, synthesize
    from cuzk.prover.keystore import ensure_zkey

    cpu = CpuBackend()
    out: dict[str, Any] = {}
    for kind, c in bundled_circuits().items():
        if kinds is not None and kind not in kinds:
            continue
        try:
            t0 = time.perf_counter()
            key = ProvingKey.load(ensure_zkey(kind, Path(c.r1cs_path), keys_dir))
            circuit = Circuit.load(c.r1cs_path, c.wasm_path, kind)
            inputs = json.loads(Path(c.sample_input_path).read_text())
            setup_s = time.perf_counter() - t0
            synth = synthesize(key, circuit, inputs)
            device_key_bytes = backend.upload_key(key)
            gpu_phase(key, synth, backend)                      # warm-up (module loads, tables)
            meter = StepMeter(backend, rt, key)
            with meter.installed():
                t0 = time.perf_counter()
                g_dev = gpu_phase(key, synth, backend)
                dev_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            g_cpu = gpu_phase(key, synth, cpu)
            if g_cpu.b2 is None:                                # B2 as the CPU backend runs it
                g_cpu.b2 = key.msm_b2(synth.witness, threads=os.cpu_count() or 1)
            cpu_s = time.perf_counter() - t0
            same = all(getattr(g_dev, f) == getattr(g_cpu, f)
                       for f in ("a", "b1", "c", "h", "b2"))
            t0 = time.perf_counter()
            verified = True
            try:
                finalize(key, synth, g_dev)                     # raises if it does not verify
            except Exception as exc:
                verified = False
                print(f"proof {kind}: does not verify: {exc}", flush=True)
            fin_s = time.perf_counter() - t0
            out[kind] = {"domain": key.sizes.domain_size, "gpu_phase_device_s": round(dev_s, 4),
                         "gpu_phase_cpu_s": round(cpu_s, 4),
                         "speedup": round(cpu_s / dev_s, 2) if dev_s else None,
                         "match": same, "verified": verified, "finalize_s": round(fin_s, 4),
                         "key_setup_s": round(setup_s, 2), "device_key_bytes": device_key_bytes,
                         "device_steps_ms": dict(g_dev.steps_ms), "memory": meter.steps}
            print(f"proof {kind}: {rt.name} {dev_s:.3f}s cpu {cpu_s:.3f}s match={same} "
                  f"verified={verified}", flush=True)
            backend.drop_key(key)
        except Exception:
            out[kind] = {"error": traceback.format_exc(limit=8)}
            print(f"proof {kind}: FAILED\n{out[kind]['error']}", flush=True)
    return out


def section_engine(backend: str, jobs: int, workers: list[int],
                   kinds: list[str] | None = None, keys_dir: Path | None = None) -> dict[str, Any]:
    from dataclasses import replace

    from cuzk.bench import engine as bench
    from cuzk.engine.settings import EngineSettings, default_proof_kinds
    from cuzk.prover.real_prover import RealProver

    all_kinds = default_proof_kinds()
    chosen = {k: v for k, v in all_kinds.items() if kinds is None or k in kinds}
    base = EngineSettings(proof_kinds=chosen, backend=backend, keys_dir=keys_dir,
                          finalizer_threads=max(2, (os.cpu_count() or 4) // 2))
    inputs = bench._real_inputs(base)
    backlog = bench._backlog(base, jobs, 0)
    out: dict[str, Any] = {"backend": backend, "backlog": backlog}
    from cuzk.prover.cuda_backend import CudaLane

    # Each worker count twice, side by side: the phase as the engine runs it (queued whole, one
    # wait for the sums) and the baseline that waits for the device after every step.
    # (The CPU backend has no lanes: one run each.)
    waits = (False, True) if backend == "cuda" else (False,)
    runs = [(w, wait) for w in workers for wait in waits]
    for w, wait_each_step in runs:
        settings = replace(base, gpu_workers_per_device=w)
        prover = RealProver(settings)
        CudaLane.wait_each_step = wait_each_step
        try:
            with DeviceSampler() as sampler:
                result = bench.run_once(f"{w} worker(s)/device"
                                        + (", waiting each step" if wait_each_step else ""),
                                        settings, prover, backlog, inputs)
        finally:
            CudaLane.wait_each_step = False
        summary = result.summary()
        summary["device_utilization"] = sampler.summary()
        # Each GPU worker of a device has a lane of its own (CUDA; none on the CPU backend).
        per_device = prover.lanes_per_device()
        summary["lanes"] = {"per_device": per_device,
                            "ok": all(n == w for n in per_device.values())}
        busy = list(result.busy_fraction.values())
        summary["min_busy_fraction"] = round(min(busy), 4) if busy else None
        out[f"workers_{w}" + ("_wait_each_step" if wait_each_step else "")] = summary
        print(f"engine {w} worker(s)/device{' (wait each step)' if wait_each_step else ''}: "
              f"{summary['jobs_per_s']} jobs/s, "
              f"{summary['partitions_per_s']} partitions/s, busy {summary['busy_fraction']}, "
              f"device utilisation {summary['device_utilization']}, "
              f"failed {summary['failed']}", flush=True)
    return out


class DeviceSampler:
    """The device's own utilisation while a block runs: ``nvidia-smi`` sampled every 100 ms
    (what NVML reports: the share of time a kernel was running), beside the workers' lease-based
    busy fraction. Without nvidia-smi (the CPU runtime) the summary says so."""

    def __init__(self, interval_ms: int = 100) -> None:
        self.interval_ms = interval_ms
        self.proc: subprocess.Popen[str] | None = None
        self.samples: list[int] = []

    def __enter__(self) -> DeviceSampler:
        import shutil

        exe = shutil.which("nvidia-smi")
        if exe:
            self.proc = subprocess.Popen(
                [exe, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                 f"-lms={self.interval_ms}", "-i", "0"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            text, _ = self.proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            text, _ = self.proc.communicate()
        self.samples = [int(x) for x in text.split() if x.strip().isdigit()]

    def summary(self) -> dict[str, Any]:
        if self.proc is None:
            return {"samples": 0, "mean_ratio": None, "note": "no nvidia-smi on this host"}
        if not self.samples:
            return {"samples": 0, "mean_ratio": None, "note": "nvidia-smi gave no samples"}
        mean = statistics.fmean(self.samples) / 100
        return {"samples": len(self.samples), "mean_ratio": round(mean, 3),
                "median_ratio": round(statistics.median(self.samples) / 100, 3)}


def section_scale(backend: Any, logs: list[int], work_dir: Path, deadline: float,
                  cpu_max_log: int = 20) -> dict[str, Any]:
    """Synthetic circuits of domain 2^k (``cuzk circuit synth``: r1cs, witness and development
    key made here, no circom or node) proven end to end, the GPU phase on ``backend`` against the
    CPU backend (native extension, every core) up to 2^cpu_max_log; each phase timed, the
    proof verified. A size is skipped, and said so, when the time left is below what it needs."""
    from cuzk.circuits.synthetic import synthesize_files
    from cuzk.formats.wtns import read_wtns
    from cuzk.prover import CpuBackend, ProvingKey, finalize, gpu_phase
    from cuzk.prover.groth16 import synthesize_from_witness

    cpu = CpuBackend()
    out: dict[str, Any] = {}
    for k in logs:
        # seconds: 2^18 took 15 s and 2^20 60 s on a 16-core H200 host (keygen most of it)
        need = 20 * 4 ** max(0, k - 18)
        left = deadline - time.monotonic()
        if left < need:
            out[f"2^{k}"] = {"not_run": f"{left:.0f}s left, about {need}s needed"}
            print(f"scale 2^{k}: not run ({left:.0f}s left)", flush=True)
            continue
        try:
            made = synthesize_files(work_dir / f"synth-{k}", k, seed=k)
            t0 = time.perf_counter()
            key = ProvingKey.load(made.zkey)
            witness = np.ascontiguousarray(read_wtns(made.wtns).values, dtype=np.uint32)
            synth = synthesize_from_witness(key, witness, source="synthetic witness")
            entry: dict[str, Any] = {"constraints": made.circuit.n_constraints,
                                     "domain": key.sizes.domain_size,
                                     "make_s": {n: round(v, 2) for n, v in made.times.items()},
                                     "load_and_abc_s": round(time.perf_counter() - t0, 2)}
            backend.upload_key(key)
            gpu_phase(key, synth, backend)                         # warm-up
            t0 = time.perf_counter()
            g_dev = gpu_phase(key, synth, backend)
            entry["gpu_phase_device_s"] = round(time.perf_counter() - t0, 4)
            # Device time per step (CUDA events around what each step queued): the phase
            # queues everything and waits once, so host wall time per step would be launches.
            entry["device_steps_ms"] = dict(g_dev.steps_ms)
            t0 = time.perf_counter()
            finalize(key, synth, g_dev)                            # raises unless it verifies
            entry["finalize_device_s"] = round(time.perf_counter() - t0, 4)
            entry["verified"] = True
            if k <= cpu_max_log:
                t0 = time.perf_counter()
                g_cpu = gpu_phase(key, synth, cpu)
                if g_cpu.b2 is None:
                    g_cpu.b2 = key.msm_b2(synth.witness, threads=os.cpu_count() or 1)
                entry["gpu_phase_cpu_s"] = round(time.perf_counter() - t0, 3)
                entry["match"] = all(getattr(g_dev, f) == getattr(g_cpu, f)
                                     for f in ("a", "b1", "c", "h", "b2"))
                entry["speedup"] = round(entry["gpu_phase_cpu_s"] / entry["gpu_phase_device_s"],
                                         1)
            backend.drop_key(key)
            if k == min(logs) and hasattr(backend, "msm_table_budget"):
                entry["tabled"] = _tabled_phase(backend, key, synth, g_dev)
            out[f"2^{k}"] = entry
            print(f"scale 2^{k}: {entry}", flush=True)
        except Exception:
            out[f"2^{k}"] = {"error": traceback.format_exc(limit=8)}
            print(f"scale 2^{k}: FAILED\n{out[f'2^{k}']['error']}", flush=True)
    return out


def _tabled_phase(backend: Any, key: Any, synth: Any, plain: Any) -> dict[str, Any]:
    """The same phase on a second backend of the device with ``msm_precompute = "on"`` (window
    copies of the key's points built at upload): the upload's cost, the phase's time and steps,
    and whether its five sums equal the plain phase's."""
    from cuzk.prover import gpu_phase

    tabled = type(backend)(0, msm_precompute="on")
    t0 = time.perf_counter()
    nbytes = tabled.upload_key(key)
    upload_s = time.perf_counter() - t0
    try:
        gpu_phase(key, synth, tabled)                              # warm-up
        t0 = time.perf_counter()
        g = gpu_phase(key, synth, tabled)
        phase_s = time.perf_counter() - t0
    finally:
        tabled.drop_key(key)
    return {"upload_s": round(upload_s, 2), "device_key_bytes": nbytes,
            "gpu_phase_device_s": round(phase_s, 4), "device_steps_ms": dict(g.steps_ms),
            "match": all(getattr(g, f) == getattr(plain, f) for f in ("a", "b1", "c", "h", "b2"))}


def section_device_tests(out_dir: Path) -> dict[str, Any]:
    """The device tests, with CUZK_REQUIRE_GPU=1: a skip or failure is a problem."""
    junit = out_dir / "device_tests.xml"
    env = {**os.environ, "CUZK_REQUIRE_GPU": "1"}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         f"--junitxml={junit}", "tests/kernels/gpu/test_gpu_device.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    (out_dir / "device_tests.log").write_text(proc.stdout + proc.stderr)
    return junit_counts(junit, proc.returncode, proc.stdout[-2000:])


def junit_counts(junit: Path, returncode: int, tail: str) -> dict[str, Any]:
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if junit.exists():
        for suite in ET.parse(junit).getroot().iter("testsuite"):
            for k in counts:
                counts[k] += int(suite.get(k, 0))
    out: dict[str, Any] = {**counts, "returncode": returncode}
    if returncode != 0 or counts["tests"] == 0:
        out["error"] = f"pytest exit {returncode}, {counts}:\n{tail}"
    return out


# --------------------------------------------------------------------------- verdict

def problems(report: dict[str, Any]) -> list[str]:
    """Everything that makes the check fail, as readable paths (empty: all good)."""
    found: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            if "error" in node:
                found.append(f"{path}: error")
            if isinstance(node.get("skipped"), str):
                found.append(f"{path}: skipped ({node['skipped']})")
            for flag in ("match", "h_match", "verified", "ok"):
                if node.get(flag) is False:
                    found.append(f"{path}: {flag} is false")
            if isinstance(node.get("failed"), int) and node["failed"] > 0:
                found.append(f"{path}: {node['failed']} failed jobs")
            for k in ("failures", "errors", "skipped"):
                if isinstance(node.get(k), int) and node[k] > 0:
                    found.append(f"{path}: {node[k]} {k}")
            for k, v in node.items():
                if k not in ("error", "skipped"):
                    walk(v, f"{path}/{k}" if path else str(k))

    for name in SECTIONS:
        if name not in report:
            found.append(f"{name}: did not run")
    walk({k: v for k, v in report.items() if k in SECTIONS or k == "device"}, "")
    return found


# --------------------------------------------------------------------------- table

def _ms(t: dict[str, Any]) -> str:
    ev = t.get("event_ms")
    return (f"{ev:.3f} ms event / " if ev is not None else "") + f"{t['wall_ms']:.3f} ms wall"


def _fmt(v: Any, spec: str = "") -> str:
    if v is None:
        return "-"
    return format(v, spec) if spec else str(v)


def table(report: dict[str, Any]) -> str:
    lines: list[str] = []
    for sec, label in (("ntt", "NTT"),):
        data = report.get(sec)
        if not isinstance(data, dict) or "error" in data:
            continue
        lines.append(f"{label:6s} {'event ms':>10s} {'wall ms':>10s} {'match':>6s}"
                     + ("  H event ms  H wall ms  H match" if sec == "ntt" else
                        "  est MiB  peak MiB"))
        for size, v in data.items():
            t = v["forward"] if sec == "ntt" else v
            row = (f"{size:6s} {_fmt(t.get('event_ms'), '.3f'):>10s} {t['wall_ms']:10.3f} "
                   f"{v['match']!s:>6s}")
            if sec == "ntt":
                h = v["h_pipeline"]
                row += (f"  {_fmt(h.get('event_ms'), '.3f'):>10s} {h['wall_ms']:10.3f} "
                        f"{v['h_match']!s:>8s}")
                for key in (k for k in v if k.startswith("cxx")):
                    x = v[key]
                    if not (isinstance(x, dict) and "forward" in x):
                        continue
                    f, h = x["forward"], x["h_pipeline"]
                    tag = "  C++" if key == "cxx" else "  " + key[4:]
                    row += (f"\n{tag:6s} {_fmt(f.get('event_ms'), '.3f'):>10s} "
                            f"{f['wall_ms']:10.3f} {x['match']!s:>6s}  "
                            f"{_fmt(h.get('event_ms'), '.3f'):>10s} {h['wall_ms']:10.3f} "
                            f"{x['h_match']!s:>8s}")
            elif "memory" in v:
                m = v["memory"]
                row += (f"  {m['estimate_bytes'] / 2**20:7.1f}  "
                        f"{m['measured_peak_bytes'] / 2**20:8.1f}")
            lines.append(row)
    msm = report.get("msm")
    if isinstance(msm, dict) and "error" not in msm:
        impls = sorted({k for v in msm.values() if isinstance(v, dict) for k, x in v.items()
                        if isinstance(x, dict) and "match" in x})
        lines.append("MSM event ms " + "".join(f"{k:>16s}" for k in impls))
        for size, v in msm.items():
            cells = []
            for k in impls:
                x = v.get(k)
                cells.append("-" if not isinstance(x, dict) else
                             f"{_fmt(x.get('event_ms'), '.3f')}{'' if x.get('match') else '!'}")
            lines.append(f"{size:12s} " + "".join(f"{c:>16s}" for c in cells))
            for k in impls:
                m = (v.get(k) or {}).get("memory")
                if m:
                    lines.append(f"  {k:10s} est {m['estimate_bytes'] / 2**20:8.1f} MiB  peak "
                                 f"{m['measured_peak_bytes'] / 2**20:8.1f} MiB  ok={m['ok']}")
    proofs = report.get("proofs")
    if isinstance(proofs, dict):
        lines.append("proof           device s    cpu s  speedup  match verified")
        for kind, v in proofs.items():
            if "error" in v:
                lines.append(f"{kind:14s} ERROR")
                continue
            lines.append(f"{kind:14s} {_fmt(v.get('gpu_phase_device_s'), '.4f'):>9s} "
                         f"{_fmt(v.get('gpu_phase_cpu_s'), '.4f'):>8s} "
                         f"{_fmt(v.get('speedup')):>8s} {v.get('match')!s:>6s} "
                         f"{v.get('verified')!s:>8s}")
            for step, m in v.get("memory", {}).items():
                lines.append(f"  {step:12s} est {m['estimate_bytes'] / 2**20:8.1f} MiB  peak "
                             f"{m['measured_peak_bytes'] / 2**20:8.1f} MiB  ok={m['ok']}")
    eng = report.get("engine")
    if isinstance(eng, dict) and "error" not in eng:
        lines.append("engine          jobs/s  partitions/s  min busy  device util  failed")
        for k, v in eng.items():
            if k.startswith("workers_"):
                util = (v.get("device_utilization") or {}).get("mean_ratio")
                lines.append(f"{k:14s} {_fmt(v.get('jobs_per_s'), '.3f'):>7s} "
                             f"{_fmt(v.get('partitions_per_s'), '.3f'):>13s} "
                             f"{_fmt(v.get('min_busy_fraction')):>9s} {_fmt(util):>12s} "
                             f"{_fmt(v.get('failed')):>7s}")
    targets = report.get("targets", {})
    for name, v in targets.items():
        lines.append(f"target {name}: {v}")
    return "\n".join(lines)


def _best_g1(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The fastest correct G1 MSM figure of a size (the C++ variants side by side)."""
    timed = [v for k, v in entry.items() if isinstance(v, dict) and k != "g2"
             and v.get("event_ms") is not None and v.get("match")]
    return min(timed, key=lambda v: v["event_ms"]) if timed else None


def target_figures(report: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets against the figures (reported, not part of the exit status)."""
    out: dict[str, Any] = {}

    def put(name: str, value: float | None, at_most: bool = True) -> None:
        if value is None:
            return
        goal = TARGETS[name]
        out[name] = {"value": value, "target": f"{'<=' if at_most else '>='} {goal}",
                     "met": value <= goal if at_most else value >= goal}

    msm = report.get("msm") or {}
    for log_m in (16, 18, 20, 22):
        entry = msm.get(f"2^{log_m}")
        if isinstance(entry, dict):
            best = _best_g1(entry)
            put(f"msm_2^{log_m}_ms", best["event_ms"] if best else None)
    g2 = (msm.get("2^20") or {}).get("g2") if isinstance(msm.get("2^20"), dict) else None
    if isinstance(g2, dict) and g2.get("match"):
        put("g2_msm_2^20_ms", g2.get("event_ms"))
    ntt = (report.get("ntt") or {}).get("2^20")
    if isinstance(ntt, dict) and "forward" in ntt:
        # the faster correct one of the numba and C++ NTTs (both are in the report)
        impls = [ntt, *(v for k, v in ntt.items() if k.startswith("cxx"))]

        def best(key: str, flag: str) -> float | None:
            ev = [v[key].get("event_ms") for v in impls
                  if isinstance(v, dict) and key in v and v.get(flag)]
            ev = [e for e in ev if e is not None]
            return min(ev) if ev else None

        put("ntt_2^20_ms", best("forward", "match"))
        put("h_2^20_ms", best("h_pipeline", "h_match"))
    porep = (report.get("proofs") or {}).get("porep-c2")
    if isinstance(porep, dict):
        put("porep_c2_speedup", porep.get("speedup"), at_most=False)
    eng = report.get("engine") or {}
    utils = [v["device_utilization"].get("mean_ratio") for k, v in eng.items()
             if k.startswith("workers_") and isinstance(v, dict) and "device_utilization" in v]
    utils = [u for u in utils if u is not None]
    if utils:
        put("engine_device_utilization", max(utils), at_most=False)
    return out


# --------------------------------------------------------------------------- main

def device_info() -> dict[str, Any]:
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    info = {"name": props["name"].decode(), "cc": f"{props['major']}.{props['minor']}",
            "memory_bytes": int(props["totalGlobalMem"]),
            "driver": cupy.cuda.runtime.driverGetVersion(),
            "runtime": cupy.cuda.runtime.runtimeGetVersion()}
    from kernels.gpu.aot import configured_bundle

    bundle = configured_bundle()
    if bundle is None:
        info["error"] = "CUZK_GPU_KERNELS is not set: kernels would be JIT-compiled"
    else:
        info["kernels"] = {"path": str(bundle.path),
                           "source_sha256": bundle.manifest["source_sha256"],
                           "toolchain": bundle.manifest["toolchain"]}
    return info


def run(args: argparse.Namespace) -> dict[str, Any]:
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    sizes = list(range(args.min_log, args.max_log + 1))
    skip = set(filter(None, args.skip.split(",")))
    kinds = [k for k in args.kinds.split(",") if k] or None
    workers = [int(w) for w in args.workers.split(",") if w]
    scale_logs = [int(k) for k in args.scale_logs.split(",") if k]
    deadline = time.monotonic() + args.budget_s
    keys_dir = Path(args.keys_dir or os.environ.get("CUZK_TEST_KEYS_DIR")
                    or tempfile.mkdtemp(prefix="cuzk-keys-"))
    report: dict[str, Any] = {"host": platform.node(), "runtime": args.runtime,
                              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "args": vars(args)}
    json_path = out_dir / "gpu_check.json"
    if args.runtime == "cuda":
        try:
            report["device"] = device_info()
        except Exception:
            report["device"] = {"error": traceback.format_exc(limit=4)}
    rt_holder: dict[str, Any] = {}

    def runtime() -> Any:
        if "rt" not in rt_holder:
            rt_holder["rt"] = make_runtime(args.runtime)
        return rt_holder["rt"]

    def backend() -> Any:
        if args.runtime == "cuda":
            from cuzk.prover.cuda_backend import CudaBackend

            return CudaBackend(0)
        from cuzk.prover import CpuBackend

        return CpuBackend()

    sections: dict[str, Callable[[], Any]] = {
        "device_tests": lambda: section_device_tests(out_dir),
        "ntt": lambda: section_ntt(runtime(), sizes, args.repeats),
        "msm": lambda: section_msm(runtime(), sizes, args.repeats, args.period,
                                   args.g2_max_log, table_factor=args.table_factor),
        "proofs": lambda: section_proofs(runtime(), backend(), kinds, keys_dir),
        "engine": lambda: section_engine(args.runtime, args.engine_jobs, workers, kinds,
                                 keys_dir),
        "scale": lambda: section_scale(backend(), scale_logs, keys_dir, deadline),
    }
    for name in SECTIONS:
        if name in skip:
            continue
        t0 = time.perf_counter()
        try:
            report[name] = sections[name]()
        except Exception:
            report[name] = {"error": traceback.format_exc(limit=8)}
            print(f"{name}: FAILED\n{report[name]['error']}", flush=True)
        report.setdefault("section_seconds", {})[name] = round(time.perf_counter() - t0, 1)
        json_path.write_text(json.dumps(report, indent=1))
    report["targets"] = target_figures(report)
    report["problems"] = problems(report)
    json_path.write_text(json.dumps(report, indent=1))
    return report


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "benchmarks" / "out"))
    ap.add_argument("--runtime", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--min-log", type=int, default=16)
    ap.add_argument("--max-log", type=int, default=22)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--period", type=int, default=PERIOD, help="distinct MSM points")
    ap.add_argument("--table-factor", type=int, default=TABLE_FACTOR,
                    help="the msm section's tabled G1 plan: window table budget in units of "
                         "the points' bytes")
    ap.add_argument("--kinds", default="", help="bundled proof kinds (default: all)")
    ap.add_argument("--engine-jobs", type=int, default=8)
    ap.add_argument("--workers", default="1,2", help="GPU workers per device to compare")
    ap.add_argument("--keys-dir", default="")
    ap.add_argument("--scale-logs", default="18,20",
                    help="synthetic circuit sizes (log2 of the domain) proven end to end")
    ap.add_argument("--budget-s", type=float, default=float(os.environ.get("GPU_CHECK_BUDGET",
                                                                           400)),
                    help="seconds this run may take: the scale section skips what would not fit")
    ap.add_argument("--g2-max-log", type=int, default=20, help="largest G2 MSM size (log2)")
    ap.add_argument("--skip", default="",
                    help="sections to skip (a skipped section makes the check fail)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    print(table(report))
    found = report["problems"]
    print(f"wrote {Path(args.out) / 'gpu_check.json'}; problems: {len(found)}")
    for p in found:
        print(f"  PROBLEM {p}")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
