"""NVML device gauges, matched to the engine's CUDA devices by PCI bus id.

NVML numbers devices its own way (PCI order); CUDA numbers them by speed unless
``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and ``CUDA_VISIBLE_DEVICES`` renumbers them again. So the
ordinal in ``cuda:N`` says nothing about NVML's index N: each device is matched by the PCI
bus id CUDA reports for it. A device whose bus id is unknown, or that NVML does not list, gets
no gauges rather than another device's numbers. Without pynvml or a driver there are none.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric

from cuzk.engine.backend import ProverBackend

log = logging.getLogger(__name__)

_PCI = re.compile(
    r"^(?:(?P<domain>[0-9a-f]{1,8}):)?(?P<bus>[0-9a-f]{1,2}):(?P<dev>[0-9a-f]{1,2})\.(?P<fn>[0-7])$"
)


def parse_pci_bus_id(text: str | bytes) -> tuple[int, int, int, int] | None:
    """(domain, bus, device, function) from ``0000:3B:00.0``, NVML's ``00000000:3B:00.0`` or
    ``3b:00.0``; None for anything else."""
    if isinstance(text, bytes):
        text = text.decode("ascii", "replace")
    m = _PCI.match(text.strip().lower().rstrip("\x00"))
    if m is None:
        return None
    return (int(m["domain"] or "0", 16), int(m["bus"], 16), int(m["dev"], 16), int(m["fn"], 16))


def cuda_device_ids(prover: ProverBackend) -> list[tuple[str, str]]:
    """(device label, PCI bus id) for each CUDA device the prover runs GPU workers on."""
    out = []
    for device in prover.devices:
        if not str(device).startswith("cuda:"):
            continue
        bus_id = prover.device_pci_bus_id(device)
        if bus_id:
            out.append((device, str(bus_id)))
        else:
            log.warning("no PCI bus id for %s: no NVML gauges for it (never guessed by index)",
                        device)
    return out


def match_devices(nvml: Any, devices: Iterable[tuple[str, str]]) -> list[tuple[str, Any]]:
    """(label, NVML handle) for each device NVML lists under the same PCI bus id."""
    by_bus: dict[tuple[int, int, int, int], Any] = {}
    for i in range(int(nvml.nvmlDeviceGetCount())):
        handle = nvml.nvmlDeviceGetHandleByIndex(i)
        key = parse_pci_bus_id(nvml.nvmlDeviceGetPciInfo(handle).busId)
        if key is not None:
            by_bus[key] = handle
    out = []
    for label, bus_id in devices:
        key = parse_pci_bus_id(bus_id)
        if key is not None and key in by_bus:
            out.append((label, by_bus[key]))
        else:
            log.warning("NVML lists no device at PCI bus id %s (%s): no NVML gauges for it",
                        bus_id, label)
    return out


class NvmlCollector:
    def __init__(self, nvml: Any, handles: Sequence[tuple[str, Any]]) -> None:
        self._nvml = nvml
        self._handles = handles

    def describe(self) -> Iterable[Metric]:
        return self._families(False)

    def collect(self) -> Iterable[Metric]:
        return self._families(True)

    def _families(self, read: bool) -> list[Metric]:
        used = GaugeMetricFamily(
            "cuzk_device_memory_used_bytes", "Device memory in use (NVML)", labels=["device"])
        util = GaugeMetricFamily(
            "cuzk_device_utilization_ratio", "Device compute utilisation 0..1 (NVML)",
            labels=["device"])
        if read:
            nv = self._nvml
            for label, handle in self._handles:
                try:
                    mem = nv.nvmlDeviceGetMemoryInfo(handle)
                    rates = nv.nvmlDeviceGetUtilizationRates(handle)
                except Exception:  # a device that stops answering drops out of the scrape
                    continue
                used.add_metric([label], float(mem.used))
                util.add_metric([label], float(rates.gpu) / 100.0)
        return [used, util]


def register_nvml(
    registry: CollectorRegistry, devices: Iterable[tuple[str, str]], nvml: Any = None
) -> bool:
    """Register NVML gauges for these (label, PCI bus id) devices; False (nothing registered)
    without NVML or without a match. ``nvml``: the pynvml module (tests pass a fake)."""
    try:
        if nvml is None:
            import pynvml as nvml  # type: ignore[no-redef]
        nvml.nvmlInit()
        handles = match_devices(nvml, devices)
    except Exception as exc:  # no library, no driver: these metrics are optional
        log.debug("NVML metrics unavailable: %s", exc)
        return False
    if not handles:
        return False
    registry.register(NvmlCollector(nvml, handles))
    return True
