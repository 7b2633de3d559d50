"""NVML device gauges, matched to the engine's CUDA devices by PCI bus id.

NVML numbers devices its own way (PCI order); CUDA numbers them by speed unless
``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and ``CUDA_VISIBLE_DEVICES`` renumbers them again. So the
ordinal in ``cuda:N`` says nothing about NVML's index N: each device is matched by the PCI
bus id CUDA reports for it. A device whose bus id is unknown, or that NVML does not list, gets
no gauges rather than another device's numbers. Without pynvml or a driver there are none.

A recording of NVML samples can stand in for the driver (``[telemetry] nvml_replay``,
``NvmlReplay``): the same collector exports it, through the same pynvml calls, so a host without
a GPU can rehearse the device dashboards and alerts, and tests can prove them on a real engine.
``UtilizationSampler`` samples the same utilisation for ``cuzk bench engine``.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
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


# ---------------------------------------------------------------------------------------------
# Recorded samples in place of the driver

RECORDING_FORMAT = "cuzk-nvml-recording/1"


def load_recording(path: str | Path) -> dict[str, Any]:
    """Read and check a recording of NVML samples; ValueError says what is wrong and where.

    The format (JSON)::

        {"format": "cuzk-nvml-recording/1", "interval_s": 1.0, "note": "where it came from",
         "devices": {"cuda:0": {"utilization_percent": [23, 19, ...],
                                "memory_used_bytes": [1073741824, ...]}}}

    One sample every ``interval_s`` per device, as ``nvmlDeviceGetUtilizationRates`` (percent
    of the last sample period a kernel ran, 0..100) and ``nvmlDeviceGetMemoryInfo().used``
    answer them. Devices are named by the engine's device labels (``cuda:0``; ``cpu`` on the
    CPU backend)."""
    where = str(path)
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as e:
        raise ValueError(f"{where}: cannot read: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != RECORDING_FORMAT:
        raise ValueError(f"{where}: not an NVML recording (\"format\": \"{RECORDING_FORMAT}\")")
    interval = doc.get("interval_s")
    if (not isinstance(interval, int | float) or isinstance(interval, bool)
            or not math.isfinite(interval) or interval <= 0):
        raise ValueError(f"{where}: interval_s must be a number of seconds > 0")
    devices = doc.get("devices")
    if not isinstance(devices, dict) or not devices:
        raise ValueError(f"{where}: devices must name at least one device")
    for label, series in devices.items():
        if not isinstance(series, dict):
            raise ValueError(f"{where}: devices.{label} must be an object")
        for key, top in (("utilization_percent", 100.0), ("memory_used_bytes", math.inf)):
            xs = series.get(key)
            if not isinstance(xs, list) or not xs or not all(
                    isinstance(x, int | float) and not isinstance(x, bool)
                    and math.isfinite(x) and 0 <= x <= top for x in xs):
                raise ValueError(f"{where}: devices.{label}.{key} must be a non-empty list of "
                                 f"numbers in 0..{top:g}")
    return doc


class NvmlReplay:
    """The pynvml calls ``NvmlCollector`` makes, answered from a recording: handles are device
    labels, and the sample read is the one due at ``clock()`` since the replay began (the
    recording loops)."""

    def __init__(self, recording: Mapping[str, Any],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._devices = recording["devices"]
        self._interval = float(recording["interval_s"])
        self._clock = clock
        self._start = clock()

    def _at(self, xs: Sequence[float]) -> float:
        return float(xs[int((self._clock() - self._start) / self._interval) % len(xs)])

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetMemoryInfo(self, handle: str) -> SimpleNamespace:
        return SimpleNamespace(used=int(self._at(self._devices[handle]["memory_used_bytes"])))

    def nvmlDeviceGetUtilizationRates(self, handle: str) -> SimpleNamespace:
        return SimpleNamespace(gpu=self._at(self._devices[handle]["utilization_percent"]))


def register_nvml_replay(
    registry: CollectorRegistry, devices: Sequence[str], path: str | Path,
    clock: Callable[[], float] = time.monotonic,
) -> list[str]:
    """Export the recording at ``path`` as the NVML gauges of those of the engine's
    ``devices`` it names (a device the engine does not have gets no series: it would join
    nothing); returns the devices replayed. ValueError for a bad recording."""
    recording = load_recording(path)
    labels = [d for d in devices if d in recording["devices"]]
    for other in sorted(set(recording["devices"]) - set(devices)):
        log.warning("NVML recording %s: the engine has no device %s (its devices: %s); not "
                    "replayed", path, other, ", ".join(devices))
    if labels:
        log.info("NVML gauges replayed from %s for %s (not read from a driver)", path,
                 ", ".join(labels))
        registry.register(NvmlCollector(NvmlReplay(recording, clock), [(d, d) for d in labels]))
    return labels


# ---------------------------------------------------------------------------------------------
# Sampling for the engine benchmark


class UtilizationSampler:
    """Samples NVML utilisation of the engine's CUDA devices in a thread, every ``period_s``
    from ``start()`` to ``stop()``; ``means()`` is the mean per device label.

    ``open()`` returns None where NVML does not answer for any of the prover's devices (no
    pynvml, no driver, the CPU backend), so the caller can say "n/a"."""

    def __init__(self, nvml: Any, handles: Sequence[tuple[str, Any]],
                 period_s: float = 0.1) -> None:
        self._nvml = nvml
        self._handles = handles
        self._period = period_s
        self._samples: dict[str, list[float]] = {label: [] for label, _ in handles}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def open(cls, prover: ProverBackend, nvml: Any = None,
             period_s: float = 0.1) -> UtilizationSampler | None:
        devices = cuda_device_ids(prover)
        if not devices:
            return None
        try:
            if nvml is None:
                import pynvml as nvml  # type: ignore[no-redef]
            nvml.nvmlInit()
            handles = match_devices(nvml, devices)
        except Exception as exc:
            log.debug("NVML utilisation unavailable: %s", exc)
            return None
        return cls(nvml, handles, period_s) if handles else None

    def sample(self) -> None:
        for label, handle in self._handles:
            try:
                rates = self._nvml.nvmlDeviceGetUtilizationRates(handle)
            except Exception:  # a device that stops answering adds no sample
                continue
            self._samples[label].append(float(rates.gpu) / 100.0)

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self._period):
                return

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="cuzk-nvml-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()  # the last period counts too, and a short run has one sample at least

    def means(self) -> dict[str, float]:
        return {label: sum(xs) / len(xs) for label, xs in self._samples.items() if xs}
