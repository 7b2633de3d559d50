"""Resolve a proof kind (bundled or configured) or explicit files to a circuit and its key.

Everything here that can be wrong with the arguments is checked by ``pick`` before any long
work (key generation, key loading, witness generation) starts.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cuzk.circuits.registry import bundled_circuits
from cuzk.errors import CuzkError, UnknownProofKind
from cuzk.files import not_a_file
from cuzk.prover.keystore import DEFAULT_KEYS_DIR, ensure_zkey

if TYPE_CHECKING:
    from cuzk.prover.keygen import Progress


class UsageError(CuzkError):
    """Arguments that cannot work together, or a file that is not there (exit status 2)."""


@dataclass(frozen=True)
class LocalCircuit:
    name: str
    r1cs: Path
    wasm: Path | None
    zkey: Path | None  # None: the cached development key (generated on first use)
    sample_input: Path | None
    keys_dir: Path


def add_circuit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "kind",
        nargs="?",
        help="proof kind: bundled (winning-post, window-post, snap-update, porep-c2) or one"
        " of --config's [proof_kinds.<name>]; with --r1cs, just a name for the key cache;"
        " a CIRCUIT.zkey in rapidsnark's order",
    )
    p.add_argument("--r1cs", type=Path, help="circuit .r1cs (instead of a proof kind)")
    p.add_argument("--wasm", type=Path, help="circuit witness generator .wasm (with --r1cs)")
    p.add_argument(
        "--zkey",
        type=Path,
        help="proving key (default: the kind's configured key, else a development key"
        " generated and cached on first use)",
    )
    p.add_argument(
        "--config",
        type=Path,
        default=None,
        help="cuzk config whose proof kinds KIND may name (default: $CUZK_CONFIG)",
    )
    p.add_argument(
        "--keys-dir",
        type=Path,
        default=None,
        help=f"development key cache (default: the config's keys_dir, else {DEFAULT_KEYS_DIR})",
    )


def _exists(path: Path | None, what: str) -> None:
    problem = None if path is None else not_a_file(path)
    if problem:
        raise UsageError(f"{what} {path}: {problem}")


def _configured_kinds(args: argparse.Namespace):
    """(kinds by name, keys_dir) from --config / $CUZK_CONFIG, or None without a config."""
    path = args.config or os.environ.get("CUZK_CONFIG") or None
    if path is None:
        return None
    from cuzk.config import ConfigError, load_config

    try:
        config = load_config(path)
    except ConfigError as e:
        raise UsageError(str(e)) from None
    return config.proof_kinds, Path(config.engine.keys_dir)


def pick(args: argparse.Namespace, *, need_wasm: bool = True) -> LocalCircuit:
    """The circuit the arguments name, every file checked to exist; no long work.

    ``need_wasm=False`` when the witness comes from elsewhere (``--wtns``).
    """
    keys_dir = args.keys_dir
    if args.r1cs is None:
        given = [f"--{n}" for n in ("wasm",) if getattr(args, n, None) is not None]
        if not args.kind:
            hint = f"{' and '.join(given)} needs --r1cs" if given else "nothing to prove"
            raise UsageError(
                f"{hint}: give a proof KIND, or --r1cs with --wasm (or --wtns), or --zkey with"
                " --wtns"
            )
        if given:
            raise UsageError(f"{given[0]} goes with --r1cs, not with a proof kind")
        found = _configured_kinds(args)
        if found is not None:
            kinds, config_keys = found
            keys_dir = keys_dir or config_keys
            if args.kind not in kinds:
                known = ", ".join(sorted(kinds)) or "none"
                raise UnknownProofKind(
                    f"unknown proof kind {args.kind!r}; configured kinds: {known}"
                )
            k = kinds[args.kind]
            c = LocalCircuit(
                args.kind,
                Path(k.r1cs),
                Path(k.wasm),
                args.zkey or k.zkey,
                k.sample_input,
                Path(keys_dir or DEFAULT_KEYS_DIR),
            )
        else:
            circuits = bundled_circuits()
            if args.kind not in circuits:
                known = ", ".join(sorted(circuits))
                raise UnknownProofKind(
                    f"unknown proof kind {args.kind!r}; bundled kinds: {known}"
                    " (pass --config FILE for configured kinds, or --r1cs/--wasm)"
                )
            b = circuits[args.kind]
            c = LocalCircuit(
                b.proof_kind,
                Path(b.r1cs_path),
                Path(b.wasm_path),
                args.zkey,
                Path(b.sample_input_path),
                Path(keys_dir or DEFAULT_KEYS_DIR),
            )
    else:
        if need_wasm and args.wasm is None:
            raise UsageError("--r1cs needs --wasm (the witness generator), or --wtns")
        c = LocalCircuit(
            args.kind or args.r1cs.stem,
            args.r1cs,
            args.wasm,
            args.zkey,
            None,
            Path(keys_dir or DEFAULT_KEYS_DIR),
        )
    _exists(c.r1cs, "--r1cs" if args.r1cs else "circuit")
    _exists(c.wasm, "--wasm" if args.r1cs else "witness generator")
    _exists(c.zkey, "--zkey" if args.zkey else "proving key")
    return c


def zkey_for(c: LocalCircuit, progress: Progress | None = None, announce: bool = True) -> Path:
    """The circuit's proving key: the given one, else the cached development key (made now if
    absent, with its verification key beside it), said plainly on stderr."""
    if c.zkey is not None:
        return c.zkey
    path = ensure_zkey(c.name, c.r1cs, c.keys_dir, progress)
    if announce:
        print(
            f"using development key {path} (single-party setup, not for production;"
            f" verification key {path.with_suffix('.vk.json')})",
            file=sys.stderr,
        )
    return path
