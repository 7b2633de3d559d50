"""The prover's typed seams to its compute backends: a backend with device memory is told apart
by the ``DeviceMemory`` protocol (mypy checks the CUDA backend against it), never by probing
attribute names, and the real prover reads device sizes through it."""

from __future__ import annotations

import ast
from pathlib import Path

from cuzk.engine.settings import EngineSettings, default_proof_kinds
from cuzk.prover.backend import DeviceMemory
from cuzk.prover.cpu_backend import CpuBackend
from cuzk.prover.keys import ProvingKey
from cuzk.prover.real_prover import RealProver

PROVER_DIR = Path(__file__).resolve().parents[3] / "cuzk" / "prover"
GIB = 1 << 30


class FakeDevice(CpuBackend):
    """The CPU backend posing as a device with 80 GiB, 3 GiB per key and 1 GiB per phase."""

    device_index = 7

    def memory_info(self) -> tuple[int | None, int | None]:
        return 60 * GIB, 80 * GIB

    def key_device_bytes(self, key: ProvingKey) -> int:
        return 3 * GIB

    def working_bytes(self, key: ProvingKey) -> int:
        return GIB


def _prover() -> RealProver:
    return RealProver(EngineSettings(backend="cpu", proof_kinds=default_proof_kinds()))


def test_the_cpu_backend_has_no_device_memory_and_a_device_backend_has() -> None:
    assert not isinstance(CpuBackend(), DeviceMemory)
    assert isinstance(FakeDevice(), DeviceMemory)


def test_the_real_prover_reads_device_sizes_through_the_seam() -> None:
    prover = _prover()
    assert prover.device_memory_bytes("cpu") is None
    assert prover.device_memory_bytes("cuda:7") is None  # no such backend
    prover._backends["cuda:7"] = FakeDevice()
    assert prover.device_memory_bytes("cuda:7") == 80 * GIB


def test_no_backend_is_probed_by_attribute_name() -> None:
    """``hasattr``/``getattr`` on a backend hides a capability from mypy: the protocols
    (``DevicePhase``, ``DeviceMemory``) declare them instead."""
    probes = []
    for path in PROVER_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("hasattr", "getattr") and node.args
                    and "backend" in ast.unparse(node.args[0])):
                probes.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert probes == []
