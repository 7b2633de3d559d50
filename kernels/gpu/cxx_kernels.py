"""The CUDA C++ kernels of ``kernels/gpu/cuda`` (MSM for G1 and G2, field tests) and their runners.

One source, two runners with one calling convention, ``launch(name, n_threads, *args)`` (arrays
are passed as pointers, integers as u32):

* :class:`DeviceKernels`: the sm_90 cubin that ``scripts/build_gpu_kernels.py`` compiles with
  nvcc into the kernel bundle (``cxx/msm_<variant>.cubin``), loaded through CuPy's
  ``RawModule``; on a device with no bundle, NVRTC compiles the same source once per process.
* :class:`HostKernels`: the host twin, the same per-thread bodies compiled by the system C++
  compiler into a shared library (cached by source hash) and called through ctypes. The CPU
  tests check the kernels' arithmetic and the MSM driver against arkworks with it.

Variants (``field.cuh``): ``ptx-callmul`` (carry chains, the multiply called rather than
inlined: the engine's default, ``DEFAULT_VARIANT``), ``ptx`` (everything inlined), ``portable``
(64-bit products, what the host twin always runs), ``ptx-rowloop`` and ``portable-rowloop`` (the
multiply inlined with its rows looped). The inlined builds are eight times the code and
1.5-1.9x slower on an H200: the instruction cache, not the arithmetic, bounded them. The device
check times each (docs/gpu-check.md).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

CUDA_DIR = Path(__file__).resolve().parent / "cuda"
SOURCE = CUDA_DIR / "msm.cu"
HEADERS = ("field.cuh", "bls12_381.cuh", "xyzz.cuh", "ntt.cuh")
VARIANTS = ("ptx-callmul", "ptx", "portable", "ptx-rowloop", "portable-rowloop")
VARIANT_ENV = "CUZK_GPU_FIELD"          # one of VARIANTS; DEFAULT_VARIANT when unset
DEFAULT_VARIANT = "ptx-callmul"
ARCH = "sm_90"
BLOCK = 128
NVCC_FLAGS = ("-std=c++17", "-O3", "--use_fast_math")
KERNELS = (
    "msm_digit_counts", "msm_digit_scatter",
    "g1_accumulate", "g1_reduce", "g1_segments", "g1_field_ops",
    "g2_accumulate", "g2_reduce", "g2_segments", "g2_field_ops",
    # ntt.cuh: the NTT and H pipeline over Fr (kernels/gpu/cxx_ntt.py), Fr's field tests
    *(f"ntt_{o}{k}" for o in ("dif", "dit") for k in (1, 2, 3)),
    "ntt_pow_table", "ntt_bitrev", "ntt_scale", "ntt_abc", "fr_field_ops",
)


class CxxKernelError(RuntimeError):
    """The C++ kernels cannot be built or loaded here."""


def source_files() -> list[Path]:
    return [SOURCE, *(CUDA_DIR / h for h in HEADERS)]


def source_hash() -> str:
    """SHA-256 over the C++ kernel sources (name and content of each)."""
    h = hashlib.sha256()
    for p in source_files():
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def variant_defines(variant: str) -> list[str]:
    if variant not in VARIANTS:
        raise CxxKernelError(f"unknown field variant {variant!r} (one of {', '.join(VARIANTS)})")
    return {"ptx": [], "portable": ["-DCUZK_PORTABLE_FIELD"],
            "ptx-callmul": ["-DCUZK_CALL_MUL"],
            "ptx-rowloop": ["-DCUZK_ROW_LOOP"],
            "portable-rowloop": ["-DCUZK_PORTABLE_FIELD", "-DCUZK_ROW_LOOP"]}[variant]


def configured_variant() -> str:
    v = os.environ.get(VARIANT_ENV, DEFAULT_VARIANT).strip() or DEFAULT_VARIANT
    variant_defines(v)
    return v


def nvcc_command(variant: str, out: Path, nvcc: str = "nvcc") -> list[str]:
    """The nvcc call that compiles the cubin of ``variant`` (with ptxas's resource report)."""
    return [nvcc, *NVCC_FLAGS, "-cubin", f"-arch={ARCH}", "-Xptxas", "-v",
            *variant_defines(variant), str(SOURCE), "-o", str(out)]


# --------------------------------------------------------------------------- host twin

def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cuzk" / "cxx-host"


def build_host_library(out_dir: Path | None = None) -> Path:
    """Compile the host twin (once per source hash) and return the shared library's path."""
    out_dir = out_dir or _cache_dir()
    lib = out_dir / f"msm-host-{source_hash()[:16]}.so"
    if lib.exists():
        return lib
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        raise CxxKernelError("no C++ compiler (c++ or g++) to build the kernels' host twin")
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = lib.with_suffix(f".{os.getpid()}.tmp")
    cmd = [cxx, "-std=c++17", "-O2", "-shared", "-fPIC", "-x", "c++", str(SOURCE), "-o", str(tmp)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise CxxKernelError(f"building the host twin failed ({' '.join(cmd)}):\n{proc.stderr}")
    tmp.replace(lib)
    return lib


class HostKernels:
    """The kernels' host twin: ``launch`` runs a kernel's per-thread body for every thread."""

    xp = np
    variant = "portable"

    def __init__(self, lib: Path | None = None) -> None:
        self._lib = ctypes.CDLL(str(lib or build_host_library()))

    def launch(self, name: str, n_threads: int, *args: Any) -> None:
        fn = getattr(self._lib, f"host_{name}")
        cargs: list[Any] = [ctypes.c_uint32(n_threads)]
        for a in args:
            if isinstance(a, np.ndarray):
                if a.dtype != np.uint32 or not a.flags.c_contiguous:
                    raise TypeError(f"{name}: arrays must be C-contiguous uint32, got {a.dtype}")
                cargs.append(ctypes.c_void_p(a.ctypes.data))
            else:
                cargs.append(ctypes.c_uint32(int(a)))
        fn(*cargs)

    def synchronize(self) -> None:
        """Nothing queued: a host launch has finished when it returns."""

    def to_host(self, arr: Any) -> np.ndarray:
        return np.asarray(arr)


@functools.cache
def host_kernels() -> HostKernels:
    return HostKernels()


# --------------------------------------------------------------------------- device

def bundle_cubin(bundle_dir: Path, variant: str) -> Path:
    return bundle_dir / "cxx" / f"msm_{variant}.cubin"


class DeviceKernels:
    """The kernels on the current CUDA device, launched on ``stream`` (None: CuPy's current)."""

    def __init__(self, cupy: Any, module: Any, variant: str, stream: Any = None) -> None:
        self.xp = cupy
        self.variant = variant
        self._stream = stream
        self._fns = {name: module.get_function(name) for name in KERNELS}

    def launch(self, name: str, n_threads: int, *args: Any) -> None:
        if n_threads <= 0:
            return
        blocks = -(-n_threads // BLOCK)
        cargs = [np.uint32(n_threads)]
        cargs += [a if hasattr(a, "data") and hasattr(a, "device") else np.uint32(int(a))
                  for a in args]
        if self._stream is None:
            self._fns[name]((blocks,), (BLOCK,), tuple(cargs))
            return
        with self._stream:                  # RawModule functions launch on the current stream
            self._fns[name]((blocks,), (BLOCK,), tuple(cargs))

    def synchronize(self) -> None:
        if self._stream is not None:
            self._stream.synchronize()
        else:
            self.xp.cuda.get_current_stream().synchronize()

    def to_host(self, arr: Any) -> np.ndarray:
        """``arr`` copied back once the kernels queued before it on this stream are done."""
        stream = self._stream or self.xp.cuda.get_current_stream()
        host = arr.get(stream=stream)
        stream.synchronize()
        return np.asarray(host)


@functools.cache
def _device_module(variant: str) -> Any:
    """The cubin from the configured bundle (checked against this tree), else NVRTC."""
    import cupy

    from kernels.gpu.aot import configured_bundle

    bundle = configured_bundle()            # verified: C++ sources and cubins' hashes
    if bundle is not None:
        if variant not in bundle.manifest["cxx"]["variants"]:
            raise CxxKernelError(f"the kernel bundle at {bundle.path} has no {variant!r} C++ "
                                 "kernels (scripts/build_gpu_kernels.py --cxx-variants)")
        return cupy.RawModule(path=str(bundle_cubin(bundle.path, variant)))
    code = SOURCE.read_text()
    opts = ("-std=c++17", f"-I{CUDA_DIR}", *variant_defines(variant))
    return cupy.RawModule(code=code, options=opts, name_expressions=None)


def device_kernels(cupy: Any, stream: Any = None, variant: str | None = None) -> DeviceKernels:
    v = variant or configured_variant()
    return DeviceKernels(cupy, _device_module(v), v, stream)
