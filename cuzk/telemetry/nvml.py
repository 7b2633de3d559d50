"""NVML device metrics: present when pynvml imports and a device answers, silently absent else."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric

log = logging.getLogger(__name__)


class NvmlCollector:
    def __init__(self, nvml: object, handles: Sequence[tuple[str, object]]) -> None:
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
                    mem = nv.nvmlDeviceGetMemoryInfo(handle)  # type: ignore[attr-defined]
                    rates = nv.nvmlDeviceGetUtilizationRates(handle)  # type: ignore[attr-defined]
                except Exception:  # a device that stops answering drops out of the scrape
                    continue
                used.add_metric([label], float(mem.used))
                util.add_metric([label], float(rates.gpu) / 100.0)
        return [used, util]


def register_nvml(registry: CollectorRegistry, device_indices: Iterable[int]) -> bool:
    """Register NVML gauges for these CUDA devices; False (and nothing registered) without NVML."""
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        handles = [
            (f"cuda:{i}", pynvml.nvmlDeviceGetHandleByIndex(i)) for i in device_indices
        ]
    except Exception as exc:  # no library, no driver, no such device: metrics are optional
        log.debug("NVML metrics unavailable: %s", exc)
        return False
    if not handles:
        return False
    registry.register(NvmlCollector(pynvml, handles))
    return True
