"""``cuzk keygen``: a development Groth16 setup (random toxic waste; not for production)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cuzk.circuits.registry import bundled_circuits
from cuzk.cli._progress import stage_progress
from cuzk.errors import CuzkError
from cuzk.prover.keys import ProvingKey
from cuzk.prover.keystore import DEFAULT_KEYS_DIR, ensure_zkey, generate_zkey


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
    p.add_argument("--out", type=Path, help="zkey path for --r1cs")
    p.add_argument("--vk", type=Path, help="also write the verification key JSON here (--r1cs)")
    p.add_argument(
        "--keys-dir", type=Path, default=DEFAULT_KEYS_DIR, help="key cache (default: %(default)s)"
    )
    p.set_defaults(func=run)


def _write_vk(zkey: Path, vk_path: Path) -> None:
    vk = ProvingKey.load(zkey).verification_key.to_json()
    vk_path.write_text(json.dumps(vk, indent=1) + "\n")


def run(args: argparse.Namespace) -> int:
    try:
        if args.r1cs:
            if not args.out:
                print("cuzk keygen: --r1cs needs --out FILE.zkey", file=sys.stderr)
                return 2
            with stage_progress(f"keygen {args.r1cs.name}") as tick:
                generate_zkey(args.r1cs, args.out, tick)
            if args.vk:
                _write_vk(args.out, args.vk)
            print(args.out)
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
        for kind in kinds:
            with stage_progress(f"keygen {kind}") as tick:
                path = ensure_zkey(kind, Path(circuits[kind].r1cs_path), args.keys_dir, tick)
            vk_path = path.with_suffix(".vk.json")
            if not vk_path.exists():
                _write_vk(path, vk_path)
            print(f"{kind}\t{path}\t{vk_path}")
        return 0
    except CuzkError as e:
        print(f"cuzk keygen: {e}", file=sys.stderr)
        return 2
