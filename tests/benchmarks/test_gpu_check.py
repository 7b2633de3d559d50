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
        # the C++ NTT side by side (its host twin here), checked against the CPU as well
        assert v["cxx"]["match"] is True and v["cxx"]["h_match"] is True
        assert v["cxx"]["h_pipeline"]["wall_ms"] >= 0


def test_msm_section_matches_on_the_cpu_runtime(check):
    """Sizes beyond the point period take the tiled path (reference times the repeat count)."""
    res = check.section_msm(check.CpuRuntime(), [3, 6], repeats=1, period=16, g2_max_log=3)
    assert res["2^3"]["distinct_points"] == 8 and res["2^6"]["distinct_points"] == 16
    for v in res.values():      # the C++ kernels on their host twin
        assert v["cxx_portable"]["match"] is True
        assert set(v["cxx_portable"]["steps_ms"]) >= {"count", "accumulate", "windows"}
    assert res["2^3"]["g2"]["match"] is True and "g2" not in res["2^6"]
    for log_m, v in (("3", res["2^3"]), ("6", res["2^6"])):   # beside them, the tabled plan
        tab = v["tabled_portable"]
        assert tab["match"] is True and tab["plan"]["copies"] > 1, (log_m, tab)
        assert tab["table_bytes"] <= tab["table_budget_bytes"] == 8 * 96 * (1 << int(log_m))
        assert tab["modelled_work_ratio"] < 1
        assert set(tab["steps_ms"]) >= {"count", "accumulate", "windows"}


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
                     "--g2-max-log", "3", "--skip", "device_tests,proofs,engine,scale"])
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert rc == 1
    assert report["problems"] == ["device_tests: did not run", "proofs: did not run",
                                  "engine: did not run", "scale: did not run"]
    assert report["ntt"]["2^4"]["match"] is True
    assert report["msm"]["2^4"]["cxx_portable"]["match"] is True
    out = capsys.readouterr().out
    assert "PROBLEM engine: did not run" in out and "NTT" in out and "MSM" in out


GOOD = {
    "device": {"name": "H200"},
    "device_tests": {"tests": 9, "failures": 0, "errors": 0, "skipped": 0, "returncode": 0},
    "ntt": {"2^16": {"forward": {"event_ms": 0.1, "wall_ms": 0.2}, "match": True,
                     "h_pipeline": {"event_ms": 0.5, "wall_ms": 0.6}, "h_match": True}},
    "msm": {"2^16": {"cxx_ptx": {"event_ms": 2.0, "wall_ms": 3.0, "match": True,
                                 "memory": {"estimate_bytes": 10, "measured_peak_bytes": 9,
                                            "ok": True}}}},
    "proofs": {"porep-c2": {"match": True, "verified": True, "speedup": 12.0,
                            "memory": {"H": {"estimate_bytes": 5, "measured_peak_bytes": 5,
                                             "ok": True}}}},
    "engine": {"workers_1": {"failed": 0}, "workers_2": {"failed": 0}},
    "scale": {"2^18": {"verified": True, "match": True}},
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
    (["msm", "2^16", "cxx_ptx", "match"], False, "msm/2^16/cxx_ptx: match is false"),
    (["engine", "workers_2", "failed"], 3, "engine/workers_2: 3 failed jobs"),
    (["device_tests", "skipped"], 4, "device_tests: 4 skipped"),
    (["device_tests", "failures"], 1, "device_tests: 1 failures"),
    (["msm", "2^16", "cxx_ptx", "memory", "ok"], False,
     "msm/2^16/cxx_ptx/memory: ok is false"),
    (["scale", "2^18"], {"error": "Traceback"}, "scale/2^18: error"),
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
    """The fastest correct G1 implementation of a size counts; a mismatching one never."""
    rep = _with(["msm", "2^20"], {
        "cxx_ptx": {"event_ms": 30.0, "wall_ms": 31.0, "match": True},
        "cxx_ptx-callmul": {"event_ms": 20.0, "wall_ms": 21.0, "match": True},
        "cxx_portable": {"event_ms": 5.0, "wall_ms": 6.0, "match": False},
        "g2": {"event_ms": 40.0, "wall_ms": 41.0, "match": True}})
    rep["ntt"]["2^20"] = {"forward": {"event_ms": 0.2, "wall_ms": 1.2}, "match": True,
                          "h_pipeline": {"event_ms": 2, "wall_ms": 3}, "h_match": True}
    rep["engine"]["workers_1"]["device_utilization"] = {"mean_ratio": 0.4}
    t = check.target_figures(rep)
    assert t["msm_2^20_ms"] == {"value": 20.0, "target": "<= 15.0", "met": False}
    assert t["msm_2^16_ms"]["met"] is True and t["g2_msm_2^20_ms"]["met"] is True
    assert t["ntt_2^20_ms"]["met"] is True and t["h_2^20_ms"]["met"] is False
    assert t["porep_c2_speedup"]["met"] is False                      # 12 < 20
    assert t["engine_device_utilization"] == {"value": 0.4, "target": ">= 0.9", "met": False}
    text = check.table(rep)
    assert "2^20" in text and "5.000!" in text                        # a mismatch is marked


def test_scale_section_proves_a_synthetic_circuit_end_to_end(check, tmp_path):
    """On the CPU runtime both sides are the CPU backend: the plumbing (make, load, prove,
    verify, compare) is what runs; a size that cannot fit the time left is said, not tried."""
    import time

    from cuzk.prover import CpuBackend

    res = check.section_scale(CpuBackend(), [7, 30], tmp_path, time.monotonic() + 120)
    v = res["2^7"]
    assert "error" not in v, v.get("error")
    assert v["verified"] is True and v["match"] is True and v["domain"] == 128
    assert set(v["make_s"]) == {"r1cs", "witness", "keygen"}
    assert "not_run" in res["2^30"]


def test_engine_section_runs_one_and_two_workers(check):
    from tests.conftest import KEYS_DIR

    res = check.section_engine("cpu", jobs=2, workers=[1, 2], kinds=["winning-post"],
                               keys_dir=KEYS_DIR)
    assert res["workers_1"]["failed"] == 0 and res["workers_2"]["failed"] == 0
    assert res["workers_1"]["jobs_per_s"] > 0 and res["workers_2"]["min_busy_fraction"] >= 0
    assert res["workers_2"]["lanes"] == {"per_device": {}, "ok": True}   # no lanes on the CPU
    assert res["workers_1"]["device_utilization"]["samples"] == 0       # no nvidia-smi here
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


def _probe_wheel(where: Path) -> Path:
    """A minimal wheel (one module), as pip builds them, to install without an index."""
    import zipfile

    name = "cuzk_wheel_probe"
    dist = f"{name}-0.1.dist-info"
    files = {f"{name}.py": "VALUE = 42\n",
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    files[f"{dist}/RECORD"] = "".join(f"{f},,\n" for f in files) + f"{dist}/RECORD,,\n"
    path = where / f"{name}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for f, text in files.items():
            z.writestr(f, text)
    return path


def test_device_setup_works_when_the_images_python_is_itself_a_venv(tmp_path):
    """The GPU image's python3 is a venv holding CuPy: a venv made from it (what the check did)
    does not see CuPy; the check now installs the carried wheels into a target directory on
    PYTHONPATH and runs that python itself. Here an 'image' venv with a stand-in CuPy (and this
    environment's packages through a .pth file) goes through the script's set-up to its import
    check, twice (the second install replaces the first: --upgrade)."""
    import os
    import site
    import subprocess

    image = tmp_path / "image"
    subprocess.run([sys.executable, "-m", "venv", str(image)], check=True, timeout=120)
    py = image / "bin" / "python"
    img_site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                                    "['purelib'])"], capture_output=True, text=True,
                                   check=True).stdout.strip())
    (img_site / "cupy").mkdir()
    (img_site / "cupy" / "__init__.py").write_text("__version__ = 'image-stub'\n")
    (img_site / "host-env.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    # the old set-up's failure: a venv made from the image's python does not see its CuPy
    nested = tmp_path / "nested"
    subprocess.run([str(py), "-m", "venv", "--without-pip", "--system-site-packages",
                    str(nested)], check=True, timeout=120)
    old = subprocess.run([str(nested / "bin" / "python"), "-c", "import cupy"],
                         capture_output=True, text=True, check=False)
    assert old.returncode != 0 and "No module named 'cupy'" in old.stderr

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _probe_wheel(wheels)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "manifest.json").write_text("{}")
    env = {**os.environ, "PYTHON": str(py), "CUZK_GPU_KERNELS": str(bundle),
           "GPU_CHECK_WHEELS": str(wheels), "GPU_CHECK_SITE": str(tmp_path / "site"),
           "GPU_CHECK_SETUP_ONLY": "1"}
    for _ in range(2):
        proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"),
                               str(tmp_path / "out")], env=env, capture_output=True, text=True,
                              timeout=300, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "set-up checked" in proc.stdout
    probe = (tmp_path / "out" / "toolchain.txt").read_text()
    assert "import cupy image-stub" in probe and "import opentelemetry.sdk" in probe
    assert (tmp_path / "site" / "cuzk_wheel_probe.py").is_file()


def test_the_tabled_phase_of_the_scale_section_on_the_numpy_stand_in(check, monkeypatch):
    """The scale section's tabled run (a second backend with msm_precompute = "on") on the
    NumPy stand-in for CuPy: its sums equal the plain phase's and its key carries the copies."""
    import random
    from types import SimpleNamespace

    from cuzk.prover.groth16 import gpu_phase
    from kernels.field import FR, ints_to_array
    from tests.kernels.gpu.fake_cupy import groth16_key, install

    backend, _ = install(monkeypatch)
    key, _ = groth16_key(40, 2, 5)
    rng = random.Random(3)
    w = ints_to_array([1] + [rng.randrange(1 << 250) for _ in range(39)], 8)
    a, b, c = (FR.to_mont(FR.from_ints([rng.randrange(1 << 250) for _ in range(32)]))
               for _ in range(3))
    synth = SimpleNamespace(abc=(a, b, c), witness=w)
    plain_bytes = backend.upload_key(key)
    plain = gpu_phase(key, synth, backend)
    res = check._tabled_phase(backend, key, synth, plain)
    assert res["match"] is True
    assert res["device_key_bytes"] > plain_bytes
    assert "MSM B2" in res["device_steps_ms"]


def test_ntt_targets_take_the_faster_correct_ntt(check):
    """numba and C++ side by side: the faster one that matches counts, a mismatching one never;
    the table shows both."""
    rep = json.loads(json.dumps(GOOD))
    rep["ntt"]["2^20"] = {"forward": {"event_ms": 0.9, "wall_ms": 1.2}, "match": True,
                          "h_pipeline": {"event_ms": 4.3, "wall_ms": 5}, "h_match": True,
                          "cxx": {"forward": {"event_ms": 0.25, "wall_ms": 0.4}, "match": True,
                                  "h_pipeline": {"event_ms": 1.0, "wall_ms": 1.2},
                                  "h_match": False},
                          "cxx_ptx": {"forward": {"event_ms": 0.28, "wall_ms": 0.4},
                                      "match": True,
                                      "h_pipeline": {"event_ms": 1.4, "wall_ms": 1.6},
                                      "h_match": True}}
    t = check.target_figures(rep)
    assert t["ntt_2^20_ms"] == {"value": 0.25, "target": "<= 0.3", "met": True}
    assert t["h_2^20_ms"] == {"value": 1.4, "target": "<= 1.5", "met": True}
    assert "ntt/2^20/cxx: h_match is false" in check.problems(rep)
    text = check.table(rep)
    assert "  C++" in text and "  ptx" in text
    del rep["ntt"]["2^20"]["cxx_ptx"]
    assert check.target_figures(rep)["h_2^20_ms"]["value"] == 4.3   # the mismatch never counts
