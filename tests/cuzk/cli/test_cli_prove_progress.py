"""``cuzk prove`` is not silent through a long proof: the prover's steps (cuzk.progress:
witness, a/b/c, H, each MSM as it ends, assembly, self-verification) are said on stderr as
they pass, on a terminal or with -v; piped without -v, stderr stays clean."""

from __future__ import annotations

import re
from pathlib import Path

from tests.cuzk.cli._cli import cuzk
from tests.cuzk.cli._ran import ok
from tests.cuzk.prover.test_prover_keycheck import R1CS, WASM, ZKEY

INPUT = R1CS.parent / "tiny.input.json"
STEP = re.compile(r"^ +(\d+\.\d\d)s  (.+)$")


def _steps(stderr: str) -> list[str]:
    seen = [(float(m[1]), m[2]) for m in map(STEP.match, stderr.splitlines()) if m]
    times = [t for t, _ in seen]
    assert times == sorted(times), seen  # said as they pass
    return [name for _, name in seen]


def test_verbose_says_each_step_as_it_passes(tmp_path: Path):
    proc = cuzk(tmp_path, "prove", "--r1cs", str(R1CS), "--wasm", str(WASM), "--zkey", str(ZKEY),
                "--input", str(INPUT), "--backend", "cpu", "--out", "out", "-v")
    ok(proc)
    assert "key loaded in " in proc.stderr
    steps = _steps(proc.stderr)
    assert steps[:3] == ["witness", "a/b/c", "constraint check"], steps
    assert steps[-2:] == ["assembly", "self-verification"], steps
    msms = [s for s in steps if s.startswith("MSM ") and " done, " in s]
    if msms:  # the native pool reports each MSM as it ends, counting to five
        assert [m.rsplit(" ", 1)[1] for m in msms] == ["1/5", "2/5", "3/5", "4/5", "5/5"]
        assert sorted(m.split()[1] for m in msms) == ["A", "B1", "B2", "C", "H"]
    else:
        assert {"H", "MSM A", "MSM B1", "MSM C", "MSM H", "MSM B2"} <= set(steps), steps


def test_piped_without_verbose_stderr_holds_no_steps(tmp_path: Path):
    proc = cuzk(tmp_path, "prove", str(ZKEY), str(R1CS.parent / "tiny.wtns"), "p.json",
                "q.json", "--backend", "cpu")
    ok(proc)
    assert proc.stderr == "", proc.stderr
