"""``cuzk circuit``: check that a circuit's files belong together, add it as a proof kind, or
write a synthetic one of any power-of-two size (``synth``, :mod:`cuzk.circuits.synthetic`).

``check`` loads the ``.r1cs``, the ``.wasm`` witness generator and the ``.zkey`` and applies the
same checks the server applies when it loads a key: curve, signal counts, domain, every point
on its curve, and the key's constraint coefficients equal to the r1cs's. ``add`` runs those
checks and appends a ``[proof_kinds.NAME]`` table to the config file, then loads the whole
config again so an entry the server would refuse is never left behind.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

from cuzk.circuits.registry import bundled_circuits
from cuzk.cli._local_results import CheckResult, add_json_argument, base, finish
from cuzk.cli._output import OutputError, check_output_file, write_text
from cuzk.errors import CuzkError, WitnessError
from cuzk.files import not_a_file
from cuzk.protocol import DEFAULT_PRIORITY, PRIORITIES

DEFAULT_CONFIG = Path("cuzk.toml")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "circuit",
        help="check a circuit's r1cs/wasm/zkey, or add it to the config as a proof kind",
    )
    sub = p.add_subparsers(dest="circuit_command", metavar="ACTION", required=True)

    check = sub.add_parser(
        "check",
        help="say whether an r1cs, a wasm witness generator and a zkey belong together",
        description="Load the three files and check them as the server does when it loads a"
        " key. Sizes alone cannot tell a wasm of another circuit of the same shape: --input"
        " computes a witness with the wasm and checks it satisfies every constraint of the"
        " r1cs. Exit status: 0 they belong together, 1 they do not (the reason names the file"
        " and, for the key, the section), 2 a file is missing or the input is refused.",
    )
    _files(check, zkey_required=True)
    check.add_argument(
        "--input", type=Path,
        help="a sample input JSON: its witness (from the wasm) must satisfy the r1cs",
    )
    add_json_argument(check)
    check.set_defaults(func=run_check)

    add = sub.add_parser(
        "add",
        help="add a circuit as a proof kind ([proof_kinds.NAME] in the config file)",
        description="Check the files (with --zkey: that they belong together; with"
        " --sample-input: that its witness satisfies the r1cs), then append a"
        " [proof_kinds.NAME] table to the config file and validate the result. Without --zkey"
        " the server proves with a development key made on first use (not for production).",
    )
    add.add_argument("name", metavar="NAME", help="proof kind name (lower-case, digits, . _ -)")
    _files(add, zkey_required=False)
    add.add_argument("--partitions", type=int, default=1, help="partitions per job (default 1)")
    add.add_argument(
        "--priority", choices=PRIORITIES, default=DEFAULT_PRIORITY, help="default priority"
    )
    add.add_argument(
        "--sample-input", type=Path, help="input JSON `cuzk submit NAME` sends without --input"
    )
    add.add_argument(
        "--config",
        type=Path,
        default=None,
        help=f"config file to write (default: $CUZK_CONFIG, else ./{DEFAULT_CONFIG})",
    )
    add.add_argument(
        "--replace",
        action="store_true",
        help="replace the config's [proof_kinds.NAME] table (after a recompile, a new key);"
        " for a bundled NAME, replace its circuit for every job of that kind",
    )
    add.set_defaults(func=run_add)

    synth = sub.add_parser(
        "synth",
        help="write a synthetic circuit of 2^K constraints: r1cs, witness and development key",
        description="Generate a circom-like circuit whose Groth16 domain is 2^K (2^K - 3"
        " constraints: booleans, bit packing, IsZero, multiplications, muxes, linear sums),"
        " without circom or node: DIR/circuit.r1cs, DIR/witness.wtns (satisfies it),"
        " DIR/circuit.zkey and DIR/circuit.vk.json (a development key, as `cuzk keygen --r1cs`"
        " makes; not for production). Prove it with `cuzk prove --r1cs DIR/circuit.r1cs"
        " --zkey DIR/circuit.zkey --wtns DIR/witness.wtns`.",
    )
    synth.add_argument(
        "--constraints-log2", type=int, required=True, metavar="K",
        help="domain 2^K, K from 5 to 28 (2^20: about 1M constraints)",
    )
    synth.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory")
    synth.add_argument(
        "--seed", type=int, default=0, help="the same seed makes the same files (default 0)"
    )
    synth.add_argument(
        "--no-key", action="store_true", help="write the r1cs and the witness only"
    )
    synth.set_defaults(func=run_synth)


def _files(p: argparse.ArgumentParser, zkey_required: bool) -> None:
    p.add_argument("--r1cs", type=Path, required=True, help="circuit .r1cs")
    p.add_argument("--wasm", type=Path, required=True, help="witness generator .wasm")
    p.add_argument("--zkey", type=Path, required=zkey_required, help="proving key .zkey")


def _read_input(path: Path, flag: str) -> dict:
    """A sample input: one JSON object of signal names to values, or a one-line _Usage."""
    problem = not_a_file(path)
    if problem:
        raise _Usage(f"{flag} {path}: {problem}")
    try:
        inputs = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise _Usage(f"{flag} {path}: {getattr(e, 'strerror', None) or e}") from None
    except json.JSONDecodeError as e:
        raise _Usage(f"{flag} {path}: not JSON: {e.msg} at line {e.lineno}") from None
    if not isinstance(inputs, dict):
        raise _Usage(f"{flag} {path}: expected one JSON object of signal names to values")
    return inputs


def check_result(r1cs: Path, wasm: Path, zkey: Path | None, sample: Path | None) -> CheckResult:
    return {**base("circuit check"), "belong": None, "r1cs": str(r1cs), "wasm": str(wasm),
            "zkey": None if zkey is None else str(zkey),
            "input": None if sample is None else str(sample), "constraints": None,
            "signals": None, "public_signals": None, "domain_log2": None,
            "input_satisfied": None, "phase2_contributions": None, "circuit_hash": None}


def check_files(
    r1cs: Path, wasm: Path, zkey: Path | None, name: str | None = None,
    sample: Path | None = None, sample_flag: str = "--input",
    result: CheckResult | None = None,
) -> str:
    """Load the files and check they belong together; a one-line summary, or CuzkError.

    ``sample``: an input whose witness (computed by the wasm) must satisfy every constraint of
    the r1cs, the one check that tells a wasm of another circuit of the same shape.
    ``result``: filled with what was learnt on the way (``--json``), even when a check fails."""
    from cuzk.prover.circuit import Circuit
    from cuzk.prover.keys import ProvingKey

    result = result if result is not None else check_result(r1cs, wasm, zkey, sample)
    for flag, path in (("--r1cs", r1cs), ("--wasm", wasm), ("--zkey", zkey)):
        problem = None if path is None else not_a_file(path)
        if problem:
            raise _Usage(f"{flag} {path}: {problem}")
    inputs = None if sample is None else _read_input(sample, sample_flag)
    circuit = Circuit.load(r1cs, wasm, name)
    r = circuit.r1cs
    result["constraints"], result["signals"] = r.n_constraints, r.n_wires
    result["public_signals"] = r.n_public
    result["domain_log2"] = r.domain_size.bit_length() - 1
    summary = (
        f"{r.n_constraints} constraints, {r.n_wires} signals, {r.n_public} public,"
        f" domain 2^{r.domain_size.bit_length() - 1}"
    )
    if inputs is not None:
        try:
            witness = circuit.calculate_witness(inputs)
        except WitnessError as e:
            raise _Usage(f"{sample_flag} {sample}: the wasm refuses it: {e}") from None
        result["input_satisfied"] = False
        circuit.check_satisfies(witness)  # WitnessError: they do not belong together
        result["input_satisfied"] = True
        summary += f"; the witness of {sample} satisfies every constraint"
    if zkey is None:
        return f"{r1cs} and {wasm} belong together ({summary})"
    key = ProvingKey.load(zkey)
    circuit.check_key(key)
    return f"{r1cs}, {wasm} and {zkey} belong together ({summary}; {_ceremony(key, result)})"


def _ceremony(key, result: CheckResult) -> str:
    """The key's phase-2 record (section 10): contributions and the circuit hash snarkjs prints
    as "Circuit Hash", to compare with the ceremony's transcript (``snarkjs zkey verify``
    checks it against the r1cs and the powers of tau, which cuzk never sees)."""
    mpc = key.zkey.mpc_params
    if mpc is None:
        return "no contributions section"
    count = int.from_bytes(mpc[64:68], "little")
    result["phase2_contributions"], result["circuit_hash"] = count, mpc[:64].hex()
    return f"{count} phase-2 contribution{'s' if count != 1 else ''}, circuit hash {mpc[:64].hex()}"


class _Usage(CuzkError):
    pass


def run_check(args: argparse.Namespace) -> int:
    result = check_result(args.r1cs, args.wasm, args.zkey, args.input)
    try:
        summary = check_files(args.r1cs, args.wasm, args.zkey, sample=args.input, result=result)
    except _Usage as e:
        return finish(args, result, 2, str(e))
    except CuzkError as e:
        result["belong"] = False
        return finish(args, result, 1, f"they do not belong together: {e}")
    result["belong"] = True
    if not args.json:
        print("OK: " + summary)
    return finish(args, result, 0)


def _toml_path(path: Path, config_dir: Path) -> str:
    """Relative to the config file's directory when inside it (what the config resolves
    against), else absolute."""
    absolute = path.resolve()
    try:
        return str(absolute.relative_to(config_dir))
    except ValueError:
        return str(absolute)


def _toml_key(key: str) -> str:
    """A TOML basic-string key: a bare key cannot hold '.', which TOML reads as nesting."""
    return json.dumps(key, ensure_ascii=False)


def _has_kind(text: str, name: str) -> bool:
    """Whether the config text already declares ``[proof_kinds.NAME]`` (in any TOML spelling)."""
    try:
        kinds = tomllib.loads(text).get("proof_kinds", {})
    except tomllib.TOMLDecodeError:
        return False  # the load after writing names the problem
    return isinstance(kinds, dict) and name in kinds


_HEADER = re.compile(r"^\s*\[[^\[\]]+\]\s*(#.*)?$")
_SKIPPED = re.compile(r"^\s*(#.*)?$")


def _without_kind(text: str, name: str) -> tuple[str, int] | None:
    """``text`` with its ``[proof_kinds.NAME]`` table cut out, and the line it began at; None
    when NAME is not declared by such a table (inline, or under ``[proof_kinds]``: those are
    left for the user to edit). The table runs to the next table header; blank and comment
    lines just before that header stay (they belong to what follows)."""
    lines = text.splitlines(keepends=True)
    for start, line in enumerate(lines):
        if not _HEADER.match(line):
            continue
        try:
            parsed = tomllib.loads(line.strip())
        except tomllib.TOMLDecodeError:
            continue
        if parsed != {"proof_kinds": {name: {}}}:
            continue
        end = next((i for i in range(start + 1, len(lines)) if _HEADER.match(lines[i])),
                   len(lines))
        while end > start + 1 and _SKIPPED.match(lines[end - 1]):
            end -= 1
        rest = "".join(lines[:start] + lines[end:])
        return (None if _has_kind(rest, name) else (rest, start))
    return None


def _table(args: argparse.Namespace, config_dir: Path) -> str:
    lines = [f"[proof_kinds.{_toml_key(args.name)}]"]
    for key, path in (
        ("r1cs", args.r1cs),
        ("wasm", args.wasm),
        ("zkey", args.zkey),
        ("sample_input", args.sample_input),
    ):
        if path is not None:
            lines.append(f"{key} = {json.dumps(_toml_path(path, config_dir))}")
    lines.append(f"partitions = {args.partitions}")
    lines.append(f'priority = "{args.priority}"')
    return "\n".join(lines) + "\n"


def run_add(args: argparse.Namespace) -> int:
    from cuzk.config import ConfigError, _proof_kind_name, load_config

    config = args.config or Path(os.environ.get("CUZK_CONFIG") or DEFAULT_CONFIG)
    try:
        problem = _proof_kind_name(args.name)
        if problem:
            raise _Usage(problem)
        if args.partitions < 1:
            raise _Usage(f"--partitions must be at least 1, got {args.partitions}")
        sample_problem = None if args.sample_input is None else not_a_file(args.sample_input)
        if sample_problem:
            raise _Usage(f"--sample-input {args.sample_input}: {sample_problem}")
        if args.name in bundled_circuits() and not getattr(args, "replace", False):
            raise _Usage(
                f"{args.name} is a bundled proof kind: adding it replaces the bundled circuit"
                " for every job of that kind; pass --replace to do that, or choose another NAME"
            )
        check_output_file(config, "--config")  # before the files are loaded and checked
        summary = check_files(args.r1cs, args.wasm, args.zkey, args.name,
                              sample=args.sample_input, sample_flag="--sample-input")
        before = config.read_text() if config.exists() else None
        config_dir = config.resolve().parent
        replaced = before is not None and _has_kind(before, args.name)
        if replaced and not args.replace:
            raise _Usage(
                f"{config} already has [proof_kinds.{args.name}]: pass --replace to replace"
                " that table (after a recompile or with a new key), or edit it"
            )
        if replaced:
            assert before is not None
            cut = _without_kind(before, args.name)
            if cut is None:
                raise _Usage(
                    f"{config} declares proof kind {args.name} other than as a"
                    f" [proof_kinds.{args.name}] table: edit it there"
                )
            rest, at = cut
            lines = rest.splitlines(keepends=True)
            if at and not lines[at - 1].endswith("\n"):
                lines[at - 1] += "\n"
            text = "".join([*lines[:at], _table(args, config_dir), *lines[at:]])
        else:
            text = before or ""
            if text and not text.endswith("\n"):
                text += "\n"
            text += ("\n" if text else "") + _table(args, config_dir)
        write_text(config, text, "--config")
        try:
            load_config(config)
        except ConfigError as e:
            if before is None:
                config.unlink()
            else:
                config.write_text(before)
            raise _Usage(f"{config} would be invalid, left unchanged: {e}") from None
    except (_Usage, OutputError) as e:
        print(f"cuzk circuit add: {e}", file=sys.stderr)
        return 2
    except CuzkError as e:
        print(f"cuzk circuit add: {e}", file=sys.stderr)
        return 1
    key_note = (
        f"key {args.zkey}"
        if args.zkey
        else "no --zkey: the server proves with a development key made on first use"
        " (not for production)"
    )
    done = "replaced proof kind" if replaced else "added proof kind"
    print(f"{done} {args.name} {'in' if replaced else 'to'} {config}: {summary}; {key_note}")
    return 0


def run_synth(args: argparse.Namespace) -> int:
    from cuzk.circuits.synthetic import MAX_LOG2, MIN_LOG2, density, synthesize_files
    from cuzk.cli._output import check_output_dir
    from cuzk.cli._progress import stage_progress

    try:
        if not MIN_LOG2 <= args.constraints_log2 <= MAX_LOG2:
            raise _Usage(
                f"--constraints-log2 must be {MIN_LOG2}..{MAX_LOG2}, got {args.constraints_log2}"
            )
        if args.seed < 0:
            raise _Usage(f"--seed must be 0 or more, got {args.seed}")
        check_output_dir(args.out, "--out")
    except (_Usage, OutputError) as e:
        print(f"cuzk circuit synth: {e}", file=sys.stderr)
        return 2

    def step(name: str, seconds: float) -> None:
        print(f"{name}: {seconds:.2f}s", flush=True)

    try:
        with stage_progress(f"synth 2^{args.constraints_log2}") as tick:
            result = synthesize_files(
                args.out, args.constraints_log2, args.seed, tick, key=not args.no_key,
                on_step=step,
            )
    except (CuzkError, OSError) as e:
        print(f"cuzk circuit synth: {e}", file=sys.stderr)
        return 1
    from cuzk.formats.r1cs import read_r1cs

    c = result.circuit
    assert c.witness is not None
    print(
        f"{c.n_constraints} constraints, {c.n_wires} signals, {c.n_public} public,"
        f" domain 2^{c.domain_size.bit_length() - 1};"
        f" {density(read_r1cs(result.r1cs), c.witness).summary()}"
    )
    files = [result.r1cs, result.wtns, *(p for p in (result.zkey, result.vk) if p)]
    print("\t".join(str(p) for p in files))
    if result.zkey is not None:
        print(
            "development key: single-party setup, not for production",
            file=sys.stderr,
        )
    return 0
