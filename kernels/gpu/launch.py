"""Executors: run the per-thread bodies as CUDA kernels, under the simulator, or as CPU loops.

The host drivers (``ntt.py``, ``msm.py``) are written once against :class:`Executor`, with
``xp`` standing for CuPy on the device and NumPy elsewhere. Two kernel shapes exist:

* grid kernels: ``body(i, *args)`` for every i < n (one thread per element, grid-stride);
* phase kernels: ``body(phase, block, tid, nthreads, shared, *args)`` for ``nphases`` phases with
  ``syncthreads()`` between phases and one ``(8, SHARED_ELEMS)`` uint32 shared tile per block,
  which is how the NTT runs several butterfly stages in shared memory. The CPU twin runs every
  thread of a block through a phase before the next phase, which is exactly the barrier's meaning.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from kernels.gpu.runtime import Target, _arg_names, cpu_grid, grid_kernel_source

SHARED_LIMBS = 8          # an Fr element
SHARED_ELEMS = 1024       # 32 KiB of Fr elements per block: fits the default 48 KiB limit


def phase_kernel_source(body: Any, nargs: int) -> Any:
    """CUDA kernel running ``body`` phase by phase with a barrier after each (not yet jitted)."""
    from numba import cuda

    names = _arg_names(nargs)
    src = (
        f"def kern(nphases, {names}):\n"
        f"    sh = cuda.shared.array(({SHARED_LIMBS}, {SHARED_ELEMS}), np.uint32)\n"
        f"    blk = cuda.blockIdx.x\n"
        f"    tid = cuda.threadIdx.x\n"
        f"    nthr = cuda.blockDim.x\n"
        f"    for ph in range(nphases):\n"
        f"        body(ph, blk, tid, nthr, sh, {names})\n"
        f"        cuda.syncthreads()\n"
    )
    ns: dict[str, Any] = {"cuda": cuda, "np": np, "body": body}
    exec(src, ns)
    return ns["kern"]


def cpu_phases(body: Any, nargs: int) -> Any:
    names = _arg_names(nargs)
    src = (
        f"def loop(nblocks, nthr, nphases, {names}):\n"
        f"    sh = np.empty(({SHARED_LIMBS}, {SHARED_ELEMS}), np.uint32)\n"
        f"    for blk in range(nblocks):\n"
        f"        for ph in range(nphases):\n"
        f"            for tid in range(nthr):\n"
        f"                body(ph, blk, tid, nthr, sh, {names})\n"
    )
    ns: dict[str, Any] = {"np": np, "body": body}
    exec(src, ns)
    return numba.njit(nogil=True)(ns["loop"])


class Executor:
    """Launches bodies built for ``target``; ``xp`` is the array module of its memory."""

    def __init__(self, target: Target, xp: Any, stream: Any = None, block: int = 128,
                 phase_block: int = 256, kernels: Any = None) -> None:
        self.target = target
        # An ahead-of-time kernel bundle (kernels/gpu/aot.py): on the CUDA target every kernel
        # then comes from it and numba compiles nothing; None: numba JIT-compiles on first use.
        self.kernels = kernels if target.name == "cuda" else None
        self.xp = xp
        self.stream = stream              # a CuPy stream on the device, else None
        self.block = block                # threads per block for grid kernels
        self.phase_block = phase_block    # max threads per block for phase kernels
        self._nb_stream: Any = None

    # -- plumbing ----------------------------------------------------------------------
    @property
    def on_device(self) -> bool:
        return self.target.name == "cuda"

    def _numba_stream(self) -> Any:
        if self.kernels is not None:
            return self.stream            # bundle kernels launch on the CuPy stream itself
        if self.stream is None:
            return 0
        if self._nb_stream is None:
            from numba import cuda

            self._nb_stream = cuda.external_stream(self.stream.ptr)
        return self._nb_stream

    def _arg(self, a: Any) -> Any:
        if self.kernels is not None:
            return a                      # the bundle's launcher packs arrays itself
        if self.on_device and hasattr(a, "__cuda_array_interface__"):
            from numba import cuda

            return cuda.as_cuda_array(a, sync=False)
        return a

    def _kernel(self, kind: str, body: Any, nargs: int) -> Any:
        key = f"{kind}:{id(body)}:{nargs}:{'aot' if self.kernels is not None else 'jit'}"

        def build() -> Any:
            if self.kernels is not None:
                return self.kernels.kernel(body)
            if self.target.is_cpu:
                return cpu_grid(body, nargs) if kind == "grid" else cpu_phases(body, nargs)
            from numba import cuda

            make = grid_kernel_source if kind == "grid" else phase_kernel_source
            src = make(body, nargs)
            return cuda.jit(src)

        return self.target.memo(key, build)

    # -- launches ----------------------------------------------------------------------
    def grid(self, body: Any, n: int, *args: Any) -> None:
        """``body(i, *args)`` for i in [0, n)."""
        if n <= 0:
            return
        k = self._kernel("grid", body, len(args))
        if self.target.is_cpu:
            k(n, *args)
            return
        tpb = min(self.block, n)
        blocks = (n + tpb - 1) // tpb
        k[blocks, tpb, self._numba_stream()](n, *(self._arg(a) for a in args))

    def phases(self, body: Any, nblocks: int, nthreads: int, nphases: int, *args: Any) -> None:
        """``nphases`` barrier-separated phases of ``body`` over ``nblocks`` blocks."""
        k = self._kernel("phase", body, len(args))
        nthreads = max(1, min(nthreads, self.phase_block))
        if self.target.is_cpu:
            k(nblocks, nthreads, nphases, *args)
            return
        k[nblocks, nthreads, self._numba_stream()](nphases, *(self._arg(a) for a in args))

    def synchronize(self) -> None:
        if self.stream is not None:
            self.stream.synchronize()
