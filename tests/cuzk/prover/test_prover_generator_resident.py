"""The ledger against RSS with the witness generators in (issue 27): the bundled kinds, served
as the server serves them, in a fresh process (``_generator_probe``).

Before: each kind's compiled generator stayed resident from its first submit (5.3 MB for
snap-update, 11.7 MB for porep-c2 after the compiler's freed heap was trimmed), the wasm
runtime (22 MB) was charged nowhere, and a proof's peak passed its key and partition's
reservation by up to 22% (snap-update: 11.2 MB against 9.2). Now a generator is compiled in a
child process and mapped only while it computes, its working memory is in the partition's
reservation, and the runtime is the engine's fixed ``prover_runtime`` reservation.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cuzk.circuits.registry import bundled_circuits
from cuzk.prover.keystore import ensure_zkey
from tests.conftest import KEYS_DIR, ROOT
from tests.cuzk.prover._generator_probe import KINDS

MiB = 1 << 20


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    for kind in KINDS:  # the suite's cached development keys
        ensure_zkey(kind, Path(bundled_circuits()[kind].r1cs_path), KEYS_DIR)
    probe = subprocess.run(
        [sys.executable, "-m", "tests.cuzk.prover._generator_probe", str(KEYS_DIR)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert probe.returncode == 0 and "Traceback" not in probe.stderr, probe.stderr
    out: dict[str, Any] = json.loads(probe.stdout.splitlines()[-1])
    return out


def test_the_wasm_runtime_is_within_its_fixed_reservation(measured) -> None:
    """Paid once, by the first generator that runs; the figure is not inflated either."""
    assert 0.5 * measured["runtime_charge"] <= measured["runtime"] <= measured["runtime_charge"]


def test_a_kind_holds_nothing_for_its_generator_between_computations(measured) -> None:
    """After the kind's first submit checked its inputs (the generator built and run), with no
    key loaded: the ledger charges the kind nothing, and nothing of the generator is held."""
    for kind, m in measured["kinds"].items():
        assert m["generator_held"] <= 1 * MiB, (kind, m)


def test_a_proof_with_its_generator_stays_within_its_key_and_partition(measured) -> None:
    """Proven the engine's way (the witness from the generator): the peak is within the key
    and one partition's reservation, which counts the generator's instance and code; the RSS
    the resident key accounts for is the key's charge."""
    for kind, m in measured["kinds"].items():
        if m["rss_peak_in_proof"] >= 0:  # where the kernel lets a process reset its peak
            bound = m["key_charge"] + m["partition_charge"]
            assert m["rss_peak_in_proof"] <= 1.05 * bound + 1 * MiB, (kind, m)
        held = m["rss_after_proof"] - m["rss_after_unload"]
        assert abs(held - m["host_bytes"]) <= 0.05 * m["host_bytes"] + 1 * MiB, (kind, m)
        assert m["key_charge"] == m["host_bytes"]
