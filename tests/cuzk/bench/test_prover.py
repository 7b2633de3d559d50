"""The prover bench's whole-process runs: `cuzk prove` timed as a user runs it, each run's line
said as it ends, and a failing `cuzk prove` raised with its own last line."""

from __future__ import annotations

import pytest

from cuzk.bench.prover import cli_runs, run_line, size_order
from cuzk.errors import CuzkError
from tests.cuzk.prover.test_prover_keycheck import R1CS, ZKEY

WTNS = R1CS.parent / "tiny.wtns"


def test_whole_process_runs_without_snarkjs():
    lines: list[str] = []
    row = cli_runs("tiny", ["--r1cs", str(R1CS), "--zkey", str(ZKEY)], ZKEY, WTNS, 2, None,
                   lines.append)
    assert row["mode"] == "cli" and len(row["runs"]) == 2
    assert 0 < row["cuzk_ms_min"] <= row["cuzk_ms_median"] <= row["cuzk_ms_max"]
    assert "speedup_median" not in row  # no snarkjs, no ratio
    assert len(lines) == 4 and lines[2].startswith("tiny run 2: cuzk ")
    assert lines[0] == run_line("tiny", 0, row["runs"][0])
    assert lines[1] == f"  {row['runs'][0]['cuzk_steps']}" and "key_load=" in lines[1]


def test_a_failing_cuzk_prove_is_raised_with_its_reason():
    with pytest.raises(CuzkError, match=r"tiny: cuzk prove exited 2: .*expected a wtns file"):
        cli_runs("tiny", ["--r1cs", str(R1CS), "--zkey", str(ZKEY)], ZKEY, ZKEY, 1, None)


def test_the_bundled_kinds_go_smallest_first_and_others_last():
    kinds = ["porep-c2", "mine", "winning-post", "window-post", "snap-update"]
    assert sorted(kinds, key=size_order) == ["winning-post", "snap-update", "window-post",
                                             "porep-c2", "mine"]
    line = run_line("k", 1, {"cuzk_ms": 12.4, "load_1m": 0.5, "snarkjs_ms": 50.0,
                             "speedup": 4.03})
    assert line == "k run 2: cuzk 12 ms  snarkjs 50 ms  x4.03  load 0.50"
