"""Every GPU kernel builds ahead of time for sm_90 (no GPU needed): scripts/build_gpu_kernels.py
compiles it to PTX with a PTX ISA the CUDA 13.0 driver accepts, assembles it with ptxas, checks
the launch ABI against the PTX entry, and records ptxas's full resource report. Each kernel must
not spill and must stay within its stack budget (kernels/gpu/ptx.py). In CI (CI=true) a missing
toolchain is a failure: numba-cuda with NVVM 13.0 and ptxas come from the pinned pip packages.

The bundle is built once, in two processes (the MSM kernels take most of the time), or taken
from CUZK_TEST_GPU_KERNELS when that names one already built from this tree."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests._tools import require_tool

ROOT = Path(__file__).resolve().parents[3]
MAX_PTX_ISA = (9, 0)     # PTX ISA of CUDA 13.0: a 13.0 driver JIT-compiles PTX up to this version
ALL = [
    "ntt_pass", "ntt_twiddles", "ntt_coset_shift", "ntt_scale", "ntt_bitrev", "to_limb_major",
    "from_limb_major", "h_join_abc",
]


def _toolchain_problem() -> str | None:
    try:
        from numba.cuda.cudadrv import nvvm

        nvvm.NVVM()
    except Exception as exc:  # missing numba-cuda or NVVM
        return f"numba-cuda/NVVM unavailable: {exc}"
    from kernels.gpu.ptx import find_ptxas

    if find_ptxas() is None:
        return "ptxas not found"
    return None


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> tuple[Path, dict]:
    problem = _toolchain_problem()
    if problem:
        require_tool("GPU compile toolchain", "", hint=problem)
    prebuilt = os.environ.get("CUZK_TEST_GPU_KERNELS")
    if prebuilt:
        # A bundle built by scripts/build_gpu_kernels.py from this tree (load_bundle in
        # test_bundle_verifies_against_this_tree refuses one built from other sources).
        out = Path(prebuilt)
        return out, json.loads((out / "manifest.json").read_text())
    out = tmp_path_factory.mktemp("kernels") / "gpu-kernels"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    # Its own process group: on a timeout the compile workers go too, not only their parent.
    # The C++ kernels in the variant the engine runs; the device bundle has them all.
    from kernels.gpu.cxx_kernels import DEFAULT_VARIANT

    proc = subprocess.Popen([sys.executable, "scripts/build_gpu_kernels.py", "--jobs", "2",
                             "--cxx-variants", DEFAULT_VARIANT, str(out)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=1500)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert proc.returncode == 0, f"kernel build failed:\n{stdout}\n{stderr}"
    print(stdout)
    return out, json.loads((out / "manifest.json").read_text())


def test_every_launched_kernel_is_listed_with_a_budget():
    from kernels.gpu.cxx_kernels import KERNELS
    from kernels.gpu.ptx import STACK_BUDGET_BYTES, kernel_specs

    assert sorted(s.name for s in kernel_specs()) == sorted(ALL)
    assert sorted(STACK_BUDGET_BYTES) == sorted(ALL + [f"cxx/{k}" for k in KERNELS])


@pytest.mark.parametrize("name", ALL)
def test_kernel_builds_for_sm90(bundle, name):
    from kernels.gpu import aot, ptx

    out, manifest = bundle
    k = manifest["kernels"][name]
    assert k["arch"] == "sm_90"
    major, minor = (int(x) for x in k["ptx_isa"].split("."))
    assert (major, minor) <= MAX_PTX_ISA, f"PTX ISA {k['ptx_isa']} is newer than CUDA 13.0's"
    text = (out / k["ptx"]).read_text()
    assert ptx.entry_name(text) == k["entry"]
    assert aot.ptx_param_widths(ptx.entry_param_types(text)) == aot.param_widths(k["params"])
    assert (out / k["cubin"]).read_bytes()[:4] == b"\x7fELF"


@pytest.mark.parametrize("name", ALL)
def test_kernel_resources_within_budget(bundle, name):
    """Registers, stack and spills from the full ptxas -v report: no spills, stack in budget."""
    from kernels.gpu import ptx

    out, manifest = bundle
    k = manifest["kernels"][name]
    report = (out / f"{name}.ptxas.txt").read_text()
    assert ptx.resource_report(report, k["entry"]) == k["resources"]
    assert 0 < k["resources"]["registers"] <= 255
    assert ptx.budget_problems(name, k["resources"]) == []


def test_bundle_verifies_against_this_tree(bundle):
    from kernels.gpu import aot

    out, manifest = bundle
    loaded = aot.load_bundle(out)
    assert sorted(loaded.entries) == sorted(ALL)
    assert manifest["source_sha256"] == aot.source_hash()


def test_cxx_kernels_build_for_sm90_within_budget(bundle):
    """The C++ MSM kernels (nvcc): an sm_90 cubin, every kernel of the module present in
    ptxas's report, no spill, stack within budget (the engine's variant)."""
    from kernels.gpu import aot, cxx_kernels, ptx

    out, manifest = bundle
    cxx = manifest["cxx"]
    assert cxx["source_sha256"] == cxx_kernels.source_hash() and cxx["arch"] == "sm_90"
    variant = cxx_kernels.DEFAULT_VARIANT
    entry = cxx["variants"][variant]
    cubin = (out / entry["cubin"]).read_bytes()
    assert cubin[:4] == b"\x7fELF" and aot.sha256_bytes(cubin) == entry["cubin_sha256"]
    report = (out / "cxx" / f"msm_{variant}.ptxas.txt").read_text()
    assert sorted(entry["resources"]) == sorted(cxx_kernels.KERNELS)
    for name, res in entry["resources"].items():
        assert ptx.resource_report(report, name) == res
        assert 0 < res["registers"] <= 255
        assert ptx.budget_problems(f"cxx/{name}", res) == [], name
