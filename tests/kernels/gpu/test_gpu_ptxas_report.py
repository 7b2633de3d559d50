"""Parsing ptxas -v: every function's stack and spills count, not the last two lines."""

from __future__ import annotations

from kernels.gpu import ptx

USED = ("ptxas info    : Used 158 registers, used 1 barriers, 32768 bytes smem, "
        "400 bytes cumulative stack size")
REPORT = f"""ptxas info    : 120 bytes gmem
ptxas info    : Compiling entry function '_Zkern' for 'sm_90'
ptxas info    : Function properties for _Zkern
    208 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
{USED}
ptxas info    : Compile time = 9247.708 ms
ptxas info    : Function properties for _Zadd_affine
    96 bytes stack frame, 24 bytes spill stores, 16 bytes spill loads
"""


def test_resource_report_reads_every_function():
    r = ptx.resource_report(REPORT, "_Zkern")
    assert r == {"registers": 158, "barriers": 1, "shared_bytes": 32768, "stack_frame": 208,
                 "stack_bytes": 400, "spill_stores": 24, "spill_loads": 16, "functions": 2}


def test_a_spill_in_a_called_function_breaks_the_budget():
    r = ptx.resource_report(REPORT, "_Zkern")
    problems = ptx.budget_problems("cxx/msm_digit_counts", r)
    assert any("spills (24 bytes stores, 16 bytes loads)" in p for p in problems)
    assert any("400 bytes of stack" in p for p in problems)
    assert ptx.budget_problems("unknown_kernel", {**r, "spill_stores": 0, "spill_loads": 0}) == [
        "unknown_kernel has no stack budget in kernels/gpu/ptx.py"]


def test_report_without_cumulative_stack_uses_the_frame():
    rep = REPORT.replace(", 400 bytes cumulative stack size", "")
    assert ptx.resource_report(rep, "_Zkern")["stack_bytes"] == 208
