"""``cuzk keygen``: a development Groth16 setup (random toxic waste; not for production)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cuzk.circuits.registry import bundled_circuits
from cuzk.cli._output import check_output_file
from cuzk.cli._progress import stage_progress
from cuzk.errors import CuzkError
from cuzk.files import not_a_file
from cuzk.formats.r1cs import read_r1cs
from cuzk.prover.keystore import (
    DEFAULT_KEYS_DIR,
    check_keys_dir,
    ensure_zkey,
    generate_zkey,
    vk_path_for,
    write_verification_key,
)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "keygen",
        help="generate a development proving key (zkey) and verification key",
        description="Circuit-specific Groth16 setup with random, discarded toxic waste."
        " For development and tests only: production keys come from a multi-party ceremony.",
    )
    p.add_argument("kind", nargs="*", help="bundled proof kinds (default: all)")
    p.add_argument(
        "--r1cs", type=Path, help="make a key for this circuit instead of a bundled kind"
    )
    p.add_argument("--out", type=Path, help="zkey path for --r1cs (default: ./NAME.zkey)")
    p.add_argument(
        "--vk",
        type=Path,
        help="where to write the verification key JSON (--r1cs; default: beside the zkey,"
        " NAME.vk.json)",
    )
    p.add_argument(
        "--keys-dir", type=Path, default=DEFAULT_KEYS_DIR, help="key cache (default: %(default)s)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        if args.r1cs:
            args.out = args.out or Path(args.r1cs.stem + ".zkey")
            problem = not_a_file(args.r1cs)
            if problem:
                print(f"cuzk keygen: --r1cs {args.r1cs}: {problem}", file=sys.stderr)
                return 2
            check_output_file(args.out, "--out")
            if args.vk is not None:
                check_output_file(args.vk, "--vk")
            read_r1cs(args.r1cs, load_constraints=False)  # not an r1cs: said before the bars
            with stage_progress(f"keygen {args.r1cs.name}") as tick:
                generate_zkey(args.r1cs, args.out, tick, vk=False)
            vk_path = write_verification_key(args.out, args.vk)
            print(f"{args.out}\t{vk_path}")
            print(
                "development key: single-party setup, not for production (use a snarkjs"
                " ceremony; see docs/custom-circuits.md)",
                file=sys.stderr,
            )
            return 0
        circuits = bundled_circuits()
        kinds = args.kind or sorted(circuits)
        unknown = [k for k in kinds if k not in circuits]
        if unknown:
            print(
                f"cuzk keygen: unknown proof kind(s) {', '.join(unknown)}; "
                f"bundled: {', '.join(sorted(circuits))}",
                file=sys.stderr,
            )
            return 2
        check_keys_dir(args.keys_dir)
        for kind in kinds:
            with stage_progress(f"keygen {kind}") as tick:
                path = ensure_zkey(kind, Path(circuits[kind].r1cs_path), args.keys_dir, tick)
            print(f"{kind}\t{path}\t{vk_path_for(path)}")
        return 0
    except CuzkError as e:
        print(f"cuzk keygen: {e}", file=sys.stderr)
        return 2
