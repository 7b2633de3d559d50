"""The seam between the Groth16 steps and the hardware that runs the GPU phase."""

from __future__ import annotations

import importlib.util
import sys
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from cuzk.errors import BackendUnavailable

if TYPE_CHECKING:
    from cuzk.prover.keys import ProvingKey

G1_SECTIONS = ("A", "B1", "C", "H")


def cupy_installed() -> bool:
    """Whether CuPy can be imported at all. Without it no CUDA device is usable, and asking the
    CUDA backend (which imports numba) costs a CPU-only process half a second to be told so."""
    return "cupy" in sys.modules or importlib.util.find_spec("cupy") is not None


@runtime_checkable
class DevicePhase(Protocol):
    """A backend that runs the whole GPU phase with its data on a device (CUDA): H and all five
    MSMs, only the sums coming back, each step timed."""

    def device_gpu_phase(
        self, key: ProvingKey, a: np.ndarray, b: np.ndarray, c: np.ndarray, witness: np.ndarray
    ) -> tuple[G1Point, G1Point, G1Point, G1Point, G2Point]:
        """The five sums (A, B1, C, H in G1, B2 in G2) of one partition."""
        ...

    def phase_steps_ms(self) -> dict[str, float]:
        """Milliseconds of each step of the last phase ("H", "MSM A", ... "MSM B2")."""
        ...


@runtime_checkable
class DeviceMemory(Protocol):
    """A backend with memory of its own (a CUDA device): what the engine sizes the device's
    budget and a key's residency from, and how telemetry finds the device in NVML. The CPU
    backend has none; ``isinstance(backend, DeviceMemory)`` tells, checked by mypy at every
    caller instead of probing attributes by name."""

    device_index: int

    def memory_info(self) -> tuple[int | None, int | None]:
        """(free, total) bytes of the device, None where the driver does not say."""
        ...

    def key_device_bytes(self, key: ProvingKey) -> int:
        """Device bytes the key takes once uploaded (its resident sections and tables)."""
        ...

    def working_bytes(self, key: ProvingKey) -> int:
        """Device bytes one GPU phase of this key needs beside the key."""
        ...


def no_cuda(asked_by: str, fallback: str) -> BackendUnavailable:
    """The error for a CUDA backend asked for (``asked_by``: the setting or flag) on a host
    where no CUDA device is usable: why, and the two ways out (the ``gpu`` extra on a GPU host,
    or ``fallback``, the setting that runs the CPU backend)."""
    why = ("CuPy is not installed" if not cupy_installed() else
           "CuPy sees no device; an NVIDIA driver of 580 or newer is needed")
    return BackendUnavailable(
        f"{asked_by}: no usable CUDA device ({why}): on a GPU host install the gpu extra"
        f" (.venv/bin/pip install -c constraints.txt -e '.[gpu]'), else use {fallback}")


class ComputeBackend(Protocol):
    """What ``gpu_phase`` needs: H on the odd coset and the four G1 MSMs."""

    name: str
    device: str

    def upload_key(self, key: ProvingKey) -> int:
        """Make the key's G1 sections resident; returns the device bytes used (0 on the CPU)."""
        ...

    def drop_key(self, key: ProvingKey) -> None: ...

    def h_evaluations(
        self, key: ProvingKey, a: np.ndarray, b: np.ndarray, c: np.ndarray
    ) -> np.ndarray:
        """(a*b - c) on the odd coset, normal form, from Montgomery evaluations on the domain."""
        ...

    def msm_g1(self, key: ProvingKey, section: str, scalars: np.ndarray) -> G1Point: ...
