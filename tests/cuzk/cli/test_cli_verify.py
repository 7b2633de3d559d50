"""``cuzk verify`` as a user runs it: proof.json and public.json in either order (cuzk's,
or snarkjs's ``public.json proof.json``), told apart by content."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cuzk.cli._cli import cuzk, said
from tests.cuzk.cli._ran import ok
from tests.cuzk.prover.test_prover_keycheck import R1CS, ZKEY

WTNS = R1CS.parent / "tiny.wtns"


@pytest.fixture(scope="module")
def proved(tmp_path_factory) -> Path:
    """proof.json, public.json and vk.json of the tiny circuit, made by the commands."""
    d = tmp_path_factory.mktemp("verify")
    ok(cuzk(d, "prove", ZKEY, WTNS, "proof.json", "public.json", "--backend", "cpu"))
    from cuzk.prover.keys import ProvingKey

    (d / "vk.json").write_text(json.dumps(ProvingKey.load(ZKEY).verification_key.to_json()))
    return d


@pytest.mark.parametrize("order", [("proof.json", "public.json"), ("public.json", "proof.json")],
                         ids=["cuzk", "snarkjs"])
def test_either_order_verifies(proved: Path, order):
    assert ok(cuzk(proved, "verify", "--vk", "vk.json", *order)).strip() == "OK"


def test_either_order_still_refuses_a_wrong_signal(proved: Path):
    public = json.loads((proved / "public.json").read_text())
    public[1] = str(int(public[1]) + 1)
    (proved / "wrong.json").write_text(json.dumps(public))
    for order in (("proof.json", "wrong.json"), ("wrong.json", "proof.json")):
        proc = cuzk(proved, "verify", "--vk", "vk.json", *order)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stdout.startswith("INVALID"), proc.stdout


@pytest.mark.parametrize(("files", "expected"), [
    (("public.json", "public.json"), "are both public signals (lists)"),
    (("proof.json", "proof.json"), "are both proofs"),
], ids=["two-publics", "two-proofs"])
def test_two_files_of_one_kind_are_named(proved: Path, files, expected):
    proc = cuzk(proved, "verify", "--vk", "vk.json", *files)
    line = said(proc, "verify")
    assert expected in line and proc.returncode == 2, line
