"""The CUDA kernels themselves (grid-stride indexing, shared tiles, barriers) under the numba CUDA
simulator on tiny inputs, against the CPU references. The simulator is selected by an environment
variable read when numba.cuda is first imported, so the checks run in one subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("sim_checks.py")
CHECKS = ["ntt_multipass", "ntt_single_tile", "h_pipeline"]


@pytest.fixture(scope="module")
def sim_results() -> dict[str, str]:
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    proc = subprocess.run([sys.executable, str(SCRIPT), *CHECKS], capture_output=True, text=True,
                          env=env, timeout=600, check=False)
    assert proc.returncode == 0, f"simulator run failed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", CHECKS)
def test_kernel_under_simulator(sim_results, name):
    assert sim_results.get(name) == "ok", sim_results.get(name, "check did not run")
