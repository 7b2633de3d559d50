"""The engine bench samples each device's NVML utilisation over the backlog beside the workers'
busy fractions (a lease is not a kernel, issue 26), and has no figure without NVML."""

from __future__ import annotations

import json
from dataclasses import replace

from cuzk.bench.engine import run_engine_bench, run_once
from cuzk.engine.backend import PartitionMemory
from cuzk.engine.settings import EngineSettings, default_proof_kinds
from cuzk.simulated_prover import ScriptedKind, ScriptedProver
from tests.cuzk.telemetry.test_telemetry_nvml import FakeNvml

BUS = "0000:3B:00.0"


def settings() -> EngineSettings:
    return EngineSettings(proof_kinds=default_proof_kinds(), finalizer_threads=2,
                          memory_budget_bytes=8 << 30)


def test_without_nvml_no_run_has_a_device_figure():
    lines: list[str] = []
    bench = run_engine_bench(settings=settings(), prover="scripted", jobs=3, repeats=1,
                             scale=0.05, echo=lines.append)
    assert len(lines) == 1 and lines[0].startswith("cuzk bench engine: 3 jobs")
    assert "prover=scripted" in lines[0]
    assert (len(bench.on_runs), len(bench.off_runs), len(bench.nosplit_runs)) == (1, 1, 1)
    figures = bench.figures()
    assert figures["jobs"] == 3 and figures["prover"] == "scripted"
    assert figures["device_utilization"] is None
    assert all(r["device_utilization"] is None for r in figures["all_runs"])
    assert all(r["failed"] == 0 for r in figures["all_runs"])
    assert json.loads(json.dumps(figures, default=str))["device_utilization"] is None


def with_nvml_run():
    """One run on a scripted CUDA device whose NVML says it runs kernels 23% of the time."""
    est = PartitionMemory(1 << 20, 600 << 10, 0)
    prover = ScriptedProver({k: ScriptedKind(host_bytes=8 << 20, estimate=est)
                             for k in ("winning-post", "window-post")},
                            devices=("cuda:0",), name="cuda", device_memory=1 << 30)
    prover.device_pci_bus_id = lambda device: BUS  # type: ignore[method-assign]
    prover.delay("gpu", lambda inputs: 0.01)
    nvml = FakeNvml([("00000000:3B:00.0", 1 << 30, 23)])
    kinds = replace(settings(), proof_kinds={
        k: v for k, v in default_proof_kinds().items() if k in ("winning-post", "window-post")})
    return run_once("split+telemetry", kinds, prover, ["winning-post", "window-post"] * 2, None,
                    nvml=nvml)


def test_with_nvml_each_device_mean_is_sampled():
    result = with_nvml_run()
    assert result.device_utilization == {"cuda:0": 0.23}
    assert result.summary()["device_utilization"] == {"cuda:0": 0.23}
    assert result.jobs == 4 and result.failed == 0
