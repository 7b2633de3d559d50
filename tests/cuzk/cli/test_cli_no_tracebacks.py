"""No tracebacks, ever: each failure here once ended in a Python traceback; run as a user runs
them (a subprocess, a real environment), each says on one line what is wrong and what to do,
with a non-zero exit. A reader of stdout that goes away (``| head -1``) ends the command
quietly. Help texts: every command has a description, every option a help line."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from cuzk.cli.main import build_parser, main
from tests.cuzk.cli._cli import cuzk as _cuzk
from tests.cuzk.cli._cli import said as _said
from tests.cuzk.prover.test_prover_keycheck import R1CS, ZKEY


def test_an_unwritable_key_cache_is_one_line_naming_the_setting(tmp_path: Path):
    """/proc/x cannot be created, whoever runs the test (root too)."""
    serve = _cuzk(tmp_path, "serve", "--listen", "127.0.0.1:0", CUZK_ENGINE_KEYS_DIR="/proc/x")
    line = _said(serve, "serve")
    assert "cannot write proving keys in /proc/x" in line and "CUZK_ENGINE_KEYS_DIR" in line
    assert serve.returncode == 2
    for args in (["prove", "winning-post", "--out", "out"], ["keygen"]):
        proc = _cuzk(tmp_path, *args, XDG_CACHE_HOME="/proc/x")
        line = _said(proc, args[0])
        assert "cannot write proving keys in /proc/x/cuzk/keys" in line, line
        assert "--keys-dir" in line and proc.returncode == 2


def test_a_key_cache_that_is_a_file_says_so(tmp_path: Path):
    """A file where the cache should be, or above it: not "File exists" or a traceback."""
    (tmp_path / "afile").write_text("")
    for keys_dir, why in (("afile", "it is a file, not a directory"),
                          ("afile/keys", "a directory above it is a file")):
        serve = _cuzk(tmp_path, "serve", "--listen", "127.0.0.1:0",
                      CUZK_ENGINE_KEYS_DIR=str(tmp_path / keys_dir))
        assert f"cannot write proving keys in {tmp_path / keys_dir}: {why}" in _said(
            serve, "serve")
        for args in (["prove", "winning-post"], ["keygen", "winning-post"]):
            proc = _cuzk(tmp_path, *args, "--keys-dir", keys_dir)
            assert f"cannot write proving keys in {keys_dir}: {why}" in _said(proc, args[0])
            assert proc.returncode == 2


def test_unreadable_inputs_of_keygen_and_verify_are_one_line_and_status_2(tmp_path: Path):
    """A directory given as a JSON file, a non-r1cs given to keygen: what the command says is
    all that is on stderr (no progress bar drawn first), with verify's documented status 2."""
    (tmp_path / "adir").mkdir()
    (tmp_path / "junk.r1cs").write_bytes(b"garbage\n")
    proc = _cuzk(tmp_path, "verify", "--vk", "adir", "p.json", "q.json")
    assert _said(proc, "verify") == "cuzk verify: adir: is a directory, not a file"
    assert proc.returncode == 2
    proc = _cuzk(tmp_path, "keygen", "--r1cs", "junk.r1cs", "--out", "k.zkey")
    assert proc.stderr == _said(proc, "keygen") + "\n"
    assert "junk.r1cs: truncated" in proc.stderr and proc.returncode == 2
    assert not (tmp_path / "k.zkey").exists()


def test_serve_with_backend_cuda_and_no_gpu_names_the_extra_and_the_setting(tmp_path: Path):
    from cuzk.prover.real_prover import cuda_device_count

    if cuda_device_count():
        pytest.skip("a CUDA device is usable here")
    proc = _cuzk(tmp_path, "serve", "--listen", "127.0.0.1:0", CUZK_ENGINE_BACKEND="cuda")
    line = _said(proc, "serve")
    assert "no usable CUDA device" in line and "gpu extra" in line, line
    assert 'backend = "auto" or "cpu"' in line and proc.returncode == 2


def _closed_pipe() -> int:
    """The write end of a pipe nobody reads any more: what ``| head -1`` leaves once head has
    its line (deterministic: the reader is gone before the command starts)."""
    read, write = os.pipe()
    os.close(read)
    return write


def test_a_reader_gone_ends_the_command_quietly(tmp_path: Path, server_url: str):
    for args in (["serve", "--print-config"], ["status", "--json", "--server", server_url],
                 ["workers", "resume", "--json", "--server", server_url]):
        write = _closed_pipe()
        try:
            proc = _cuzk(tmp_path, *args, stdout=write)
        finally:
            os.close(write)
        assert proc.stderr == "", (args, proc.stderr)
        assert proc.returncode == 141, (args, proc.returncode)  # 128 + SIGPIPE, as a shell says


def test_bench_prover_on_your_circuit_says_why_cuzk_prove_failed(tmp_path: Path):
    """The witness given is not one (a zkey): the `cuzk prove` it runs fails, and says so."""
    proc = _cuzk(tmp_path, "bench", "prover", "--r1cs", str(R1CS), "--zkey", str(ZKEY),
                 "--wtns", str(ZKEY), "--no-snarkjs", "--repeat", "1")
    line = _said(proc, "bench prover")
    assert "cuzk prove exited 2" in line and "expected a wtns file" in line, line
    assert proc.returncode == 1


def test_bench_prover_on_your_circuit_verifies_and_ends_with_the_summary(tmp_path: Path):
    proc = _cuzk(tmp_path, "bench", "prover", "--r1cs", str(R1CS), "--zkey", str(ZKEY),
                 "--wtns", str(R1CS.parent / "tiny.wtns"), "--no-snarkjs", "--repeat", "2")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    summary = proc.stdout[proc.stdout.index("whole processes"):]
    assert "tiny" in summary and "2/2" in summary, summary


def test_an_unexpected_error_is_one_line_asking_for_a_report(monkeypatch, capsys):
    """What no subcommand catches: one line, the bug named; -v adds the traceback."""
    import cuzk.cli.verify as verify

    def broken(args: argparse.Namespace) -> int:
        raise RuntimeError("something\nbroke")

    monkeypatch.setattr(verify, "run", broken)
    args = ["verify", "--vk", "vk.json", "proof.json", "public.json"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err == ("cuzk verify: unexpected error: RuntimeError: something broke (a bug in cuzk:"
                   " run again with -v for the traceback and report it)\n")
    assert main(["-v", *args]) == 1
    assert "Traceback" in capsys.readouterr().err


def _parsers(parser: argparse.ArgumentParser, path: str = "cuzk"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_command_has_a_description_and_every_option_a_help_line(tmp_path: Path):
    for path, parser in _parsers(build_parser()):
        assert parser.description, f"{path}: no description"
        assert "%%" not in parser.description, path
        for action in parser._actions:
            if action.option_strings:
                assert action.help, f"{path} {action.option_strings[0]}: no help"
    # As a user reads them:
    status = _cuzk(tmp_path, "status", "--help").stdout
    assert "busy %)" in status and "%%" not in status
    verify = _cuzk(tmp_path, "verify", "--help").stdout
    assert "Check a Groth16 proof" in verify
    engine = " ".join(_cuzk(tmp_path, "bench", "engine", "--help").stdout.split())
    assert "Run a backlog of mixed jobs" in engine
    for option, default in (("--jobs JOBS", "(default: 40)"), ("--seed SEED", "(default: 0)"),
                            ("--scale SCALE", "(default: 1.0)")):
        text = engine.split(option, 2)[2]  # the options list, after the usage line
        assert text.split(" --", 1)[0].endswith(default), (option, text[:200])
    submit = " ".join(_cuzk(tmp_path, "submit", "--help").stdout.split())
    assert "(default: the proof kind's configured priority, normal unless set)" in submit
