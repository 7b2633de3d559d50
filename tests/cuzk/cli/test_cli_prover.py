"""``cuzk keygen`` / ``prove`` / ``verify`` as a user runs them: exit codes, files, messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuzk.circuits.registry import bundled_circuits
from cuzk.cli.main import main

KIND = "winning-post"


@pytest.fixture(scope="module")
def proved(tmp_path_factory, bundled) -> Path:
    """keygen for explicit files, then prove with that key: the files a user would have."""
    b = bundled(KIND)
    out = tmp_path_factory.mktemp("cli")
    c = bundled_circuits()[KIND]
    assert (
        main(
            [
                "keygen",
                "--r1cs",
                str(c.r1cs_path),
                "--out",
                str(out / "k.zkey"),
                "--vk",
                str(out / "vk.json"),
            ]
        )
        == 0
    )
    assert main(["prove", KIND, "--zkey", str(b.zkey_path), "--out", str(out)]) == 0
    return out


def test_prove_writes_a_proof_that_verify_accepts(proved: Path, bundled, capsys):
    key = bundled(KIND)
    vk = proved / "key_vk.json"
    vk.write_text(json.dumps(key.key.verification_key.to_json()))
    capsys.readouterr()
    assert (
        main(["verify", "--vk", str(vk), str(proved / "proof.json"), str(proved / "public.json")])
        == 0
    )
    assert capsys.readouterr().out.strip() == "OK"
    assert (
        main(
            [
                "verify",
                "--zkey",
                str(key.zkey_path),
                str(proved / "proof.json"),
                str(proved / "public.json"),
            ]
        )
        == 0
    )


def test_keygen_writes_a_usable_key_and_vk(proved: Path, bundled):
    vk = json.loads((proved / "vk.json").read_text())
    assert vk["protocol"] == "groth16" and vk["curve"] == "bls12381"
    assert vk["nPublic"] == bundled(KIND).key.sizes.n_public
    # A proof made with the new key verifies against the new vk (and not the cached key's).
    assert (
        main(["prove", KIND, "--zkey", str(proved / "k.zkey"), "--out", str(proved / "new")]) == 0
    )
    args = [str(proved / "new" / "proof.json"), str(proved / "new" / "public.json")]
    assert main(["verify", "--vk", str(proved / "vk.json"), *args]) == 0
    assert main(["verify", "--zkey", str(bundled(KIND).zkey_path), *args]) == 1


def test_verify_says_invalid_for_a_wrong_public_signal(proved: Path, bundled, capsys):
    public = json.loads((proved / "public.json").read_text())
    public[0] = str(int(public[0]) + 1)
    (proved / "bad_public.json").write_text(json.dumps(public))
    code = main(
        [
            "verify",
            "--zkey",
            str(bundled(KIND).zkey_path),
            str(proved / "proof.json"),
            str(proved / "bad_public.json"),
        ]
    )
    assert code == 1
    assert "INVALID" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "not JSON"),
        (json.dumps({"pi_a": ["1", "2", "1"], "pi_b": [], "pi_c": []}), "pi_a"),
        (None, "file not found"),
    ],
    ids=["malformed", "off-curve", "missing"],
)
def test_verify_explains_bad_files(proved: Path, bundled, capsys, content, expected):
    path = proved / "broken.json"
    path.unlink(missing_ok=True)
    if content is not None:
        path.write_text(content)
    code = main(
        ["verify", "--zkey", str(bundled(KIND).zkey_path), str(path), str(proved / "public.json")]
    )
    assert code == 2
    assert expected in capsys.readouterr().err


def test_prove_unknown_kind_and_bad_input_exit_2(tmp_path: Path, bundled, capsys):
    assert main(["prove", "no-such-kind"]) == 2
    assert "unknown proof kind 'no-such-kind'" in capsys.readouterr().err
    bad = tmp_path / "input.json"
    bad.write_text(json.dumps({"root": "1"}))
    zkey = str(bundled(KIND).zkey_path)
    assert main(["prove", KIND, "--zkey", zkey, "--input", str(bad), "--out", str(tmp_path)]) == 2
    assert "cuzk prove:" in capsys.readouterr().err
    assert not (tmp_path / "proof.json").exists()


def test_keygen_refuses_unknown_kinds(capsys):
    assert main(["keygen", "no-such-kind"]) == 2
    assert "unknown proof kind" in capsys.readouterr().err
