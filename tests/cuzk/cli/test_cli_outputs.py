"""Output paths are checked before any long work and refused on one line (no PermissionError
traceback after the work is done); an input path that is a directory says so; a bundled proof
kind is replaced only when asked; errors stay on one line when stderr is a pipe."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuzk.circuits.registry import bundled_circuits
from cuzk.cli.main import main
from cuzk.config import load_config
from tests.cuzk.prover.test_prover_keycheck import R1CS, WASM, ZKEY

INPUT = R1CS.parent / "tiny.input.json"


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    return err


@pytest.fixture
def blocker(tmp_path: Path) -> Path:
    """A regular file: nothing can be written below it, whoever runs the test (root too)."""
    path = tmp_path / "a-file"
    path.write_text("")
    return path


def test_prove_refuses_an_unwritable_out_before_proving(blocker: Path, tmp_path: Path, capsys):
    keys = tmp_path / "keys"
    args = ["prove", "--r1cs", str(R1CS), "--wasm", str(WASM), "--input", str(INPUT),
            "--keys-dir", str(keys), "--out", str(blocker / "out")]  # fmt: skip
    assert main(args) == 2
    assert "--out" in _one_line(capsys)
    assert not keys.exists(), "a development key was made before refusing"


def test_keygen_refuses_an_unwritable_out_before_the_setup(blocker: Path, capsys):
    assert main(["keygen", "--r1cs", str(R1CS), "--out", str(blocker / "tiny.zkey")]) == 2
    assert "--out" in _one_line(capsys)


def test_keygen_refuses_an_unwritable_vk_before_the_setup(blocker: Path, tmp_path: Path, capsys):
    zkey = tmp_path / "tiny.zkey"
    args = ["keygen", "--r1cs", str(R1CS), "--out", str(zkey), "--vk", str(blocker / "vk.json")]
    assert main(args) == 2
    assert "--vk" in _one_line(capsys)
    assert not zkey.exists()


def test_circuit_add_refuses_an_unwritable_config_before_checking_files(blocker: Path, capsys):
    """The wasm belongs to another circuit, which loading the files would report (status 1):
    the config is refused first."""
    other_wasm = bundled_circuits()["winning-post"].wasm_path
    args = ["circuit", "add", "tiny", "--r1cs", str(R1CS), "--wasm", str(other_wasm),
            "--config", str(blocker / "cuzk.toml")]  # fmt: skip
    assert main(args) == 2
    assert "--config" in _one_line(capsys)


def test_a_zkey_that_is_a_directory_says_so(tmp_path: Path, capsys):
    args = ["prove", "--r1cs", str(R1CS), "--wasm", str(WASM), "--zkey", str(tmp_path),
            "--input", str(INPUT), "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(args) == 2
    assert f"--zkey {tmp_path}: is a directory" in _one_line(capsys)


def test_circuit_add_replaces_a_bundled_kind_only_when_asked(tmp_path: Path, capsys):
    config = tmp_path / "cuzk.toml"
    args = ["circuit", "add", "winning-post", "--r1cs", str(R1CS), "--wasm", str(WASM),
            "--zkey", str(ZKEY), "--config", str(config)]  # fmt: skip
    assert main(args) == 2
    assert "bundled proof kind" in _one_line(capsys) and not config.exists()
    assert main([*args, "--replace"]) == 0
    assert load_config(config).proof_kinds["winning-post"].r1cs == R1CS


def test_errors_stay_on_one_line_when_piped(closed_port: int, capsys, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    url = f"http://127.0.0.1:{closed_port}/a-long-path-prefix-{'x' * 60}"
    assert main(["submit", "winning-post", "--server", url, "--retry-for", "0"]) == 1
    err = _one_line(capsys)
    assert len(err) > 120 and "cannot reach the cuzk server" in err


def test_status_errors_stay_on_one_line_when_piped(closed_port: int, capsys):
    url = f"http://127.0.0.1:{closed_port}/a-long-path-prefix-{'x' * 60}"
    assert main(["status", "--once", "--server", url]) == 1
    err = _one_line(capsys)
    assert len(err) > 120 and "cannot reach the cuzk server" in err
