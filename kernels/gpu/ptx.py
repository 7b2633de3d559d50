"""Every GPU kernel with the argument types the host drivers launch it with, compiled for sm_90.

CI has no GPU: compiling each kernel to PTX here and assembling it with ``ptxas`` is how CI proves
the device code builds, and ``ptxas -v`` is where its register, stack and spill figures come from.
The same compilation, written to disk with a manifest, is the ahead-of-time kernel bundle that a
GPU host loads without any JIT (``kernels/gpu/aot.py``, ``scripts/build_gpu_kernels.py``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernels.gpu.runtime import PTX_CC, compile_ptx, cuda_target, grid_kernel_source

ARCH = f"sm_{PTX_CC[0]}{PTX_CC[1]}"

# Stack budget per kernel (bytes of ptxas "cumulative stack size" per thread), set from what the
# kernels achieve (kernels/gpu/README.md has the figures): the MSM accumulation and reduction
# kernels went from 208 and 304 bytes to 8 by inlining add_affine / add_xyzz; the bucket-segment
# kernel keeps its two accumulators and mul_small on the stack. No kernel may spill registers.
STACK_BUDGET_BYTES: dict[str, int] = {
    "ntt_pass": 0,
    "ntt_twiddles": 0,
    "ntt_coset_shift": 0,
    "ntt_scale": 0,
    "ntt_bitrev": 0,
    "to_limb_major": 0,
    "from_limb_major": 0,
    "h_join_abc": 0,
    # The C++ kernels (kernels/gpu/cuda) in the engine's build (ptx-callmul): the stack is the
    # XYZZ accumulators and field elements passed by reference to the called point operations
    # and multiplies, L1-resident (measured on an H200: the small code this buys is 1.5-1.9x
    # faster than the inlined build, docs/gpu-check.md).
    "cxx/msm_digit_counts": 0,
    "cxx/msm_digit_scatter": 0,
    "cxx/g1_field_ops": 96,
    "cxx/g2_field_ops": 288,
    "cxx/g1_accumulate": 816,
    "cxx/g1_reduce": 1056,
    "cxx/g1_segments": 1440,
    "cxx/g2_accumulate": 1824,
    "cxx/g2_reduce": 2304,
    "cxx/g2_segments": 3072,
    # ntt.cuh (kernels/gpu/cxx_ntt.py): the stack is the operands of the called Fr multiply
    # (two elements by address; the DIT passes three: the product's copy and the coset factor).
    "cxx/ntt_dif1": 64,
    "cxx/ntt_dif2": 64,
    "cxx/ntt_dif3": 64,
    "cxx/ntt_dit1": 192,
    "cxx/ntt_dit2": 192,
    "cxx/ntt_dit3": 192,
    "cxx/ntt_pow_table": 64,
    "cxx/ntt_bitrev": 0,
    "cxx/ntt_scale": 64,
    "cxx/ntt_abc": 128,
    "cxx/fr_field_ops": 64,
}


@dataclass(frozen=True)
class KernelSpec:
    """One launched kernel: ``kind`` "grid" (body(i, *args)) or "phase" (barrier-separated)."""

    name: str
    kind: str
    body: Any                       # the per-thread device function the host drivers launch
    nargs: int                      # arguments of ``body`` after the thread/phase indices
    pyfunc: Callable[..., None]     # the generated kernel (not yet jitted)
    sig: tuple                      # numba types of the kernel's parameters


def kernel_specs() -> list[KernelSpec]:
    """All numba kernels (``NttEngine``'s) with their launch signatures; the MSM kernels are
    C++ (kernels/gpu/cuda, compiled by nvcc in scripts/build_gpu_kernels.py)."""
    from numba import types as nt

    from kernels.gpu.launch import phase_kernel_source
    from kernels.gpu.ntt import build_ntt

    tg = cuda_target()
    ntt = build_ntt(tg)
    u32_2 = nt.Array(nt.uint32, 2, "C")
    u32_1 = nt.Array(nt.uint32, 1, "C")
    i64 = nt.int64
    b = nt.boolean

    def grid(name: str, body: Any, *args: Any) -> KernelSpec:
        return KernelSpec(name, "grid", body, len(args), grid_kernel_source(body, len(args)),
                          (i64, *args))

    phase_args = (u32_2, u32_2, i64, i64, i64, i64, b, b)
    return [
        KernelSpec("ntt_pass", "phase", ntt.pass_phase, len(phase_args),
                   phase_kernel_source(ntt.pass_phase, len(phase_args)), (i64, *phase_args)),
        grid("ntt_twiddles", ntt.twiddle, u32_2, u32_2, i64, u32_2),
        grid("ntt_coset_shift", ntt.coset, u32_2, u32_2, u32_2, i64, i64),
        grid("ntt_scale", ntt.scale, u32_2, u32_1),
        grid("ntt_bitrev", ntt.bitrev, u32_2, u32_2, i64),
        grid("to_limb_major", ntt.to_limb_major, u32_2, u32_2),
        grid("from_limb_major", ntt.from_limb_major, u32_2, u32_2),
        grid("h_join_abc", ntt.abc, u32_2, u32_2, u32_2, u32_2),
    ]


def sig_to_json(sig: tuple) -> list[Any]:
    """Kernel parameter types as data: "int64", "bool", or ["array", dtype, ndim]."""
    from numba import types as nt

    out: list[Any] = []
    for ty in sig:
        if isinstance(ty, nt.Array):
            if ty.layout != "C":
                raise ValueError(f"only C-contiguous array parameters are supported, got {ty}")
            out.append(["array", str(ty.dtype), ty.ndim])
        elif ty == nt.boolean:
            out.append("bool")
        elif isinstance(ty, nt.Integer):
            out.append(str(ty))
        else:
            raise ValueError(f"unsupported kernel parameter type {ty}")
    return out


def compile_kernel(name: str) -> tuple[str, float]:
    """PTX text of kernel ``name`` for sm_90 and the seconds NVVM took."""
    import time

    spec = next((s for s in kernel_specs() if s.name == name), None)
    if spec is None:
        raise KeyError(f"no kernel named {name!r}")
    t0 = time.perf_counter()
    ptx = compile_ptx(spec.pyfunc, spec.sig, PTX_CC)
    return ptx, time.perf_counter() - t0


# --------------------------------------------------------------------------- PTX facts

def entry_name(ptx: str) -> str:
    """The mangled name of the module's single ``.entry``."""
    names = re.findall(r"\.entry\s+([A-Za-z0-9_$.]+)\s*\(", ptx)
    if len(names) != 1:
        raise ValueError(f"expected one .entry in the PTX module, found {len(names)}")
    return names[0]


def entry_param_types(ptx: str) -> list[str]:
    """PTX types of the entry's parameters in order, e.g. ["u64", "u64", "u8"]."""
    m = re.search(r"\.entry\s+[A-Za-z0-9_$.]+\s*\((.*?)\)", ptx, re.S)
    if m is None:
        raise ValueError("no .entry parameter list in the PTX module")
    return re.findall(r"\.param\s+\.(\w+)", m.group(1))


# --------------------------------------------------------------------------- ptxas

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


def ptxas_version(ptxas: str | None = None) -> str:
    exe = ptxas or find_ptxas()
    if exe is None:
        raise FileNotFoundError("ptxas not found")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[-1]


def assemble(ptx: str, arch: str = ARCH, ptxas: str | None = None) -> tuple[bytes, str]:
    """Assemble PTX to a cubin with ``ptxas -v``; returns (cubin bytes, full -v report)."""
    exe = ptxas or find_ptxas()
    if exe is None:
        raise FileNotFoundError("ptxas not found")
    with tempfile.TemporaryDirectory() as d:
        src, dst = Path(d) / "k.ptx", Path(d) / "k.cubin"
        src.write_text(ptx)
        res = subprocess.run([exe, f"-arch={arch}", "-v", str(src), "-o", str(dst)],
                             capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise RuntimeError(f"ptxas failed: {res.stderr.strip()}")
        return dst.read_bytes(), res.stderr


_PROPS = re.compile(r"Function properties for (\S+)\s*\n\s*(\d+) bytes stack frame, "
                    r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def _used_line(report: str, entry: str) -> str | None:
    """The "Used N registers, ..." line ptxas prints after compiling ``entry``."""
    current = None
    for line in report.splitlines():
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            current = m.group(1)
        elif current == entry and "Used" in line and "registers" in line:
            return line
    return None


def _num(pattern: str, line: str) -> int | None:
    m = re.search(pattern, line)
    return int(m.group(1)) if m else None


def resource_report(report: str, entry: str) -> dict[str, Any]:
    """Registers, stack and spills of ``entry`` from a full ``ptxas -v`` report.

    Stack is the entry's cumulative stack (its frame plus the deepest call chain); spills are
    summed over every function in the module (a spill in a called device function counts).
    """
    functions = {m.group(1): {"stack_frame": int(m.group(2)), "spill_stores": int(m.group(3)),
                              "spill_loads": int(m.group(4))} for m in _PROPS.finditer(report)}
    used = _used_line(report, entry)
    if used is None or entry not in functions:
        raise ValueError(f"ptxas report has no resource lines for entry {entry}:\n{report}")
    own = functions[entry]
    cumulative = _num(r"(\d+) bytes cumulative stack size", used)
    return {
        "registers": _num(r"Used (\d+) registers", used),
        "barriers": _num(r"used (\d+) barriers", used) or 0,
        "shared_bytes": _num(r"(\d+) bytes smem", used) or 0,
        "stack_frame": own["stack_frame"],
        "stack_bytes": own["stack_frame"] if cumulative is None else cumulative,
        "spill_stores": sum(f["spill_stores"] for f in functions.values()),
        "spill_loads": sum(f["spill_loads"] for f in functions.values()),
        "functions": len(functions),
    }


def budget_problems(name: str, res: dict[str, Any]) -> list[str]:
    """Why kernel ``name``'s resources break the budget (empty: within it)."""
    problems = []
    if res["spill_stores"] or res["spill_loads"]:
        problems.append(f"{name} spills ({res['spill_stores']} bytes stores, "
                        f"{res['spill_loads']} bytes loads)")
    budget = STACK_BUDGET_BYTES.get(name)
    if budget is None:
        problems.append(f"{name} has no stack budget in kernels/gpu/ptx.py")
    elif res["stack_bytes"] > budget:
        problems.append(f"{name} uses {res['stack_bytes']} bytes of stack, budget {budget}")
    return problems
