"""``cuzk bench engine`` prints each device's NVML utilisation beside the workers' busy
fractions (a lease is not a kernel, issue 26), and says "n/a (no NVML)" without NVML."""

from __future__ import annotations

import json
from dataclasses import replace

from cuzk.cli import bench_engine as bench
from cuzk.engine.backend import PartitionMemory
from cuzk.engine.settings import EngineSettings, default_proof_kinds
from cuzk.simulated_prover import ScriptedKind, ScriptedProver
from tests.cuzk.telemetry.test_telemetry_nvml import FakeNvml

BUS = "0000:3B:00.0"


def _settings() -> EngineSettings:
    return EngineSettings(proof_kinds=default_proof_kinds(), finalizer_threads=2,
                          memory_budget_bytes=8 << 30)


def test_without_nvml_the_figure_is_na_in_the_table_the_summary_and_the_json():
    lines: list[str] = []
    figures = bench.run_engine_bench(settings=_settings(), prover="scripted", jobs=3, repeats=1,
                                     scale=0.05, print_fn=lines.append)
    text = "\n".join(lines)
    row = next(line for line in text.splitlines() if line.startswith("device util"))
    assert row.count("n/a (no NVML)") == 3, row  # one per run, beside the busy rows
    busy_rows = [i for i, line in enumerate(text.splitlines()) if "busy frac " in line]
    assert busy_rows and text.splitlines().index(row) == busy_rows[-1] + 1
    assert "device utilisation (NVML, mean over the backlog): n/a (no NVML)" in lines
    assert figures["device_utilization"] is None
    assert all(r["device_utilization"] is None for r in figures["all_runs"])
    assert json.loads(json.dumps(figures, default=str))["device_utilization"] is None


def test_with_nvml_each_device_mean_is_shown_beside_the_busy_fraction():
    est = PartitionMemory(1 << 20, 600 << 10, 0)
    prover = ScriptedProver({k: ScriptedKind(host_bytes=8 << 20, estimate=est)
                             for k in ("winning-post", "window-post")},
                            devices=("cuda:0",), name="cuda", device_memory=1 << 30)
    prover.device_pci_bus_id = lambda device: BUS  # type: ignore[method-assign]
    prover.delay("gpu", lambda inputs: 0.01)
    nvml = FakeNvml([("00000000:3B:00.0", 1 << 30, 23)])  # the device runs kernels 23%
    settings = replace(_settings(), proof_kinds={
        k: v for k, v in default_proof_kinds().items() if k in ("winning-post", "window-post")})
    result = bench.run_once("split+telemetry", settings, prover,
                            ["winning-post", "window-post"] * 2, None, nvml=nvml)
    assert result.device_utilization == {"cuda:0": 0.23}
    assert result.summary()["device_utilization"] == {"cuda:0": 0.23}
    table = bench._table([result], ["winning-post"])
    assert any(line.startswith("cuda:0 device util") and line.endswith("0.2300")
               for line in table.splitlines()), table
    assert "n/a" not in table
    assert bench.device_utilization_line(result.device_utilization) == (
        "device utilisation (NVML, mean over the backlog): cuda:0 0.2300")
