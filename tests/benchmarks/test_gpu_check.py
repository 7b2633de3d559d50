"""benchmarks/gpu_check.py without a GPU: its reference paths run on the CPU executor at tiny
sizes (so a crash like a list indexed by a NumPy array cannot wait for the scarce GPU slot to show
up), and its verdict turns every error, mismatch, unverified proof, failed job, skipped test,
under-estimated memory or missing section into a failure."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_ntt_section_matches_on_the_cpu_runtime(check):
    res = check.section_ntt(check.CpuRuntime(), [3, 5], repeats=1)
    assert set(res) == {"2^3", "2^5"}
    for v in res.values():
        assert v["match"] is True and v["h_match"] is True
        assert v["forward"]["wall_ms"] >= 0 and v["forward"]["event_ms"] is None


def test_msm_section_matches_on_the_cpu_runtime(check):
    """Sizes beyond the point period take the tiled path (reference times the repeat count)."""
    res = check.section_msm(check.CpuRuntime(), [3, 6], repeats=1, period=16)
    assert res["2^3"]["distinct_points"] == 8 and res["2^6"]["distinct_points"] == 16
    assert all(v["match"] is True for v in res.values())


def test_proof_section_verifies_on_the_cpu_runtime(check, tmp_path):
    from cuzk.prover import CpuBackend
    from tests.conftest import KEYS_DIR

    rt = check.CpuRuntime()
    res = check.section_proofs(rt, CpuBackend(), ["winning-post"], KEYS_DIR)
    v = res["winning-post"]
    assert "error" not in v, v.get("error")
    assert v["match"] is True and v["verified"] is True
    assert check.problems({"proofs": res}) == [f"{s}: did not run" for s in check.SECTIONS
                                                if s != "proofs"]


def test_main_writes_json_and_fails_for_a_skipped_section(check, tmp_path, capsys):
    rc = check.main(["--runtime", "cpu", "--out", str(tmp_path), "--min-log", "3",
                     "--max-log", "4", "--repeats", "1", "--period", "8",
                     "--skip", "device_tests,proofs,engine"])
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert rc == 1
    assert report["problems"] == ["device_tests: did not run", "proofs: did not run",
                                  "engine: did not run"]
    assert report["ntt"]["2^4"]["match"] is True and report["msm"]["2^4"]["match"] is True
    out = capsys.readouterr().out
    assert "PROBLEM engine: did not run" in out and "NTT" in out and "MSM" in out


GOOD = {
    "device": {"name": "H200"},
    "device_tests": {"tests": 9, "failures": 0, "errors": 0, "skipped": 0, "returncode": 0},
    "ntt": {"2^16": {"forward": {"event_ms": 0.1, "wall_ms": 0.2}, "match": True,
                     "h_pipeline": {"event_ms": 0.5, "wall_ms": 0.6}, "h_match": True}},
    "msm": {"2^16": {"event_ms": 2.0, "wall_ms": 3.0, "match": True,
                     "memory": {"estimate_bytes": 10, "measured_peak_bytes": 9, "ok": True}}},
    "proofs": {"porep-c2": {"match": True, "verified": True, "speedup": 12.0,
                            "memory": {"H": {"estimate_bytes": 5, "measured_peak_bytes": 5,
                                             "ok": True}}}},
    "engine": {"workers_1": {"failed": 0}, "workers_2": {"failed": 0}},
}


def _with(path: list[str], value):
    rep = json.loads(json.dumps(GOOD))
    node = rep
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return rep


@pytest.mark.parametrize("path,value,expected", [
    (["proofs", "porep-c2"], {"error": "Traceback: CUDA_ERROR_LAUNCH_FAILED"},
     "proofs/porep-c2: error"),
    (["engine"], {"error": "Traceback"}, "engine: error"),
    (["proofs", "porep-c2", "verified"], False, "proofs/porep-c2: verified is false"),
    (["ntt", "2^16", "h_match"], False, "ntt/2^16: h_match is false"),
    (["msm", "2^16", "match"], False, "msm/2^16: match is false"),
    (["engine", "workers_2", "failed"], 3, "engine/workers_2: 3 failed jobs"),
    (["device_tests", "skipped"], 4, "device_tests: 4 skipped"),
    (["device_tests", "failures"], 1, "device_tests: 1 failures"),
    (["msm", "2^16", "memory", "ok"], False, "msm/2^16/memory: ok is false"),
    (["proofs", "porep-c2"], {"skipped": "time budget spent"},
     "proofs/porep-c2: skipped (time budget spent)"),
    (["device"], {"error": "no CUDA driver"}, "device: error"),
])
def test_every_kind_of_failure_fails_the_check(check, path, value, expected):
    assert check.problems(GOOD) == []
    assert expected in check.problems(_with(path, value))


def test_a_missing_section_fails_the_check(check):
    rep = {k: v for k, v in GOOD.items() if k != "engine"}
    assert check.problems(rep) == ["engine: did not run"]


def test_targets_are_read_from_event_times(check):
    rep = _with(["msm", "2^20"], {"event_ms": 30.0, "wall_ms": 31.0, "match": True})
    rep["ntt"]["2^20"] = {"forward": {"event_ms": 0.8, "wall_ms": 1.2}, "match": True,
                          "h_pipeline": {"event_ms": 2, "wall_ms": 3}, "h_match": True}
    t = check.target_figures(rep)
    assert t["msm_2^20_ms"]["met"] is False and t["ntt_2^20_ms"]["met"] is True
    assert t["porep_c2_speedup"]["met"] is True
    assert "2^20" in check.table(rep)


def test_engine_section_runs_one_and_two_workers(check):
    from tests.conftest import KEYS_DIR

    res = check.section_engine("cpu", jobs=2, workers=[1, 2], kinds=["winning-post"],
                               keys_dir=KEYS_DIR)
    assert res["workers_1"]["failed"] == 0 and res["workers_2"]["failed"] == 0
    assert res["workers_1"]["jobs_per_s"] > 0 and res["workers_2"]["min_busy_fraction"] >= 0
    assert res["workers_2"]["lanes"] == {"per_device": {}, "ok": True}   # no lanes on the CPU
    assert not [p for p in check.problems({"engine": res}) if p.startswith("engine")]


def test_a_device_whose_workers_share_a_lane_fails_the_check(check):
    rep = {"engine": {"workers_2": {"failed": 0,
                                    "lanes": {"per_device": {"cuda:0": 1}, "ok": False}}}}
    assert "engine/workers_2/lanes: ok is false" in check.problems(rep)


def test_the_device_command_refuses_to_run_without_the_kernel_bundle(tmp_path):
    """gpu_check.sh compiles nothing: without the carried bundle it stops at once, loudly."""
    import os
    import subprocess

    env = {**os.environ, "CUZK_GPU_KERNELS": str(tmp_path / "no-bundle")}
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert "no kernel bundle" in proc.stdout and "build_gpu_kernels.py" in proc.stdout
