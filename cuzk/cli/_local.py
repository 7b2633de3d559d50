"""Resolve a bundled proof kind (or explicit files) to a circuit and its proving key locally."""

from __future__ import annotations

import argparse
from pathlib import Path

from cuzk.circuits.registry import bundled_circuits
from cuzk.errors import UnknownProofKind
from cuzk.prover.keystore import DEFAULT_KEYS_DIR, ensure_zkey


def add_circuit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "kind",
        nargs="?",
        help="bundled proof kind (winning-post, window-post, snap-update, porep-c2)",
    )
    p.add_argument("--r1cs", type=Path, help="circuit .r1cs (instead of a bundled kind)")
    p.add_argument("--wasm", type=Path, help="circuit witness generator .wasm")
    p.add_argument(
        "--zkey", type=Path, help="proving key (default: generated and cached on first use)"
    )
    p.add_argument(
        "--keys-dir", type=Path, default=DEFAULT_KEYS_DIR, help="key cache (default: %(default)s)"
    )


def resolve(
    args: argparse.Namespace, progress=None
) -> tuple[str, Path, Path | None, Path, Path | None]:
    """-> (name, r1cs, wasm, zkey, sample input). Raises UnknownProofKind for an unknown kind."""
    if args.r1cs:
        name = args.kind or args.r1cs.stem
        zkey = args.zkey or ensure_zkey(name, args.r1cs, args.keys_dir, progress)
        return name, args.r1cs, args.wasm, zkey, None
    circuits = bundled_circuits()
    if not args.kind or args.kind not in circuits:
        known = ", ".join(sorted(circuits))
        raise UnknownProofKind(f"unknown proof kind {args.kind!r}; bundled kinds: {known}")
    c = circuits[args.kind]
    zkey = args.zkey or ensure_zkey(c.proof_kind, Path(c.r1cs_path), args.keys_dir, progress)
    return c.proof_kind, Path(c.r1cs_path), Path(c.wasm_path), zkey, Path(c.sample_input_path)
