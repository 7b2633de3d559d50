"""The ledger against RSS (issue 27): what a kind holds resident is what the memory budget
charges for its key. A 2^20-constraint kind once held its r1cs (474 MiB of RSS) and its zkey's
pages beside the ledger's figure; now the circuit keeps its r1cs's header only, the key holds
C's terms for the constraint check (counted), and a load gives back the pages and heap it used.

Measured in a fresh process (``_ledger_probe``) on a synthetic circuit of 2^16 constraints (CI;
2^18 takes minutes to generate on 2 cores: docs/operations.md gives its figures).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import KEYS_DIR, ROOT

MiB = 1 << 20


def synthetic(log2: int, seed: int = 0) -> Path:
    """A synthetic circuit with its witness and development key, generated once and kept with
    the test keys (about a minute at 2^16 on a busy 2-core machine)."""
    from cuzk.circuits.synthetic import synthesize_files

    out = KEYS_DIR / f"synthetic-{log2}-seed{seed}"
    if not (out / "circuit.zkey").exists():
        partial = out.with_name(out.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        synthesize_files(partial, log2, seed)
        shutil.rmtree(out, ignore_errors=True)
        partial.rename(out)
    return out


@pytest.fixture(scope="module")
def measured() -> dict[str, int | bool]:
    probe = subprocess.run(
        [sys.executable, "-m", "tests.cuzk.prover._ledger_probe", str(synthetic(16)),
         str(synthetic(10))],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0 and "Traceback" not in probe.stderr, probe.stderr
    return json.loads(probe.stdout.splitlines()[-1])


def test_the_kind_keeps_no_r1cs_terms_and_its_check_terms_are_charged(measured) -> None:
    assert measured["circuit_keeps_terms"] is False
    assert measured["circuit_file_read"] is False  # the r1cs header is mapped, not read
    assert measured["check_terms_bytes"] > 0
    assert measured["ledger_key_bytes"] == measured["host_bytes"]  # exact before the load


def test_a_key_load_leaves_nothing_the_ledger_does_not_charge(measured) -> None:
    """Right after the load: the pages of the zkey it read and the heap of its temporaries
    are given back; what is left is within the key's figure (its point rows fault back in
    when proven, and the figure counts them)."""
    assert measured["rss_after_load"] <= measured["host_bytes"], measured


def test_what_the_kind_holds_with_its_key_resident_is_its_ledger_figure(measured) -> None:
    """Proven once (every page proving reads is resident), the RSS its resident key accounts
    for (with it, less after its unload) is the ledger's figure, within 5% and 4 MiB; and the
    proof's peak stays within the key and one partition's working memory, which is what the
    budget reserves for it."""
    held = measured["rss_after_proof"] - measured["rss_after_unload"]
    assert abs(held - measured["host_bytes"]) <= 0.05 * measured["host_bytes"] + 4 * MiB, measured
    if measured["rss_peak_in_proof"] >= 0:  # where the kernel lets a process reset its peak
        bound = measured["host_bytes"] + measured["working_bytes"]
        assert measured["rss_peak_in_proof"] <= 1.05 * bound + 4 * MiB, measured
