"""NVML gauges land on the right CUDA device: matched by PCI bus id, never by ordinal."""

from __future__ import annotations

from types import SimpleNamespace
from typing import ClassVar

from prometheus_client import CollectorRegistry

from cuzk.telemetry.nvml import cuda_device_ids, parse_pci_bus_id, register_nvml


class FakeNvml:
    """pynvml's calls the collector makes, over devices listed in NVML's own (PCI) order."""

    def __init__(self, devices: list[tuple[str, int, int]]) -> None:
        self.devices = devices  # (NVML's bus id, used bytes, utilisation percent)
        self.initialised = False

    def nvmlInit(self) -> None:
        self.initialised = True

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetPciInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(busId=self.devices[h][0].encode())  # pynvml may give bytes

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(used=self.devices[h][1])

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=self.devices[h][2])


class FakeProver:
    """CUDA numbers by speed (and CUDA_VISIBLE_DEVICES renumbers): cuda:0 is NVML's third."""

    name = "cuda"
    devices = ("cuda:0", "cuda:1", "cuda:2")
    bus: ClassVar[dict[str, str | None]] = {
        "cuda:0": "0000:C1:00.0", "cuda:1": "0000:3B:00.0", "cuda:2": None}

    def device_pci_bus_id(self, device: str) -> str | None:
        return self.bus[device]


def _values(registry: CollectorRegistry, name: str) -> dict[str, float]:
    return {s.labels["device"]: s.value for m in registry.collect() if m.name == name
            for s in m.samples}


def test_devices_are_matched_by_pci_bus_id_not_by_ordinal():
    nvml = FakeNvml([
        ("00000000:3B:00.0", 1 << 30, 10),  # NVML index 0 is CUDA's cuda:1
        ("00000000:5E:00.0", 7 << 30, 70),  # a device this process does not use
        ("00000000:C1:00.0", 3 << 30, 30),  # NVML index 2 is CUDA's cuda:0
    ])
    registry = CollectorRegistry()
    assert register_nvml(registry, cuda_device_ids(FakeProver()), nvml=nvml)
    assert nvml.initialised
    assert _values(registry, "cuzk_device_memory_used_bytes") == {
        "cuda:0": 3 << 30, "cuda:1": 1 << 30}  # cuda:2 (no bus id) is left out, not guessed
    assert _values(registry, "cuzk_device_utilization_ratio") == {"cuda:0": 0.3, "cuda:1": 0.1}


def test_no_match_registers_nothing():
    registry = CollectorRegistry()
    nvml = FakeNvml([("00000000:01:00.0", 1, 1)])
    assert not register_nvml(registry, [("cuda:0", "0000:02:00.0")], nvml=nvml)
    assert list(registry.collect()) == []


def test_pci_bus_id_forms_agree():
    assert parse_pci_bus_id("0000:3B:00.0") == parse_pci_bus_id(b"00000000:3b:00.0\x00")
    assert parse_pci_bus_id("3b:00.0") == (0, 0x3B, 0, 0)
    assert parse_pci_bus_id("GPU-1234") is None
