"""NVML gauges land on the right CUDA device: matched by PCI bus id, never by ordinal."""

from __future__ import annotations

from types import SimpleNamespace
from typing import ClassVar

import pytest
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


# ---------------------------------------------------------------------------------------------
# A recording in place of the driver (telemetry.nvml_replay)


def _recording(tmp_path, devices: dict, interval: float = 1.0):
    import json

    path = tmp_path / "nvml.json"
    path.write_text(json.dumps({"format": "cuzk-nvml-recording/1", "interval_s": interval,
                                "devices": devices}))
    return path


def test_replay_exports_the_recorded_samples_in_time_for_the_engines_devices(tmp_path):
    from cuzk.telemetry.nvml import register_nvml_replay

    path = _recording(tmp_path, {
        "cpu": {"utilization_percent": [23, 19, 27], "memory_used_bytes": [10, 20, 30]},
        "cuda:7": {"utilization_percent": [90], "memory_used_bytes": [1]},  # not this engine's
    })
    now = [100.0]
    registry = CollectorRegistry()
    assert register_nvml_replay(registry, ["cpu"], path, clock=lambda: now[0]) == ["cpu"]
    seen = []
    for t in (0.0, 1.2, 2.5, 3.1):  # one sample per interval_s, looping
        now[0] = 100.0 + t
        seen.append((_values(registry, "cuzk_device_utilization_ratio"),
                     _values(registry, "cuzk_device_memory_used_bytes")))
    assert seen == [({"cpu": 0.23}, {"cpu": 10}), ({"cpu": 0.19}, {"cpu": 20}),
                    ({"cpu": 0.27}, {"cpu": 30}), ({"cpu": 0.23}, {"cpu": 10})]


def test_replay_of_devices_the_engine_lacks_registers_nothing(tmp_path):
    from cuzk.telemetry.nvml import register_nvml_replay

    path = _recording(tmp_path, {"cuda:0": {"utilization_percent": [5],
                                            "memory_used_bytes": [1]}})
    registry = CollectorRegistry()
    assert register_nvml_replay(registry, ["cpu"], path) == []
    assert list(registry.collect()) == []


def test_bad_recordings_are_refused_with_the_reason(tmp_path):
    import pytest

    from cuzk.telemetry.nvml import load_recording

    with pytest.raises(ValueError, match="cannot read"):
        load_recording(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ValueError, match="not JSON"):
        load_recording(bad)
    bad.write_text('{"devices": {}}')
    with pytest.raises(ValueError, match="not an NVML recording"):
        load_recording(bad)
    with pytest.raises(ValueError, match="interval_s"):
        load_recording(_recording(tmp_path, {"cpu": {}}, interval=0))
    with pytest.raises(ValueError, match=r"devices.cpu.utilization_percent .*0..100"):
        load_recording(_recording(tmp_path, {"cpu": {"utilization_percent": [101],
                                                     "memory_used_bytes": [1]}}))
    with pytest.raises(ValueError, match=r"devices\.cpu\.memory_used_bytes"):
        load_recording(_recording(tmp_path, {"cpu": {"utilization_percent": [1]}}))


def test_engine_metrics_export_a_replay_beside_the_engine_series(tmp_path):
    """EngineMetrics with nvml_replay: the device gauges carry the engine's device label, the
    one its workers' busy series carry, so rules can join them on device."""
    from cuzk.engine import Engine
    from cuzk.engine.settings import EngineSettings
    from cuzk.simulated_prover import ScriptedProver
    from cuzk.telemetry.metrics import EngineMetrics

    path = _recording(tmp_path, {"cpu": {"utilization_percent": [23],
                                         "memory_used_bytes": [1 << 30]}})
    engine = Engine(EngineSettings(proof_kinds={}), ScriptedProver({}))
    metrics = EngineMetrics(engine, nvml_replay=path)
    try:
        text = metrics.render()[0].decode()
    finally:
        metrics.close()
    assert 'cuzk_device_utilization_ratio{device="cpu"} 0.23' in text
    assert 'cuzk_gpu_worker_busy_seconds_total{device="cpu",worker="cpu-0"}' in text


# ---------------------------------------------------------------------------------------------
# Sampling for cuzk bench engine


def test_sampler_means_per_device_and_none_without_nvml():
    from cuzk.telemetry.nvml import UtilizationSampler

    nvml = FakeNvml([("00000000:3B:00.0", 1, 10), ("00000000:C1:00.0", 1, 30)])
    sampler = UtilizationSampler.open(FakeProver(), nvml=nvml, period_s=0.01)
    assert sampler is not None
    sampler.start()
    nvml.devices[1] = ("00000000:C1:00.0", 1, 50)  # cuda:0 busier for the later samples
    sampler.stop()
    means = sampler.means()
    assert means["cuda:1"] == pytest.approx(0.1) and 0.3 <= means["cuda:0"] <= 0.5
    assert set(means) == {"cuda:0", "cuda:1"}  # cuda:2 has no bus id: not sampled, not guessed

    class CpuProver:
        devices = ("cpu",)

        def device_pci_bus_id(self, device: str) -> None:
            return None

    assert UtilizationSampler.open(CpuProver(), nvml=nvml) is None
    assert UtilizationSampler.open(FakeProver(), nvml=FakeNvml([])) is None
