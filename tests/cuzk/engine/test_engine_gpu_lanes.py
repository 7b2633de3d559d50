"""RealProver on a (recorded) CUDA device: one lane per GPU worker, phases of one device run at
once on distinct lanes; the key's device bytes are known from the zkey before anything is
uploaded, and the engine's residency uploads only once they are reserved."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest

from cuzk.circuits.registry import bundled_circuits
from cuzk.engine.keys import CONSUMER, KeyResidency
from cuzk.engine.memory import MemoryBudget
from cuzk.engine.settings import EngineSettings, default_proof_kinds
from cuzk.prover import cuda_backend, real_prover
from cuzk.prover.keystore import ensure_zkey
from cuzk.settings_schema import MSM_PRECOMPUTE_BUDGET_SHARE
from tests.conftest import KEYS_DIR

KIND = "winning-post"
BOUND_S = 30.0
DEVICE_TOTAL_BYTES = 1 << 34  # what the recorded device reports as its memory


class RecordingDevice:
    """Stands in for CudaBackend: records uploads (with what the device budget held for keys
    at that moment) and hands out lanes."""

    instances: ClassVar[list[RecordingDevice]] = []

    def __init__(self, index: int, msm_precompute: str = "off") -> None:
        self.device = f"cuda:{index}"
        self.msm_table_budget = cuda_backend.msm_table_budget(msm_precompute, DEVICE_TOTAL_BYTES)
        self.device_index = index
        self.uploads: list[int] = []
        self.budget: MemoryBudget | None = None
        self.made_lanes: list[SimpleNamespace] = []
        RecordingDevice.instances.append(self)

    def warmup(self) -> float:
        return 0.0

    def lane(self) -> SimpleNamespace:
        lane = SimpleNamespace(device=self.device, index=len(self.made_lanes))
        self.made_lanes.append(lane)
        return lane

    def key_device_bytes(self, key) -> int:
        arrays = {s: cuda_backend._section_array(key, s) for s in cuda_backend.SECTIONS}
        return cuda_backend.key_device_bytes(
            key.sizes.domain_size, {s: int(a.shape[0]) for s, a in arrays.items()},
            {s: cuda_backend.present_rows(a) for s, a in arrays.items()}, self.msm_table_budget)

    def upload_key(self, key) -> int:
        held = self.budget.reserved_by_consumer().get(CONSUMER, 0) if self.budget else -1
        self.uploads.append(held)
        return self.key_device_bytes(key)

    def drop_key(self, key) -> None:
        pass

    def working_bytes(self, key) -> int:
        return 1 << 20

    def memory_info(self):
        return None, DEVICE_TOTAL_BYTES


@pytest.fixture()
def cuda_prover(monkeypatch):
    ensure_zkey(KIND, Path(bundled_circuits()[KIND].r1cs_path), KEYS_DIR)
    RecordingDevice.instances = []
    monkeypatch.setattr(real_prover, "cuda_device_count", lambda: 1)
    monkeypatch.setattr(cuda_backend, "CudaBackend", RecordingDevice)
    settings = EngineSettings(backend="cuda", proof_kinds=default_proof_kinds(),
                              keys_dir=KEYS_DIR, gpu_workers_per_device=2,
                              reserved_gpu_workers_per_device=1)
    prover = real_prover.RealProver(settings)
    return prover, RecordingDevice.instances[0]


def test_each_worker_of_a_device_gets_its_own_lane_and_they_run_together(cuda_prover,
                                                                         monkeypatch):
    prover, device = cuda_prover
    # two regular workers and the reserved one: a lane each, so none waits for a lane
    assert prover.devices == ["cuda:0"] and len(device.made_lanes) == 3
    assert prover.lanes_per_device() == {"cuda:0": 3}
    inside = threading.Barrier(3, timeout=BOUND_S)
    used: list = []

    def fake_gpu_phase(key, synthesis, lane):
        used.append(lane)
        inside.wait()                 # all three phases inside at once, or BrokenBarrierError
        return lane.index

    import cuzk.prover

    monkeypatch.setattr(cuzk.prover, "gpu_phase", fake_gpu_phase)
    handle = SimpleNamespace(key=SimpleNamespace(key=object()))
    results: dict = {}
    threads = [threading.Thread(
        target=lambda i=i: results.__setitem__(i, prover.gpu_phase(handle, None, "cuda:0")))
        for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(BOUND_S)
    assert sorted(results.values()) == [0, 1, 2]
    assert len({id(lane) for lane in used}) == 3


def test_device_bytes_come_from_the_zkey_before_loading_and_the_upload_after_reserving(
        cuda_prover):
    prover, device = cuda_prover
    hint = prover.key_device_bytes_hint(KIND)
    handle = prover.load_key(KIND)
    assert device.uploads == []                       # loading reads the host side only
    assert hint == handle.device_bytes > 0            # the zkey's figure is the exact one
    prover.unload_key(handle)

    host = MemoryBudget(1 << 34, "host")
    budget = MemoryBudget(1 << 34, "cuda:0", host.lock)
    device.budget = budget
    residency = KeyResidency(prover, host, {"cuda:0": budget})
    slot, res = residency.admit(KIND)
    assert device.uploads == [handle.device_bytes]    # held in full when the upload ran
    res.close()
    residency.release(slot)


def test_device_window_tables_are_in_the_hint_and_the_loaded_figure(cuda_prover, monkeypatch):
    """[prover] msm_precompute reaches each device: with "on" the zkey's hint (B2 included)
    counts the MSM window copies, equals what the loaded key reports, and exceeds "off"'s."""
    from cuzk.prover import native_msm

    if not native_msm.available():
        pytest.skip("no native extension: no window tables")
    prover, _ = cuda_prover
    off = prover.key_device_bytes_hint(KIND)
    settings = EngineSettings(backend="cuda", proof_kinds=default_proof_kinds(),
                              keys_dir=KEYS_DIR, msm_precompute="on")
    tabled = real_prover.RealProver(settings)
    device = RecordingDevice.instances[-1]
    assert device.msm_table_budget == DEVICE_TOTAL_BYTES // MSM_PRECOMPUTE_BUDGET_SHARE
    hint = tabled.key_device_bytes_hint(KIND)
    handle = tabled.load_key(KIND)
    assert hint == handle.device_bytes > off
    tabled.unload_key(handle)


def test_a_device_too_small_for_the_key_is_refused_before_anything_is_uploaded(cuda_prover):
    from cuzk.errors import PartitionTooLarge

    prover, device = cuda_prover
    need = prover.key_device_bytes_hint(KIND)
    host = MemoryBudget(1 << 34, "host")
    budget = MemoryBudget(need - 1, "cuda:0", host.lock)
    device.budget = budget
    residency = KeyResidency(prover, host, {"cuda:0": budget})
    with pytest.raises(PartitionTooLarge):
        residency.admit(KIND)
    assert device.uploads == []
