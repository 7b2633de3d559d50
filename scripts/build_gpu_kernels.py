#!/usr/bin/env python3
"""Build the ahead-of-time GPU kernel bundle on this machine (no GPU needed).

    python scripts/build_gpu_kernels.py [--jobs 2] [--check-budget] [OUT]

(OUT defaults to build/gpu-kernels.)

Every kernel of kernels/gpu/ptx.py's specs is compiled to PTX by numba-cuda/NVVM for sm_90 and
assembled by ptxas into a cubin; OUT/manifest.json records entry names, parameter types, SHA-256 of
every file and of the kernel sources, and ptxas's registers, stack and spills per kernel (the full
``ptxas -v`` report of each kernel is kept beside it). benchmarks/gpu_check.sh carries OUT to the
GPU host and loads it there with CUZK_GPU_KERNELS=OUT (kernels/gpu/aot.py). Kernels compile in
``--jobs`` processes; the MSM kernels take most of the time, so they start first.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernels.gpu import aot, ptx  # noqa: E402

# Slowest first, so two processes finish together.
ORDER = ["msm_window_segment", "msm_sum", "msm_accumulate"]


def _compile_one(name: str) -> tuple[str, str, float]:
    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    text, secs = ptx.compile_kernel(name)
    return name, text, secs


def _toolchain() -> dict[str, str]:
    import numba
    from numba.cuda.cudadrv import nvvm

    try:
        from importlib.metadata import version

        numba_cuda = version("numba-cuda")
    except Exception:
        numba_cuda = "unknown"
    return {"numba": numba.__version__, "numba_cuda": numba_cuda,
            "nvvm": ".".join(map(str, nvvm.NVVM().get_version())),
            "ptxas": ptx.ptxas_version(), "python": platform.python_version()}


def build(out: Path, jobs: int, names: list[str] | None = None) -> dict:
    sources = aot.source_hash()               # before compiling: what the kernels are built from
    specs = ptx.kernel_specs()
    wanted = [s.name for s in specs if names is None or s.name in names]
    unknown = set(names or []) - {s.name for s in specs}
    if unknown:
        raise SystemExit(f"unknown kernels: {sorted(unknown)}")
    wanted.sort(key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    by_name = {s.name: s for s in specs}
    kernels: dict[str, dict] = {}
    t_all = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=ctx) as pool:
        for name, text, secs in pool.map(_compile_one, wanted):
            spec = by_name[name]
            entry = ptx.entry_name(text)
            params = ptx.sig_to_json(spec.sig)
            got = aot.ptx_param_widths(ptx.entry_param_types(text))
            if got != aot.param_widths(params):
                raise SystemExit(f"{name}: PTX parameters {got} do not match the launch ABI "
                                 f"{aot.param_widths(params)} of {params}")
            t0 = time.perf_counter()
            cubin, report = ptx.assemble(text)
            ptxas_s = time.perf_counter() - t0
            (tmp / f"{name}.ptx").write_text(text)
            (tmp / f"{name}.cubin").write_bytes(cubin)
            (tmp / f"{name}.ptxas.txt").write_text(report)
            res = ptx.resource_report(report, entry)
            kernels[name] = {
                "kind": spec.kind, "entry": entry, "params": params,
                "ptx": f"{name}.ptx", "ptx_sha256": aot.sha256_bytes(text.encode()),
                "cubin": f"{name}.cubin", "cubin_sha256": aot.sha256_bytes(cubin),
                "ptx_isa": ptx_isa(text), "arch": ptx.ARCH, "resources": res,
                "nvvm_seconds": round(secs, 2), "ptxas_seconds": round(ptxas_s, 2),
            }
            print(f"{name:20s} {res['registers']:4d} regs {res['stack_bytes']:5d} B stack "
                  f"{res['spill_stores']:4d}/{res['spill_loads']:<4d} B spill st/ld  "
                  f"NVVM {secs:5.1f}s ptxas {ptxas_s:4.1f}s", flush=True)
    if aot.source_hash() != sources:
        raise SystemExit("kernel sources changed during the build; run it again")
    manifest = {"format": aot.FORMAT, "arch": ptx.ARCH, "source_sha256": sources,
                "sources": list(aot.SOURCES), "toolchain": _toolchain(),
                "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "build_seconds": round(time.perf_counter() - t_all, 1),
                "kernels": dict(sorted(kernels.items()))}
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return manifest


def ptx_isa(text: str) -> str:
    from kernels.gpu.runtime import ptx_isa_version

    return ptx_isa_version(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", default=str(ROOT / "build" / "gpu-kernels"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--kernels", default="", help="comma-separated subset (default: all)")
    ap.add_argument("--check-budget", action="store_true",
                    help="exit 1 when a kernel spills or exceeds its stack budget")
    args = ap.parse_args()
    names = [n for n in args.kernels.split(",") if n] or None
    manifest = build(Path(args.out), args.jobs, names)
    problems = [p for n, k in manifest["kernels"].items()
                for p in ptx.budget_problems(n, k["resources"])]
    print(f"wrote {args.out} ({len(manifest['kernels'])} kernels, "
          f"{manifest['build_seconds']}s, sources {manifest['source_sha256'][:12]})")
    for p in problems:
        print(f"BUDGET: {p}")
    return 1 if problems and args.check_budget else 0


if __name__ == "__main__":
    raise SystemExit(main())
