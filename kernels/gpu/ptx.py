"""Every GPU kernel with the argument types the host drivers launch it with, compiled to PTX.

CI has no GPU: compiling each kernel for sm_90 here (and assembling with ``ptxas`` where it is
installed) is how CI proves the device code builds.
Usage: ``python -m kernels.gpu.ptx [--ptxas] OUT_DIR [KERNEL ...]``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernels.gpu.runtime import (
    PTX_CC,
    compile_ptx,
    cuda_target,
    grid_kernel_source,
    ptx_isa_version,
    ptx_target,
)


@dataclass(frozen=True)
class KernelSpec:
    name: str
    pyfunc: Callable[..., None]
    sig: tuple


def kernel_specs() -> list[KernelSpec]:
    """All kernels that ``NttEngine`` and ``MsmEngine`` launch, with their launch signatures."""
    from numba import types as nt

    from kernels.gpu.launch import phase_kernel_source
    from kernels.gpu.msm import build_msm
    from kernels.gpu.ntt import build_ntt

    tg = cuda_target()
    ntt = build_ntt(tg)
    msm = build_msm(tg)
    u32_2 = nt.Array(nt.uint32, 2, "C")
    u32_1 = nt.Array(nt.uint32, 1, "C")
    u64_1 = nt.Array(nt.uint64, 1, "C")
    i64_1 = nt.Array(nt.int64, 1, "C")
    i64 = nt.int64
    b = nt.boolean

    def grid(name: str, body: Any, *args: Any) -> KernelSpec:
        return KernelSpec(name, grid_kernel_source(body, len(args)), (i64, *args))

    return [
        KernelSpec("ntt_pass", phase_kernel_source(ntt.pass_phase, 8),
                   (i64, u32_2, u32_2, i64, i64, i64, i64, b, b)),
        grid("ntt_twiddles", ntt.twiddle, u32_2, u32_2, i64, u32_2),
        grid("ntt_coset_shift", ntt.coset, u32_2, u32_2, u32_2, i64, i64),
        grid("ntt_scale", ntt.scale, u32_2, u32_1),
        grid("ntt_bitrev", ntt.bitrev, u32_2, u32_2, i64),
        grid("to_limb_major", ntt.to_limb_major, u32_2, u32_2),
        grid("from_limb_major", ntt.from_limb_major, u32_2, u32_2),
        grid("h_join_abc", ntt.abc, u32_2, u32_2, u32_2, u32_2),
        grid("msm_digits", msm.digits, u32_2, i64, i64, i64, u64_1),
        grid("msm_accumulate", msm.accumulate, u64_1, i64_1, i64_1, u32_2, u32_2),
        grid("msm_sum", msm.sum, u32_2, i64_1, i64_1, u32_2),
        grid("msm_window_segment", msm.window_segment, u32_2, i64, i64, u32_2),
    ]


def find_ptxas() -> str | None:
    """ptxas: the pinned nvidia-cuda-nvcc wheel first (CI installs it), then PATH, the toolkit."""
    for cand in (Path(sys.prefix) / "lib").glob("python3*/site-packages/nvidia/cu13/bin/ptxas"):
        if cand.exists():
            return str(cand)
    found = shutil.which("ptxas")
    if found:
        return found
    toolkit = Path("/usr/local/cuda/bin/ptxas")
    return str(toolkit) if toolkit.exists() else None


def assemble(ptx: str, arch: str = "sm_90", ptxas: str | None = None) -> str:
    """Assemble PTX to SASS with ptxas; returns its resource report (raises on failure)."""
    exe = ptxas or find_ptxas()
    if exe is None:
        raise FileNotFoundError("ptxas not found")
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "k.ptx"
        src.write_text(ptx)
        res = subprocess.run([exe, f"-arch={arch}", "-v", str(src), "-o", str(Path(d) / "k.cubin")],
                             capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"ptxas failed: {res.stderr.strip()}")
    return res.stderr.strip()


def main(argv: list[str]) -> int:
    """``python -m kernels.gpu.ptx [--ptxas] OUT_DIR [NAME ...]``: NAME.ptx files + a summary."""
    import json

    if not argv:
        print("usage: python -m kernels.gpu.ptx OUT_DIR [KERNEL ...]", file=sys.stderr)
        return 2
    use_ptxas = "--ptxas" in argv
    argv = [a for a in argv if a != "--ptxas"]
    out = Path(argv[0])
    only = set(argv[1:])
    out.mkdir(parents=True, exist_ok=True)
    summary = {}
    for spec in kernel_specs():
        if only and spec.name not in only:
            continue
        t0 = time.perf_counter()
        ptx = compile_ptx(spec.pyfunc, spec.sig, PTX_CC)
        secs = time.perf_counter() - t0
        (out / f"{spec.name}.ptx").write_text(ptx)
        summary[spec.name] = {"seconds": round(secs, 2), "chars": len(ptx),
                              "version": ptx_isa_version(ptx), "target": ptx_target(ptx)}
        if use_ptxas:
            report = assemble(ptx)
            summary[spec.name]["ptxas"] = [ln for ln in report.splitlines() if "Used" in ln
                                           or "spill" in ln][-2:]
        print(f"{spec.name}: PTX {summary[spec.name]['version']} "
              f"{summary[spec.name]['target']}, {len(ptx)} chars, {secs:.1f}s", flush=True)
    name = "summary.json" if not only else f"summary-{os.getpid()}.json"
    (out / name).write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
