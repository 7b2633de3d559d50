"""Workers are named for what they run on: ``cpu-N`` on the CPU backend, ``gpu-N`` on CUDA
devices (the name is the ``worker`` label of the metrics and ``cuzk.worker.id`` of spans)."""

from __future__ import annotations

from cuzk.simulated_prover import ScriptedProver
from tests._doubles import make_test_engine


def _names(prover: ScriptedProver, reserved: int = 0) -> list[tuple[str, str]]:
    engine, _, _ = make_test_engine({"k": (1, "normal")}, prover, gpu_workers_per_device=2,
                                    reserved_gpu_workers_per_device=reserved)
    return [(w.id, w.device) for w in engine.workers]


def test_cpu_backend_workers_are_called_cpu():
    assert _names(ScriptedProver()) == [("cpu-0", "cpu"), ("cpu-1", "cpu")]


def test_cuda_workers_are_called_gpu():
    prover = ScriptedProver(devices=("cuda:0", "cuda:1"), name="cuda", device_memory=10_000)
    assert _names(prover) == [("gpu-0", "cuda:0"), ("gpu-1", "cuda:0"),
                              ("gpu-2", "cuda:1"), ("gpu-3", "cuda:1")]


def test_reserved_workers_are_named_apart_on_each_device():
    prover = ScriptedProver(devices=("cuda:0", "cuda:1"), name="cuda", device_memory=10_000)
    assert _names(prover, reserved=1) == [
        ("gpu-0", "cuda:0"), ("gpu-1", "cuda:0"), ("gpu-r0", "cuda:0"),
        ("gpu-2", "cuda:1"), ("gpu-3", "cuda:1"), ("gpu-r1", "cuda:1")]
    assert _names(ScriptedProver(), reserved=1)[-1] == ("cpu-r0", "cpu")
