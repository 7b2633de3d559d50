"""Ahead-of-time GPU kernels: built on a machine without a GPU, loaded on one without any JIT.

``scripts/build_gpu_kernels.py OUT`` compiles every kernel of :func:`kernels.gpu.ptx.kernel_specs`
to PTX (numba-cuda + NVVM) and to an sm_90 cubin (ptxas), and writes ``manifest.json``: per kernel
its mangled entry name, parameter types, files with their SHA-256, and ptxas's register, stack and
spill figures; for the bundle, the SHA-256 of the kernel sources it was built from.

On the GPU host, ``CUZK_GPU_KERNELS=OUT`` makes every :class:`~kernels.gpu.launch.Executor` on the
CUDA target launch these modules through CuPy (``RawModule``: the cubin, or the PTX when the driver
refuses the cubin). Nothing is compiled by numba there. The bundle is refused, loudly, when a file's
hash or the sources' hash differs from the manifest: stale kernels never produce figures.

Launch ABI: numba passes an array argument as the flattened fields of its data model (meminfo,
parent, nitems, itemsize, data, shape[ndim], strides[ndim], all 64-bit), an integer by value and a
boolean as one byte; :func:`pack_args` builds exactly that, and the build checks it against the
``.param`` list of every PTX entry.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
ENV = "CUZK_GPU_KERNELS"
FORMAT = 1
# The files whose content decides the generated device code (kernel bodies, field arithmetic,
# generated kernel wrappers, launch signatures).
SOURCES = ("kernels/field.py", "kernels/gpu/runtime.py", "kernels/gpu/launch.py",
           "kernels/gpu/ntt.py", "kernels/gpu/ptx.py")


class KernelBundleError(RuntimeError):
    """The ahead-of-time kernel bundle is missing, stale, corrupt or cannot be loaded."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source_hash(root: Path = ROOT) -> str:
    """SHA-256 over the kernel sources (path and content of each, in a fixed order)."""
    h = hashlib.sha256()
    for rel in SOURCES:
        h.update(rel.encode() + b"\0")
        h.update((root / rel).read_bytes())
        h.update(b"\0")
    return h.hexdigest()


# --------------------------------------------------------------------------- launch ABI

def param_widths(params: Sequence[Any]) -> list[int]:
    """Byte width of each flattened kernel parameter for the manifest's parameter types."""
    widths: list[int] = []
    for p in params:
        if isinstance(p, list):                       # ["array", dtype, ndim]
            widths += [8] * (5 + 2 * int(p[2]))
        elif p == "bool":
            widths.append(1)
        else:
            widths.append(np.dtype(p).itemsize)
    return widths


_PTX_WIDTH = {"u8": 1, "s8": 1, "b8": 1, "u16": 2, "s16": 2, "b16": 2, "u32": 4, "s32": 4,
              "b32": 4, "f32": 4, "u64": 8, "s64": 8, "b64": 8, "f64": 8}


def ptx_param_widths(types: Sequence[str]) -> list[int]:
    return [_PTX_WIDTH[t] for t in types]


def _device_ptr(a: Any) -> int:
    if hasattr(a, "data") and hasattr(a.data, "ptr"):          # cupy.ndarray
        return int(a.data.ptr)
    if hasattr(a, "__cuda_array_interface__"):
        return int(a.__cuda_array_interface__["data"][0])
    return int(a.ctypes.data)                                   # numpy (tests of the packing)


def pack_args(name: str, params: Sequence[Any], args: Sequence[Any]) -> list[Any]:
    """Kernel ``name``'s arguments as the numpy scalars numba's calling convention expects."""
    if len(args) != len(params):
        raise TypeError(f"{name}: {len(params)} parameters, {len(args)} arguments")
    out: list[Any] = []
    for k, (p, a) in enumerate(zip(params, args, strict=True)):
        if isinstance(p, list):
            _, dtype, ndim = p
            if getattr(a, "ndim", None) != ndim or str(getattr(a, "dtype", "")) != dtype:
                raise TypeError(f"{name}: argument {k} must be a {ndim}-D {dtype} array, got "
                                f"{getattr(a, 'ndim', '?')}-D {getattr(a, 'dtype', type(a))}")
            if not a.flags.c_contiguous:
                raise TypeError(f"{name}: argument {k} must be C-contiguous")
            out += [np.uint64(0), np.uint64(0), np.int64(a.size), np.int64(a.itemsize),
                    np.uint64(_device_ptr(a))]
            out += [np.int64(s) for s in a.shape]
            out += [np.int64(s) for s in a.strides]
        elif p == "bool":
            out.append(np.uint8(bool(a)))
        else:
            if isinstance(a, bool | np.bool_) or not isinstance(a, int | np.integer):
                raise TypeError(f"{name}: argument {k} must be an integer, got {type(a).__name__}")
            out.append(np.dtype(p).type(a))
    return out


# --------------------------------------------------------------------------- the bundle

@dataclass
class KernelEntry:
    name: str
    kind: str
    entry: str
    params: list[Any]
    ptx: Path
    cubin: Path | None
    resources: dict[str, Any]


class AotKernel:
    """A loaded kernel launched like a numba kernel: ``k[blocks, threads, stream](*args)``."""

    def __init__(self, entry: KernelEntry, function: Any, cupy: Any) -> None:
        self.entry = entry
        self._fn = function
        self._cp = cupy

    def __getitem__(self, config: tuple) -> Any:
        blocks, threads, stream = (*config, None)[:3]

        def launch(*args: Any) -> None:
            packed = pack_args(self.entry.name, self.entry.params, args)
            if stream is None or stream == 0:
                self._fn((int(blocks),), (int(threads),), tuple(packed))
                return
            with stream:
                self._fn((int(blocks),), (int(threads),), tuple(packed))

        return launch


class KernelBundle:
    """A verified bundle directory; :meth:`kernel` loads modules lazily through CuPy."""

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        self.path = path
        self.manifest = manifest
        self.entries = {
            name: KernelEntry(name, k["kind"], k["entry"], k["params"], path / k["ptx"],
                              path / k["cubin"] if k.get("cubin") else None, k["resources"])
            for name, k in manifest["kernels"].items()
        }
        self.loaded_from: dict[str, str] = {}
        self._by_body: dict[int, str] | None = None
        self._loaded: dict[str, AotKernel] = {}

    def name_for(self, body: Any) -> str:
        """The kernel name launching per-thread ``body`` (from the kernel specs)."""
        if self._by_body is None:
            from kernels.gpu.ptx import kernel_specs

            self._by_body = {id(s.body): s.name for s in kernel_specs()}
        name = self._by_body.get(id(body))
        if name is None or name not in self.entries:
            raise KernelBundleError(
                f"no ahead-of-time kernel for {getattr(body, '__name__', body)!r} in {self.path}; "
                "rebuild with scripts/build_gpu_kernels.py")
        return name

    def kernel(self, body: Any) -> AotKernel:
        name = self.name_for(body)
        if name not in self._loaded:
            self._loaded[name] = self._load(self.entries[name])
        return self._loaded[name]

    def _load(self, e: KernelEntry) -> AotKernel:
        import cupy

        errors = []
        for kind, path in (("cubin", e.cubin), ("ptx", e.ptx)):
            if path is None:
                continue
            try:
                fn = cupy.RawModule(path=str(path)).get_function(e.entry)
                self.loaded_from[e.name] = kind
                return AotKernel(e, fn, cupy)
            except Exception as exc:  # e.g. a driver older than the cubin's toolkit
                errors.append(f"{kind}: {type(exc).__name__}: {exc}")
        raise KernelBundleError(f"cannot load kernel {e.name} from {self.path}: "
                                + "; ".join(errors))


def load_bundle(path: Path | str, root: Path = ROOT) -> KernelBundle:
    """Read and verify a bundle: format, every file's SHA-256, and the kernel sources' hash."""
    path = Path(path)
    mf = path / "manifest.json"
    if not mf.is_file():
        raise KernelBundleError(f"{mf} not found; build it with scripts/build_gpu_kernels.py")
    manifest = json.loads(mf.read_text())
    if manifest.get("format") != FORMAT:
        raise KernelBundleError(f"{mf}: format {manifest.get('format')}, expected {FORMAT}")
    want = source_hash(root)
    if manifest.get("source_sha256") != want:
        raise KernelBundleError(
            f"{path} was built from other kernel sources (manifest {manifest.get('source_sha256')}"
            f", this tree {want}); rebuild with scripts/build_gpu_kernels.py")
    for name, k in manifest["kernels"].items():
        for field in ("ptx", "cubin"):
            if not k.get(field):
                continue
            f = path / k[field]
            if not f.is_file():
                raise KernelBundleError(f"{name}: {f} is missing")
            got = sha256_bytes(f.read_bytes())
            if got != k[f"{field}_sha256"]:
                raise KernelBundleError(f"{name}: {f} has SHA-256 {got}, manifest says "
                                        f"{k[f'{field}_sha256']}")
    _verify_cxx(path, manifest)
    return KernelBundle(path, manifest)


def _verify_cxx(path: Path, manifest: dict[str, Any]) -> None:
    """The C++ kernels' cubins: built from this tree's C++ sources, files as the manifest says."""
    from kernels.gpu import cxx_kernels

    cxx = manifest.get("cxx")
    if not cxx:
        raise KernelBundleError(f"{path} has no C++ kernels; rebuild with "
                                "scripts/build_gpu_kernels.py")
    want = cxx_kernels.source_hash()
    if cxx.get("source_sha256") != want:
        raise KernelBundleError(
            f"{path}: its C++ kernels were built from other sources (manifest "
            f"{cxx.get('source_sha256')}, this tree {want}); rebuild with "
            "scripts/build_gpu_kernels.py")
    for variant, e in cxx["variants"].items():
        f = path / e["cubin"]
        if not f.is_file():
            raise KernelBundleError(f"C++ kernels ({variant}): {f} is missing")
        if sha256_bytes(f.read_bytes()) != e["cubin_sha256"]:
            raise KernelBundleError(f"C++ kernels ({variant}): {f} does not match its SHA-256")


@functools.cache
def configured_bundle() -> KernelBundle | None:
    """The bundle named by ``CUZK_GPU_KERNELS`` (verified once per process), or None: JIT."""
    where = os.environ.get(ENV, "").strip()
    if not where:
        return None
    path = Path(where)
    if not path.is_absolute():
        path = ROOT / path
    return load_bundle(path)
