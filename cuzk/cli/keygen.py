"""``cuzk keygen``: a development Groth16 setup (random toxic waste; not for production)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cuzk.circuits.registry import bundled_circuits
from cuzk.cli._local_results import KeygenResult, add_json_argument, base, finish
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
    add_json_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result: KeygenResult = {**base("keygen"), "keys": []}
    try:
        _run(args, result)
    except CuzkError as e:
        result["keys"] = []
        return finish(args, result, 2, str(e))
    return finish(args, result, 0)


def _made(args: argparse.Namespace, result: KeygenResult, kind: str | None, r1cs: Path,
          zkey: Path, vk: Path) -> None:
    result["keys"].append({"proof_kind": kind, "r1cs": str(r1cs), "zkey": str(zkey),
                           "vk": str(vk)})
    if not args.json:
        print("\t".join(str(x) for x in (kind, zkey, vk) if x is not None))


def _run(args: argparse.Namespace, result: KeygenResult) -> None:
    if args.r1cs:
        args.out = args.out or Path(args.r1cs.stem + ".zkey")
        problem = not_a_file(args.r1cs)
        if problem:
            raise _Usage(f"--r1cs {args.r1cs}: {problem}")
        check_output_file(args.out, "--out")
        if args.vk is not None:
            check_output_file(args.vk, "--vk")
        read_r1cs(args.r1cs, load_constraints=False)  # not an r1cs: said before the bars
        with stage_progress(f"keygen {args.r1cs.name}") as tick:
            generate_zkey(args.r1cs, args.out, tick, vk=False)
        vk_path = write_verification_key(args.out, args.vk)
        _made(args, result, None, args.r1cs, args.out, vk_path)
        print(
            "development key: single-party setup, not for production (use a snarkjs"
            " ceremony; see docs/custom-circuits.md)",
            file=sys.stderr,
        )
        return
    circuits = bundled_circuits()
    kinds = args.kind or sorted(circuits)
    unknown = [k for k in kinds if k not in circuits]
    if unknown:
        raise _Usage(
            f"unknown proof kind(s) {', '.join(unknown)}; bundled: {', '.join(sorted(circuits))}"
        )
    check_keys_dir(args.keys_dir)
    for kind in kinds:
        r1cs = Path(circuits[kind].r1cs_path)
        with stage_progress(f"keygen {kind}") as tick:
            path = ensure_zkey(kind, r1cs, args.keys_dir, tick)
        _made(args, result, kind, r1cs, path, vk_path_for(path))


class _Usage(CuzkError):
    """Arguments that cannot work (exit status 2, as every keygen failure)."""
