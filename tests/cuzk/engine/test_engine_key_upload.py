"""A key's device bytes are reserved before it is uploaded: the grant reserves the hint (from
the zkey header), the load reads the key on the host and reports its exact device size, the
reservation is trued up to it, and only then is the key uploaded. A reservation that cannot be
granted never uploads; a failed upload gives every byte back."""

from __future__ import annotations

import pytest

from cuzk.engine.backend import KeyHandle, PartitionMemory
from cuzk.engine.keys import CONSUMER, KeyResidency
from cuzk.engine.memory import MemoryBudget
from cuzk.errors import PartitionTooLarge
from cuzk.simulated_prover import ScriptedKind, ScriptedProver

KEY_DEVICE = 500


class UploadingProver(ScriptedProver):
    """A prover that uploads in a second step, recording what the device budget held for keys
    at every change and at every upload."""

    def __init__(self, device_hint: int, device_total: int, fail_upload: bool = False) -> None:
        super().__init__({"k": ScriptedKind(device_bytes=KEY_DEVICE,
                                            estimate=PartitionMemory(100, 60, 10))},
                         devices=("cuda:0",), name="cuda", device_memory=device_total)
        self.device_hint = device_hint
        self.fail_upload = fail_upload
        self.ledger: list[tuple[str, int]] = []
        self.host = MemoryBudget(1 << 20, "host")
        self.device = MemoryBudget(device_total, "cuda:0", self.host.lock)
        self.device.on_change = lambda b: self.ledger.append(
            ("device", b._by_consumer().get(CONSUMER, 0)))
        self.residency = KeyResidency(self, self.host, {"cuda:0": self.device})

    def key_device_bytes_hint(self, proof_kind: str) -> int:
        return self.device_hint

    def upload_key(self, handle: KeyHandle) -> None:
        self.ledger.append(("upload", self.device.reserved_by_consumer().get(CONSUMER, 0)))
        if self.fail_upload:
            raise RuntimeError("device went away")

    def uploads(self) -> list[int]:
        return [held for what, held in self.ledger if what == "upload"]


@pytest.mark.parametrize("hint", [KEY_DEVICE, 200])
def test_the_key_device_bytes_are_held_before_every_upload(hint):
    """With an exact hint the grant itself holds the bytes; with a low one the reservation is
    grown to the exact size after the host load and still before the upload."""
    prover = UploadingProver(device_hint=hint, device_total=10_000)
    slot, res = prover.residency.admit("k")
    assert prover.uploads() == [KEY_DEVICE]
    first_upload = prover.ledger.index(("upload", KEY_DEVICE))
    assert ("device", hint) in prover.ledger[:first_upload]      # the grant came first
    assert slot.state == "resident" and slot.device_bytes == {"cuda:0": KEY_DEVICE}
    res.close()
    prover.residency.release(slot)
    again, res = prover.residency.admit("k")                     # resident: no second upload
    assert again is slot and prover.uploads() == [KEY_DEVICE]
    res.close()
    prover.residency.release(again)


def test_a_key_whose_device_bytes_can_never_be_granted_is_never_loaded_or_uploaded():
    prover = UploadingProver(device_hint=KEY_DEVICE, device_total=400)
    with pytest.raises(PartitionTooLarge):
        prover.residency.admit("k")
    assert prover.calls["load_key"] == 0 and prover.uploads() == []
    assert prover.device.reserved == 0


def test_a_low_hint_that_cannot_be_trued_up_gives_everything_back_without_uploading():
    """The hint (200) is granted, the load says 500, the device budget (400) cannot grow to
    it: the key is unloaded from the host, never uploaded, and the kind refused."""
    prover = UploadingProver(device_hint=200, device_total=400)
    with pytest.raises(PartitionTooLarge):
        prover.residency.admit("k")
    assert prover.calls["load_key"] == 1 and prover.uploads() == []
    assert prover.device.reserved == 0 and prover.host.reserved == 0


def test_a_failed_upload_releases_the_key_bytes_and_fails_the_admission():
    prover = UploadingProver(device_hint=KEY_DEVICE, device_total=10_000, fail_upload=True)
    with pytest.raises(RuntimeError, match="device went away"):
        prover.residency.admit("k")
    assert prover.uploads() == [KEY_DEVICE]
    assert prover.device.reserved == 0 and prover.host.reserved == 0
    assert prover.unloads == 1 and not prover.residency.is_resident("k")
    prover.fail_upload = False
    slot, res = prover.residency.admit("k")                      # the next try loads again
    assert slot.state == "resident" and prover.uploads() == [KEY_DEVICE, KEY_DEVICE]
    res.close()
    prover.residency.release(slot)
