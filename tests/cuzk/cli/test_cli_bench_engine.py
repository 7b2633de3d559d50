"""``cuzk bench engine`` prints each device's NVML utilisation beside the workers' busy
fractions, says "n/a (no NVML)" without NVML, and runs as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys

from cuzk.bench.engine import run_engine_bench
from cuzk.cli.bench_engine import device_utilization_line, report, table
from tests.cuzk.bench.test_engine import settings, with_nvml_run


def test_without_nvml_the_figure_is_na_in_the_table_and_the_summary():
    bench = run_engine_bench(settings=settings(), prover="scripted", jobs=3, repeats=1,
                             scale=0.05)
    lines = report(bench)
    text = "\n".join(lines)
    row = next(line for line in text.splitlines() if line.startswith("device util"))
    assert row.count("n/a (no NVML)") == 3, row  # one per run, beside the busy rows
    busy_rows = [i for i, line in enumerate(text.splitlines()) if "busy frac " in line]
    assert busy_rows and text.splitlines().index(row) == busy_rows[-1] + 1
    assert "device utilisation (NVML, mean over the backlog): n/a (no NVML)" in lines


def test_with_nvml_each_device_mean_is_shown_beside_the_busy_fraction():
    result = with_nvml_run()
    text = table([result], ["winning-post"])
    assert any(line.startswith("cuda:0 device util") and line.endswith("0.2300")
               for line in text.splitlines()), text
    assert "n/a" not in text
    assert device_utilization_line(result.device_utilization) == (
        "device utilisation (NVML, mean over the backlog): cuda:0 0.2300")


def test_bench_engine_on_the_command_line(tmp_path):
    out = tmp_path / "figures.json"
    proc = subprocess.run(
        [sys.executable, "-m", "cuzk.cli.main", "bench", "engine", "--prover", "scripted",
         "--jobs", "3", "--repeats", "1", "--scale", "0.05", "--json", str(out)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("cuzk bench engine: 3 jobs") and "prover=scripted" in lines[0]
    header = lines[1].split()
    assert header[:2] == ["split+telemetry", "no"] and lines[2].split()[0] == "wall"
    for start in ("split proving: ", "telemetry overhead: ", "min worker busy fraction",
                  "device utilisation (NVML"):
        assert any(line.startswith(start) for line in lines), (start, proc.stdout)
    figures = json.loads(out.read_text())
    assert figures["prover"] == "scripted" and figures["jobs"] == 3
    assert set(figures["runs"]) == {"split_telemetry_on", "no_split", "telemetry_off"}
