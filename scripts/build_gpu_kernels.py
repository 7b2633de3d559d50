#!/usr/bin/env python3
"""Build the ahead-of-time GPU kernel bundle on this machine (no GPU needed).

    python scripts/build_gpu_kernels.py [--jobs 2] [--check-budget] [--cxx-variants V,..] [OUT]

(OUT defaults to build/gpu-kernels.)

Every kernel of kernels/gpu/ptx.py's specs is compiled to PTX by numba-cuda/NVVM for sm_90 and
assembled by ptxas into a cubin; OUT/manifest.json records entry names, parameter types, SHA-256 of
every file and of the kernel sources, and ptxas's registers, stack and spills per kernel (the full
``ptxas -v`` report of each kernel is kept beside it). benchmarks/gpu_check.sh carries OUT to the
GPU host and loads it there with CUZK_GPU_KERNELS=OUT (kernels/gpu/aot.py). Kernels compile in
``--jobs`` processes, the slowest first.

The C++ kernels (kernels/gpu/cuda/msm.cu: the G1 and G2 MSM) are compiled by nvcc into
OUT/cxx/msm_<variant>.cubin, one per field-multiply variant (``ptx`` carry chains, ``portable``
64-bit products), with their ``ptxas -v`` reports; the manifest's ``cxx`` entry holds their
SHA-256, the C++ sources' hash and per-kernel resources.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernels.gpu import aot, cxx_kernels, ptx  # noqa: E402

# Slowest first, so two processes finish together.
ORDER = ["ntt_pass", "h_join_abc", "ntt_coset_shift"]


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


def find_nvcc() -> str:
    """The nvcc the ``ptx`` extra installs beside ptxas (the pinned CUDA 13.0), else PATH's."""
    ptxas = ptx.find_ptxas()
    if ptxas and (Path(ptxas).parent / "nvcc").is_file():
        return str(Path(ptxas).parent / "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    raise SystemExit("nvcc not found (pip install the 'ptx' extra: cuda-toolkit[nvcc])")


def _compile_cxx(tmp: Path, variant: str) -> tuple[str, dict]:
    cubin = cxx_kernels.bundle_cubin(tmp, variant)
    cubin.parent.mkdir(exist_ok=True)
    cmd = cxx_kernels.nvcc_command(variant, cubin, find_nvcc())
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    secs = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"nvcc failed for the {variant} C++ kernels:\n{proc.stderr}")
    report = proc.stderr + proc.stdout
    (cubin.parent / f"msm_{variant}.ptxas.txt").write_text(report)
    data = cubin.read_bytes()
    return variant, {
        "cubin": str(cubin.relative_to(tmp)), "cubin_sha256": aot.sha256_bytes(data),
        "nvcc_seconds": round(secs, 1),
        "resources": {k: ptx.resource_report(report, k) for k in cxx_kernels.KERNELS},
    }


def build_cxx(tmp: Path, variants: list[str], jobs: int) -> dict:
    """Compile the C++ kernels' cubins into ``tmp/cxx`` (one nvcc per variant, in parallel)."""
    sources = cxx_kernels.source_hash()
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(variants)))) as pool:
        built = dict(pool.map(lambda v: _compile_cxx(tmp, v), variants))
    for variant, entry in built.items():
        for name, res in entry["resources"].items():
            print(f"cxx/{variant:8s} {name:18s} {res['registers']:4d} regs "
                  f"{res['stack_bytes']:5d} B stack {res['spill_stores']:4d}/"
                  f"{res['spill_loads']:<4d} B spill st/ld", flush=True)
        print(f"cxx/{variant}: nvcc {entry['nvcc_seconds']}s", flush=True)
    if cxx_kernels.source_hash() != sources:
        raise SystemExit("C++ kernel sources changed during the build; run it again")
    return {"source_sha256": sources, "arch": cxx_kernels.ARCH,
            "flags": list(cxx_kernels.NVCC_FLAGS), "variants": built}


def build(out: Path, jobs: int, names: list[str] | None = None,
          cxx_variants: list[str] | None = None) -> dict:
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
    cxx = build_cxx(tmp, list(cxx_variants if cxx_variants is not None
                              else cxx_kernels.VARIANTS), jobs)
    manifest = {"format": aot.FORMAT, "arch": ptx.ARCH, "source_sha256": sources,
                "sources": list(aot.SOURCES), "toolchain": _toolchain(),
                "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "build_seconds": round(time.perf_counter() - t_all, 1),
                "kernels": dict(sorted(kernels.items())), "cxx": cxx}
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return manifest


def rebuild_cxx(out: Path, jobs: int, variants: list[str]) -> dict:
    """Replace the C++ kernels of the bundle at ``out`` (its numba part checked, kept)."""
    manifest = json.loads((out / "manifest.json").read_text())
    if manifest.get("source_sha256") != aot.source_hash():
        raise SystemExit(f"{out}: its numba kernels were built from other sources; "
                         "rebuild the whole bundle")
    shutil.rmtree(out / "cxx", ignore_errors=True)
    manifest["cxx"] = build_cxx(out, variants, jobs)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
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
    ap.add_argument("--cxx-variants", default=",".join(cxx_kernels.VARIANTS),
                    help="C++ field-multiply variants to compile (default: all)")
    ap.add_argument("--cxx-only", action="store_true",
                    help="rebuild only the C++ kernels of an existing bundle OUT (its numba "
                         "kernels must match this tree)")
    args = ap.parse_args()
    names = [n for n in args.kernels.split(",") if n] or None
    variants = [v for v in args.cxx_variants.split(",") if v]
    for v in variants:
        cxx_kernels.variant_defines(v)
    if args.cxx_only:
        manifest = rebuild_cxx(Path(args.out), args.jobs, variants)
    else:
        manifest = build(Path(args.out), args.jobs, names, variants)
    problems = [p for n, k in manifest["kernels"].items()
                for p in ptx.budget_problems(n, k["resources"])]
    # The budgets hold for the variant the engine runs; the others are compared on a device.
    problems += [p for v, e in manifest["cxx"]["variants"].items()
                 if v == cxx_kernels.DEFAULT_VARIANT
                 for n, res in e["resources"].items()
                 for p in ptx.budget_problems(f"cxx/{n}", res)]
    print(f"wrote {args.out} ({len(manifest['kernels'])} kernels, "
          f"{manifest['build_seconds']}s, sources {manifest['source_sha256'][:12]})")
    for p in problems:
        print(f"BUDGET: {p}")
    return 1 if problems and args.check_budget else 0


if __name__ == "__main__":
    raise SystemExit(main())
