"""``cuzk bench deadlines`` prints each configuration's table, marks a run the driver made
invalid, refuses bad options in one line, and runs as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys

from cuzk.bench.deadlines import LAG_BOUND_S, Run
from cuzk.cli.bench_deadlines import table

LABELS = ("winning-post missed/submitted", "winning-post p99 s", "GPU busy fraction",
          "background GPU-s/s", "pred. |err| p50/p95 s", "driver lag p99/max s",
          "valid (no miss the driver caused)", "winning-post refused/at risk")


def _cuzk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cuzk.cli.main", *args], capture_output=True,
                          text=True, timeout=120)


def test_a_run_whose_driver_fell_behind_is_marked_in_the_table():
    late_but_met = Run("new", wall_model_s=10.0, lags=[0.0, LAG_BOUND_S + 0.5])
    late_and_missed = Run("old", wall_model_s=10.0, lags=[0.0, LAG_BOUND_S + 0.5],
                          missed={"winning-post": 1}, missed_late_submit=1)
    lines = table("t", [late_but_met, late_and_missed]).splitlines()
    assert next(x for x in lines if x.startswith("valid")).split()[-2:] == ["yes", "NO"]
    assert next(x for x in lines if x.startswith("submits >")).split()[-4:] == [
        "1", "(0)", "1", "(1)"]


def test_one_short_run_on_the_command_line_prints_every_figure(tmp_path):
    out = tmp_path / "figures.json"
    proc = _cuzk("bench", "deadlines", "--hours", "0.1", "--scale", "0.001", "--loads", "0.7",
                 "--scenarios", "bundled", "--orders", "old,new", "--json", str(out))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("  bundled priorities, load 70%, old order:")
    assert lines[1].startswith("  bundled priorities, load 70%, new order:")
    assert lines[2] == "bundled/70%" and lines[3].split() == ["old", "new"]
    for label in LABELS:
        assert any(label in line for line in lines), label
    assert set(json.loads(out.read_text())["runs"]["bundled/70%"]) == {"old", "new"}


def test_a_bad_order_is_one_line_and_exit_2():
    proc = _cuzk("bench", "deadlines", "--orders", "sideways")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stdout.strip().splitlines() == [
        "cuzk bench deadlines: --scenarios takes bundled,flat; --orders takes "
        "old,new,new-nopreempt; --loads fractions in (0, 5); --hours and --scale positive"]
