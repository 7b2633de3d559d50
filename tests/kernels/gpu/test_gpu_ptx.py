"""Every GPU kernel compiles to PTX for sm_90 with a PTX ISA the CUDA 13.0 driver accepts, and
ptxas assembles it for sm_90 (no GPU needed). In CI (CI=true) a missing toolchain is a failure:
numba-cuda with NVVM 13.0 and ptxas come from the pinned pip packages (see kernels/gpu/README.md).

The kernels are compiled in two subprocesses at once (the MSM kernels take most of the time)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._tools import require_tool

ROOT = Path(__file__).resolve().parents[3]
MAX_PTX_ISA = (9, 0)     # PTX ISA of CUDA 13.0: a 13.0 driver JIT-compiles PTX up to this version
# Two balanced groups (measured compile times: the three MSM kernels dominate).
GROUPS = [
    ["msm_sum", "msm_accumulate", "ntt_twiddles", "ntt_scale", "ntt_bitrev"],
    ["msm_window_segment", "ntt_pass", "ntt_coset_shift", "to_limb_major", "from_limb_major",
     "h_join_abc", "msm_digits"],
]
ALL = [name for group in GROUPS for name in group]


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
def ptx_summary(tmp_path_factory) -> tuple[Path, dict]:
    problem = _toolchain_problem()
    if problem:
        require_tool("GPU compile toolchain", "", hint=problem)
    out = tmp_path_factory.mktemp("ptx")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    procs = [subprocess.Popen([sys.executable, "-m", "kernels.gpu.ptx", "--ptxas", str(out), *g],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for g in GROUPS]
    for p in procs:
        stdout, stderr = p.communicate(timeout=900)
        assert p.returncode == 0, f"PTX compile failed:\n{stdout}\n{stderr}"
    summary: dict = {}
    for f in out.glob("summary-*.json"):
        summary.update(json.loads(f.read_text()))
    return out, summary


def test_every_launched_kernel_is_listed():
    from kernels.gpu.ptx import kernel_specs

    assert sorted(s.name for s in kernel_specs()) == sorted(ALL)


@pytest.mark.parametrize("name", ALL)
def test_kernel_compiles_for_sm90(ptx_summary, name):
    out, summary = ptx_summary
    info = summary[name]
    assert info["target"] == "sm_90"
    major, minor = (int(x) for x in info["version"].split("."))
    assert (major, minor) <= MAX_PTX_ISA, f"PTX ISA {info['version']} is newer than CUDA 13.0's"
    ptx = (out / f"{name}.ptx").read_text()
    assert ".visible .entry" in ptx
    assert any("registers" in ln for ln in info["ptxas"]), "ptxas did not assemble it"
