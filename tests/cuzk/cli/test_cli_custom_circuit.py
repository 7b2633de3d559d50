"""``cuzk prove`` / ``keygen`` / ``circuit`` on a circuit outside the bundle (the snarkjs-made tiny
circuit): arguments checked before any long work, ``--wtns``, keys checked with one-line errors
naming the file and section, verification keys written beside development keys."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from cuzk.cli.main import main
from cuzk.config import load_config
from tests.cuzk.cli._cli import cuzk, said
from tests.cuzk.cli._ran import ok
from tests.cuzk.prover.test_prover_keycheck import R1CS, SECTION_NAMES, WASM, ZKEY, corrupt

DATA = R1CS.parent
INPUT = DATA / "tiny.input.json"
WTNS = DATA / "tiny.wtns"
DOCS_CUSTOM = Path(__file__).parents[3] / "docs" / "custom-circuits.md"


def _err_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    return err


def test_r1cs_without_wasm_is_refused_before_any_key_is_made(tmp_path: Path, capsys):
    keys = tmp_path / "keys"
    args = ["prove", "--r1cs", str(R1CS), "--keys-dir", str(keys), "--input", str(INPUT)]
    assert main([*args, "--out", str(tmp_path)]) == 2
    assert "--r1cs needs --wasm" in _err_line(capsys)
    assert not keys.exists() or not any(keys.iterdir()), "a key was generated before refusing"


def test_wasm_and_zkey_without_r1cs_say_what_is_missing(tmp_path: Path, capsys):
    args = ["prove", "--wasm", str(WASM), "--zkey", str(ZKEY), "--input", str(INPUT)]
    assert main([*args, "--out", str(tmp_path)]) == 2
    err = _err_line(capsys)
    assert "--wasm needs --r1cs" in err and "None" not in err


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--wasm", "missing.wasm"], "--wasm missing.wasm: no such file"),
        (["--zkey", "missing.zkey"], "--zkey missing.zkey: no such file"),
        (["--input", "missing.json"], "missing.json: No such file"),
        ([], "--input FILE (or --wtns FILE) is required"),
    ],
    ids=["wasm", "zkey", "input", "no-input"],
)
def test_missing_files_are_named_before_any_work(tmp_path, capsys, extra, expected):
    keys = tmp_path / "keys"
    base = {"--wasm": str(WASM), "--zkey": str(ZKEY)}
    for flag, value in zip(extra[::2], extra[1::2], strict=True):
        base[flag] = value
    args = ["prove", "--r1cs", str(R1CS), "--keys-dir", str(keys), "--out", str(tmp_path)]
    for flag, value in base.items():
        args += [flag, value]
    assert main(args) == 2
    assert expected in _err_line(capsys)
    assert not keys.exists()


def test_prove_from_a_snarkjs_witness_verifies(tmp_path: Path, capsys):
    out = tmp_path / "out"
    args = ["prove", "--r1cs", str(R1CS), "--zkey", str(ZKEY), "--wtns", str(WTNS)]
    assert main([*args, "--backend", "cpu", "--out", str(out)]) == 0
    assert "backend=cpu" in capsys.readouterr().out
    public = json.loads((out / "public.json").read_text())
    inputs = json.loads(INPUT.read_text())
    # tiny: out = a*b*c + a is the output, a the public input
    a, b, c = inputs["a"], inputs["b"], inputs["c"]
    assert public == [str(a * b * c + a), str(a)]
    verify = ["verify", "--zkey", str(ZKEY), str(out / "proof.json"), str(out / "public.json")]
    assert main(verify) == 0


def test_wtns_and_input_are_exclusive(tmp_path: Path):
    with pytest.raises(SystemExit) as info:
        main(["prove", "--r1cs", str(R1CS), "--wtns", str(WTNS), "--input", str(INPUT)])
    assert info.value.code == 2


def test_backend_cuda_without_a_device_is_refused_at_once(tmp_path: Path, capsys):
    from cuzk.prover.cuda_backend import cuda_device_count

    if cuda_device_count():
        pytest.skip("a CUDA device is present")
    args = ["prove", "--r1cs", str(R1CS), "--wasm", str(WASM), "--zkey", str(ZKEY)]
    assert main([*args, "--input", str(INPUT), "--backend", "cuda", "--out", str(tmp_path)]) == 2
    assert "no usable CUDA device" in _err_line(capsys)


def _corrupt_coefficient(dst: Path) -> Path:
    """The key with one coefficient value's low limbs flipped: it passes the zkey reader and
    fails only the comparison with the r1cs."""
    from tests.cuzk.prover.test_prover_keycheck import read_binfile

    (sec,) = read_binfile(ZKEY, "zkey", 2).sections[4]
    data = bytearray(ZKEY.read_bytes())
    entry = sec.offset + 4 + 44 * 2 + 12
    data[entry : entry + 16] = bytes(b ^ 0xFF for b in data[entry : entry + 16])
    dst.write_bytes(bytes(data))
    return dst


@pytest.mark.parametrize("section", [*sorted(SECTION_NAMES), 4])
def test_corrupt_key_is_one_line_naming_file_and_section(tmp_path: Path, capsys, section: int):
    if section == 4:
        bad = _corrupt_coefficient(tmp_path / "bad.zkey")
    else:
        bad = corrupt(ZKEY, tmp_path / "bad.zkey", section)
    args = ["prove", "--r1cs", str(R1CS), "--wasm", str(WASM), "--zkey", str(bad)]
    assert main([*args, "--input", str(INPUT), "--out", str(tmp_path)]) == 2
    err = _err_line(capsys)
    assert err.startswith(f"cuzk prove: {bad}: section {section} (")
    assert "witness" not in err
    assert not (tmp_path / "proof.json").exists()


def test_with_a_ready_witness_a_corrupt_coefficient_is_still_blamed_on_the_key(
    tmp_path: Path, capsys
):
    """--wtns reads the r1cs's terms only when the proof fails its self-check; the error must
    be the same one line, naming the key's section 4, and no proof may be written."""
    bad = _corrupt_coefficient(tmp_path / "bad.zkey")
    args = ["prove", "--r1cs", str(R1CS), "--zkey", str(bad), "--wtns", str(WTNS)]
    assert main([*args, "--backend", "cpu", "--out", str(tmp_path)]) == 2
    err = _err_line(capsys)
    assert err.startswith(f"cuzk prove: {bad}: section 4 (coefficients): "), err
    assert not (tmp_path / "proof.json").exists()


def test_with_a_ready_witness_a_broken_constraint_is_named(tmp_path: Path, capsys):
    from cuzk.formats.wtns import read_wtns, write_wtns

    witness = read_wtns(WTNS)
    values = witness.values.copy()
    values[-1, 0] ^= 1  # the last signal, off by one bit: a constraint no longer holds
    bad = tmp_path / "bad.wtns"
    write_wtns(bad, values, witness.curve)
    args = ["prove", "--r1cs", str(R1CS), "--zkey", str(ZKEY), "--wtns", str(bad)]
    assert main([*args, "--backend", "cpu", "--out", str(tmp_path)]) == 2
    err = _err_line(capsys)
    assert "does not satisfy constraint" in err, err
    assert not (tmp_path / "proof.json").exists()


def test_corrupt_key_exit_status_from_the_real_command(tmp_path: Path):
    bad = corrupt(ZKEY, tmp_path / "bad.zkey", 7)
    proc = subprocess.run(
        [sys.executable, "-m", "cuzk.cli.main", "prove", "--r1cs", str(R1CS), "--wasm",
         str(WASM), "--zkey", str(bad), "--input", str(INPUT), "--backend", "cpu",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"cuzk prove: {bad}: section 7 (B2): point "
        + proc.stderr.split("point ")[1].split(" ")[0]
        + " is not on the G2 curve: the key is corrupt"
    )


def test_keygen_writes_the_verification_key_beside_the_zkey(tmp_path: Path, capsys):
    zkey = tmp_path / "dev.zkey"
    assert main(["keygen", "--r1cs", str(R1CS), "--out", str(zkey)]) == 0
    vk = json.loads((tmp_path / "dev.vk.json").read_text())
    assert vk["nPublic"] == 2 and len(vk["vk_alphabeta_12"]) == 2
    out = tmp_path / "out"
    args = ["prove", "--r1cs", str(R1CS), "--wasm", str(WASM), "--zkey", str(zkey)]
    assert main([*args, "--input", str(INPUT), "--out", str(out)]) == 0
    check = ["verify", "--vk", str(tmp_path / "dev.vk.json")]
    assert main([*check, str(out / "proof.json"), str(out / "public.json")]) == 0


def test_prove_without_zkey_uses_a_development_key_and_says_so(tmp_path: Path, capsys):
    keys = tmp_path / "keys"
    args = ["prove", "--r1cs", str(R1CS), "--wasm", str(WASM), "--keys-dir", str(keys)]
    assert main([*args, "--input", str(INPUT), "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "using development key" in err and "not for production" in err
    (zkey,) = keys.glob("*.zkey")
    assert zkey.with_suffix(".vk.json").is_file()


# ---------------------------------------------------------------------------- cuzk circuit


def test_circuit_check_says_the_files_belong_together(capsys):
    assert main(["circuit", "check", "--r1cs", str(R1CS), "--wasm", str(WASM), "--zkey",
                 str(ZKEY)]) == 0  # fmt: skip
    assert capsys.readouterr().out.startswith("OK: ")


def test_circuit_check_names_the_mismatch(bundled, capsys):
    other = bundled("winning-post").zkey_path
    assert main(["circuit", "check", "--r1cs", str(R1CS), "--wasm", str(WASM), "--zkey",
                 str(other)]) == 1  # fmt: skip
    err = _err_line(capsys)
    assert "do not belong together" in err and "is not a key for circuit" in err


def test_circuit_check_names_a_wasm_of_another_circuit(capsys):
    from cuzk.circuits.registry import bundled_circuits

    other = bundled_circuits()["winning-post"].wasm_path
    assert main(["circuit", "check", "--r1cs", str(R1CS), "--wasm", str(other), "--zkey",
                 str(ZKEY)]) == 1  # fmt: skip
    err = _err_line(capsys)
    assert f"{other}: computes" in err and f"but {R1CS} has 6" in err


def test_circuit_check_missing_file_is_usage(capsys, tmp_path: Path):
    assert main(["circuit", "check", "--r1cs", str(R1CS), "--wasm", str(WASM), "--zkey",
                 str(tmp_path / "nope.zkey")]) == 2  # fmt: skip
    assert "no such file" in _err_line(capsys)


def test_circuit_add_writes_a_config_the_server_loads(tmp_path: Path, capsys):
    config = tmp_path / "cuzk.toml"
    config.write_text('[server]\nlisten = "127.0.0.1:0"\n')
    args = ["circuit", "add", "tiny", "--r1cs", str(R1CS), "--wasm", str(WASM), "--zkey",
            str(ZKEY), "--partitions", "2", "--priority", "high", "--sample-input", str(INPUT),
            "--config", str(config)]  # fmt: skip
    assert main(args) == 0
    assert "added proof kind tiny" in capsys.readouterr().out
    kind = load_config(config).proof_kinds["tiny"]
    assert (kind.r1cs, kind.wasm, kind.zkey, kind.sample_input) == (R1CS, WASM, ZKEY, INPUT)
    assert (kind.partitions, kind.priority) == (2, "high")
    # Twice is refused, and the file is unchanged.
    before = config.read_text()
    assert main(args) == 2
    assert "already has [proof_kinds.tiny]" in _err_line(capsys)
    assert config.read_text() == before


def test_circuit_add_refuses_a_key_of_another_circuit(bundled, tmp_path: Path, capsys):
    config = tmp_path / "cuzk.toml"
    args = ["circuit", "add", "tiny", "--r1cs", str(R1CS), "--wasm", str(WASM), "--zkey",
            str(bundled("winning-post").zkey_path), "--config", str(config)]  # fmt: skip
    assert main(args) == 1
    assert "is not a key for circuit tiny" in _err_line(capsys)
    assert not config.exists()


def test_circuit_add_refuses_a_bad_name(tmp_path: Path, capsys):
    config = tmp_path / "cuzk.toml"
    args = ["circuit", "add", "Tiny Circuit", "--r1cs", str(R1CS), "--wasm", str(WASM),
            "--config", str(config)]  # fmt: skip
    assert main(args) == 2
    assert "proof kind names must be" in _err_line(capsys)
    assert not config.exists()


def test_prove_a_configured_kind(tmp_path: Path, capsys):
    config = tmp_path / "cuzk.toml"
    add = ["circuit", "add", "tiny", "--r1cs", str(R1CS), "--wasm", str(WASM), "--zkey",
           str(ZKEY), "--sample-input", str(INPUT), "--config", str(config)]  # fmt: skip
    assert main(add) == 0
    out = tmp_path / "out"
    assert main(["prove", "tiny", "--config", str(config), "--out", str(out)]) == 0
    check = ["verify", "--zkey", str(ZKEY), str(out / "proof.json"), str(out / "public.json")]
    assert main(check) == 0
    capsys.readouterr()
    assert main(["prove", "nope", "--config", str(config), "--out", str(out)]) == 2
    assert "configured kinds:" in _err_line(capsys)


def test_a_bn128_circuit_is_refused_saying_how_to_compile(tmp_path: Path, capsys):
    """circom's default prime: the r1cs header's prime patched to bn128's."""
    from cuzk.curves import BN128_SCALAR_PRIME

    data = bytearray(R1CS.read_bytes())
    r = (0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001).to_bytes(32, "little")
    at = bytes(data).index(r)
    data[at : at + 32] = BN128_SCALAR_PRIME.to_bytes(32, "little")
    bn = tmp_path / "bn.r1cs"
    bn.write_bytes(bytes(data))
    keys = tmp_path / "keys"
    args = ["prove", "--r1cs", str(bn), "--wasm", str(WASM), "--keys-dir", str(keys)]
    assert main([*args, "--input", str(INPUT), "--out", str(tmp_path)]) == 2
    err = _err_line(capsys)
    assert "compiled for bn128" in err and "--prime bls12381" in err
    assert not keys.exists()


def test_circuit_add_a_dotted_name_round_trips(tmp_path: Path, capsys):
    """The name rule allows '.', so the table header must quote the key (a bare dotted key is
    a nested table in TOML and the config load refused it)."""
    config = tmp_path / "cuzk.toml"
    args = ["circuit", "add", "short.dotted", "--r1cs", str(R1CS), "--wasm", str(WASM),
            "--zkey", str(ZKEY), "--config", str(config)]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err
    assert '[proof_kinds."short.dotted"]' in config.read_text()
    kind = load_config(config).proof_kinds["short.dotted"]
    assert (kind.r1cs, kind.wasm, kind.zkey) == (R1CS, WASM, ZKEY)
    before = config.read_text()
    assert main(args) == 2
    assert "already has [proof_kinds.short.dotted]" in _err_line(capsys)
    assert config.read_text() == before


def test_bench_prover_a_configured_kind(tmp_path: Path, capsys):
    """The user's own kind, as whole `cuzk prove KIND --config` processes; the JSON says on
    what cores and multiply path the figures were taken."""
    config = tmp_path / "cuzk.toml"
    add = ["circuit", "add", "tiny", "--r1cs", str(R1CS), "--wasm", str(WASM), "--zkey",
           str(ZKEY), "--sample-input", str(INPUT), "--config", str(config)]  # fmt: skip
    assert main(add) == 0
    figures = tmp_path / "bench.json"
    bench = ["bench", "prover", "tiny", "--config", str(config), "--repeat", "1", "--no-snarkjs",
             "--json", str(figures)]  # fmt: skip
    assert main(bench) == 0
    out = capsys.readouterr().out
    assert "tiny run 1: cuzk " in out and "tiny: proof verified=True" in out
    assert "whole processes" in out and "1/1" in out  # the summary, the proof verified outside
    result = json.loads(figures.read_text())
    assert result["machine"]["cores"] >= 1 and result["machine"]["field_arith"]
    (row,) = result["results"]
    assert row["proof_kind"] == "tiny" and row["configured"] and len(row["runs"]) == 1
    assert row["cuzk_proofs_verified"] == 1
    assert " read=" in row["runs"][0]["cuzk_steps"] and "key_load=" in row["runs"][0]["cuzk_steps"]
    assert main(["bench", "prover", "nope", "--config", str(config), "--no-snarkjs"]) == 2
    assert "unknown proof kind 'nope'; known: " in capsys.readouterr().err


def test_a_bn128_key_is_refused_naming_bn128_and_the_curve_cuzk_proves_on(tmp_path: Path):
    """A zkey whose Groth16 header's base-field prime is bn128's (crafted from tiny.zkey)."""
    from cuzk.curves import BLS12_381, BN128_BASE_PRIME

    data = bytearray(ZKEY.read_bytes())
    q = BLS12_381.q.to_bytes(48, "little")
    at = bytes(data).index(q)
    data[at : at + 48] = BN128_BASE_PRIME.to_bytes(48, "little")
    bn = tmp_path / "bn.zkey"
    bn.write_bytes(bytes(data))
    for args in (["prove", bn, WTNS, "proof.json", "public.json"],
                 ["circuit", "check", "--r1cs", R1CS, "--wasm", WASM, "--zkey", bn]):
        proc = cuzk(tmp_path, *args)
        line = said(proc, " ".join(map(str, args[:2])) if args[0] == "circuit" else "prove")
        assert f"{bn}: section 2 (Groth16 header): a key for bn128" in line, line
        assert "cuzk proves on bls12381 only" in line and "--prime bls12381" in line, line
        assert "0x3064" not in line
    assert not (tmp_path / "proof.json").exists()


# A wasm of another circuit of tiny's shape: only a witness tells it from tiny's own.
SWAPPED = WASM.parents[1] / "tiny_swapped_js" / "tiny_swapped.wasm"


def test_circuit_check_input_tells_a_wasm_of_another_circuit_of_the_same_shape(tmp_path: Path):

    files = ["--r1cs", R1CS, "--zkey", ZKEY]
    assert ok(cuzk(tmp_path, "circuit", "check", *files, "--wasm", SWAPPED)).startswith("OK: ")
    proc = cuzk(tmp_path, "circuit", "check", *files, "--wasm", SWAPPED, "--input", INPUT)
    line = said(proc, "circuit check")
    assert proc.returncode == 1, line
    assert "they do not belong together: witness of tiny does not satisfy constraint 0" in line
    assert f"the wasm {SWAPPED} and the r1cs {R1CS} may not be of the same circuit" in line
    assert "circuit check --input" not in line  # no advice to run what is running
    good = ok(cuzk(tmp_path, "circuit", "check", *files, "--wasm", WASM, "--input", INPUT))
    assert f"the witness of {INPUT} satisfies every constraint" in good
    (tmp_path / "short.json").write_text(json.dumps({"a": 1}))
    proc = cuzk(tmp_path, "circuit", "check", *files, "--wasm", WASM, "--input", "short.json")
    line = said(proc, "circuit check")
    assert "--input short.json: the wasm refuses it: missing input signals" in line, line
    assert proc.returncode == 2


def test_prove_with_a_wasm_of_another_circuit_says_they_may_not_match(tmp_path: Path):

    proc = cuzk(tmp_path, "prove", "--r1cs", R1CS, "--wasm", SWAPPED, "--zkey", ZKEY,
                "--input", INPUT, "--out", "out")
    line = said(proc, "prove")
    assert "does not satisfy constraint 0" in line, line
    assert f"the wasm {SWAPPED} and the r1cs {R1CS} may not be of the same circuit" in line
    assert "cuzk circuit check --input" in line
    assert not (tmp_path / "out" / "proof.json").exists()


def test_circuit_add_checks_the_sample_input_against_the_r1cs(tmp_path: Path, capsys):
    config = tmp_path / "cuzk.toml"
    config.write_text('[server]\nlisten = "127.0.0.1:0"\n')
    before = config.read_text()
    args = ["circuit", "add", "tiny", "--r1cs", str(R1CS), "--wasm", str(SWAPPED),
            "--sample-input", str(INPUT), "--config", str(config)]  # fmt: skip
    assert main(args) == 1
    assert "may not be of the same circuit" in _err_line(capsys)
    assert config.read_text() == before


def test_circuit_add_replace_swaps_your_own_kinds_table_after_a_recompile(tmp_path: Path):
    """The kind's table is replaced where it stands; the rest of the file is kept as written,
    and a replacement the checks refuse leaves the file unchanged."""
    import shutil


    config = tmp_path / "cuzk.toml"
    ok(cuzk(tmp_path, "circuit", "add", "tiny", "--r1cs", R1CS, "--wasm", WASM, "--zkey", ZKEY,
            "--config", config))
    tail = '\n# the next kind\n[proof_kinds.other]\nr1cs = "x.r1cs"\nwasm = "x.wasm"\n'
    head = config.read_text()
    config.write_text('# mine\n[server]\nlisten = "127.0.0.1:0"\n\n' + head + tail)
    (tmp_path / "x.r1cs").write_bytes(R1CS.read_bytes())
    (tmp_path / "x.wasm").write_bytes(WASM.read_bytes())
    before = config.read_text()
    # "A recompile": the same circuit's files in a new place.
    new = tmp_path / "build"
    new.mkdir()
    for f in (R1CS, WASM, ZKEY):
        shutil.copy(f, new / f.name)
    add = ["circuit", "add", "tiny", "--r1cs", new / R1CS.name, "--wasm", new / WASM.name,
           "--zkey", new / ZKEY.name, "--partitions", "3", "--config", config]
    line = said(cuzk(tmp_path, *add), "circuit add")
    assert "already has [proof_kinds.tiny]: pass --replace" in line, line
    assert config.read_text() == before
    # A replacement that fails its checks changes nothing either.
    bad = [*add[:-4], "--wasm", SWAPPED, "--sample-input", INPUT, "--config", config]
    said(cuzk(tmp_path, *bad, "--replace"), "circuit add")
    assert config.read_text() == before
    out = ok(cuzk(tmp_path, *add, "--replace"))
    assert out.startswith(f"replaced proof kind tiny in {config}: "), out
    text = config.read_text()
    assert text.startswith('# mine\n[server]\nlisten = "127.0.0.1:0"\n\n[proof_kinds."tiny"]\n')
    assert text.endswith(tail) and text.count("tiny") == 4, text  # header, r1cs, wasm, zkey
    kinds = load_config(config, check_files=False).proof_kinds
    assert (kinds["tiny"].r1cs, kinds["tiny"].partitions) == (new / R1CS.name, 3)
    assert set(kinds) >= {"tiny", "other"}


def test_a_server_of_your_kind_alone_makes_no_bundled_key_resident(tmp_path: Path):
    """docs/custom-circuits.md: with the bundled kinds turned off (the doc's own table), `cuzk
    serve` starts with your kind's key only (no winning-post key resident before it listens)."""
    from cuzk.circuits.registry import bundled_circuits
    from cuzk.serve_process import ServeProcess, serve_env

    config = tmp_path / "cuzk.toml"
    (alone,) = re.findall(r"^```toml alone\n(.*?)^```", DOCS_CUSTOM.read_text(), re.S | re.M)
    assert set(tomllib.loads(alone)["proof_kinds"]) == set(bundled_circuits())
    config.write_text(alone)
    args = ["circuit", "add", "tiny", "--r1cs", str(R1CS), "--wasm", str(WASM), "--zkey",
            str(ZKEY), "--sample-input", str(INPUT), "--config", str(config)]  # fmt: skip
    assert main(args) == 0
    env = serve_env(None, keys_dir=tmp_path / "keys", CUZK_CONFIG=str(config))
    with ServeProcess(env) as server:
        server.start()
        log = server.output
    assert "checking the proving key of tiny" in log, log
    assert "winning-post" not in log, log
    made = [p.name for p in (tmp_path / "keys").iterdir()] if (tmp_path / "keys").exists() else []
    assert made in ([], ["witness"]), made  # no key; tiny's compiled witness generator at most
