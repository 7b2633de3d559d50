"""cuzk.prover.keygen: the point sections computed by worker processes are the very points one
process computes, so a key's bytes do not depend on the core count."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cuzk.circuits import synthetic
from cuzk.formats.r1cs import read_r1cs
from cuzk.formats.zkey import write_zkey
from cuzk.prover import keygen
from cuzk.prover.keygen_workers import WorkerError, Workers


def _fixed_draws():
    values = iter([11, 22, 33, 44, 55])
    return lambda _bound: next(values)


def test_worker_processes_make_the_same_key(tmp_path: Path, monkeypatch):
    path = tmp_path / "c.r1cs"
    synthetic.write_r1cs(path, synthetic.generate(7, seed=2, witness=False))
    r1cs = read_r1cs(path)
    monkeypatch.setattr(keygen, "CHUNK", 40)  # several chunks a section, some of them partial
    one = keygen.setup(r1cs, rng=_fixed_draws(), workers=1)
    ticks: list[tuple[str, int, int]] = []
    two = keygen.setup(r1cs, rng=_fixed_draws(), workers=2,
                       progress=lambda *t: ticks.append(t))
    for f in dataclasses.fields(one):
        a, b = getattr(one, f.name), getattr(two, f.name)
        if isinstance(a, np.ndarray):
            assert a.shape == b.shape and np.array_equal(a, b), f.name
        else:
            assert a == b, f.name
    write_zkey(tmp_path / "one.zkey", one)
    write_zkey(tmp_path / "two.zkey", two)
    assert (tmp_path / "one.zkey").read_bytes() == (tmp_path / "two.zkey").read_bytes()
    finished = {(stage, total) for stage, done, total in ticks if done == total}
    assert finished == {("IC", 3), ("A", r1cs.n_wires), ("B1", r1cs.n_wires),
                        ("B2", r1cs.n_wires), ("C", r1cs.n_wires - 3), ("H", 128)}


def test_small_domains_stay_in_this_process():
    assert keygen._workers(None, keygen.PARALLEL_MIN_DOMAIN // 2) == 1
    assert keygen._workers(3, 8) == 3


def test_a_script_without_a_main_guard_can_use_workers(tmp_path: Path):
    """Workers are plain subprocesses: nothing re-runs the caller's script (multiprocessing's
    spawn would, and this script would then start workers of its own, without end)."""
    script, r1cs = tmp_path / "unguarded.py", str(tmp_path / "c.r1cs")
    script.write_text(
        "from cuzk.circuits import synthetic\n"
        "from cuzk.formats.r1cs import read_r1cs\n"
        "from cuzk.prover import keygen\n"
        f"synthetic.write_r1cs({r1cs!r}, synthetic.generate(6, witness=False))\n"
        f"key = keygen.setup(read_r1cs({r1cs!r}), workers=2)\n"
        "print('domain', key.domain_size)\n"
    )
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "domain 64"


def test_a_failing_worker_is_an_error_not_a_hang():
    with Workers(1) as workers, pytest.raises(WorkerError, match="keygen worker"):
        list(workers.run([("g1", [1]), ("g1", [-1])]))  # -1: the worker dies on it
