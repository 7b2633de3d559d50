"""Compilation targets for the GPU kernels: one kernel source, three ways to run it.

Every per-thread routine in ``kernels/gpu`` is written once as a plain Python function and built
for a :class:`Target`:

* ``cuda``: ``numba.cuda.jit(device=True)`` device functions, launched as real CUDA kernels
  (or compiled to PTX for sm_90 in CI, where there is no GPU);
* ``cudasim``: the same kernels under the numba CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``),
  which checks indexing and ``syncthreads`` placement on tiny inputs;
* ``cpu``: ``numba.njit`` functions driven by a CPU grid loop (:func:`cpu_grid`), which runs the
  exact same per-thread code at realistic sizes in milliseconds, so CI checks the logic at scale.

Local scratch arrays are written ``dev.local.array(n, np.uint32)`` where ``dev`` is the
``numba.cuda`` module on the device and a stand-in module whose ``local.array`` is ``np.empty``
on the CPU and in the simulator: numba only types ``cuda.local.array`` as a module attribute.
"""

from __future__ import annotations

import contextlib
import functools
import os
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numba
import numpy as np

from kernels.field import FQ_PARAMS, FR_PARAMS, make_scalar_ops

PTX_CC = (9, 0)   # H100/H200; the PTX ISA numba-cuda emits with NVVM 13.0 is 9.0


def simulator_enabled() -> bool:
    """True when numba.cuda is the simulator (the variable is read once, at numba.cuda import)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "") not in ("", "0")


def _cpu_dev_module() -> types.ModuleType:
    dev = types.ModuleType("cuzk_cpu_dev")
    local = types.ModuleType("cuzk_cpu_dev.local")
    local.array = np.empty  # type: ignore[attr-defined]
    dev.local = local  # type: ignore[attr-defined]
    return dev


@dataclass(frozen=True)
class Target:
    """What a kernel builder needs: a device-function decorator, scratch arrays, field ops."""

    name: str                      # "cpu" | "cuda" | "cudasim"
    jit: Callable[[Any], Any]      # decorator for per-thread (device) functions
    dev: Any                       # module with .local.array(shape, dtype)
    fr: types.SimpleNamespace      # kernels.field scalar ops for Fr, built with ``jit``
    fq: types.SimpleNamespace      # ... and for Fq
    # decorator for device functions that must be inlined into their caller (NVVM alwaysinline):
    # a point accumulator passed to a non-inlined call lives in local memory (stack), inlined it
    # can stay in registers. Same as ``jit`` off the device.
    jit_inline: Callable[[Any], Any] | None = None
    cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def is_cpu(self) -> bool:
        return self.name == "cpu"

    @property
    def inline(self) -> Callable[[Any], Any]:
        return self.jit_inline or self.jit

    def memo(self, key: str, build: Callable[[], Any]) -> Any:
        """Build a kernel family once per target (builders are costly: they create dispatchers)."""
        if key not in self.cache:
            self.cache[key] = build()
        return self.cache[key]


@functools.cache
def cpu_target() -> Target:
    jit = numba.njit(nogil=True)
    return Target("cpu", jit, _cpu_dev_module(), make_scalar_ops(FR_PARAMS, jit),
                  make_scalar_ops(FQ_PARAMS, jit))


@functools.cache
def cuda_target() -> Target:
    """Device functions for real kernels, or the simulator when NUMBA_ENABLE_CUDASIM=1."""
    from numba import cuda

    jit = cuda.jit(device=True)
    if simulator_enabled():
        return Target("cudasim", jit, _cpu_dev_module(), make_scalar_ops(FR_PARAMS, jit),
                      make_scalar_ops(FQ_PARAMS, jit))
    return Target("cuda", jit, cuda, make_scalar_ops(FR_PARAMS, jit),
                  make_scalar_ops(FQ_PARAMS, jit),
                  jit_inline=cuda.jit(device=True, forceinline=True))


# --------------------------------------------------------------------------- kernel generation

def _arg_names(nargs: int) -> str:
    return ", ".join(f"a{j}" for j in range(nargs))


def grid_kernel_source(body: Any, nargs: int) -> Callable[..., None]:
    """A CUDA kernel ``kern(n, a0..)`` running ``body(i, a0..)`` for every i < n (grid-stride).

    Generated because numba kernels take no ``*args``; the kernel is not yet ``cuda.jit``-ed, so
    the same function object feeds both ``cuda.jit`` and ``cuda.compile_ptx``.
    """
    from numba import cuda

    names = _arg_names(nargs)
    src = (
        f"def kern(n, {names}):\n"
        f"    i = cuda.grid(1)\n"
        f"    step = cuda.gridsize(1)\n"
        f"    while i < n:\n"
        f"        body(i, {names})\n"
        f"        i += step\n"
    )
    ns: dict[str, Any] = {"cuda": cuda, "body": body}
    exec(src, ns)
    kern = ns["kern"]
    kern.__qualname__ = kern.__name__ = f"grid_{getattr(body, '__name__', 'k')}"
    return kern


def cpu_grid(body: Any, nargs: int) -> Callable[..., None]:
    """The CPU twin of :func:`grid_kernel_source`: an njit loop over the same ``body``."""
    names = _arg_names(nargs)
    src = (
        f"def loop(n, {names}):\n"
        f"    for i in range(n):\n"
        f"        body(i, {names})\n"
    )
    ns: dict[str, Any] = {"body": body}
    exec(src, ns)
    return numba.njit(nogil=True)(ns["loop"])


# --------------------------------------------------------------------------- PTX compilation

@contextlib.contextmanager
def compile_for_cc(cc: tuple[int, int]) -> Iterator[None]:
    """Let device functions compile without a GPU.

    numba-cuda compiles a device function called from a kernel for the *current device's* compute
    capability, which needs a driver; for ``compile_ptx`` on a machine without one we answer
    ``cc`` instead. Where a device exists nothing is patched.
    """
    from numba.cuda import dispatcher

    if _has_device():
        yield
        return
    original = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=cc)
    try:
        yield
    finally:
        dispatcher.get_current_device = original


def _has_device() -> bool:
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:
        return False


def compile_ptx(pyfunc: Callable[..., None], sig: tuple, cc: tuple[int, int] = PTX_CC) -> str:
    """PTX text of one kernel for ``cc`` (default sm_90)."""
    from numba import cuda

    with compile_for_cc(cc):
        ptx, _ = cuda.compile_ptx(pyfunc, sig, cc=cc)
    return ptx


def ptx_isa_version(ptx: str) -> str:
    """The ``.version`` directive of a PTX module (what the driver checks)."""
    for line in ptx.splitlines():
        line = line.strip()
        if line.startswith(".version"):
            return line.split()[1]
    raise ValueError("no .version directive in PTX")


def ptx_target(ptx: str) -> str:
    for line in ptx.splitlines():
        line = line.strip()
        if line.startswith(".target"):
            return line.split()[1].rstrip(",")
    raise ValueError("no .target directive in PTX")
