"""``cuzk verify``: check a Groth16 proof against a verification key (or a zkey)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cuzk.errors import CuzkError
from cuzk.prover.keys import ProvingKey
from cuzk.prover.verify import VerificationKey, verify


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "verify",
        help="verify a proof.json / public.json pair",
        description="Check a Groth16 proof (snarkjs's proof.json and public.json) against a"
        " verification key: a snarkjs verification_key.json (--vk; `cuzk keygen` writes one"
        " beside every key) or the one inside a zkey (--zkey). Exit status 0: the proof"
        " verifies; 1: it does not; 2: a file cannot be read.",
    )
    key = p.add_mutually_exclusive_group(required=True)
    key.add_argument("--vk", type=Path, help="verification_key.json (snarkjs format)")
    key.add_argument("--zkey", type=Path, help="take the verification key from this zkey")
    p.add_argument("proof", type=Path, help="proof.json")
    p.add_argument("public", type=Path, help="public.json")
    p.set_defaults(func=run)


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path}: file not found") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None


def run(args: argparse.Namespace) -> int:
    try:
        vk = (
            ProvingKey.load(args.zkey).verification_key
            if args.zkey
            else VerificationKey.from_json(_load_json(args.vk))
        )
        ok = verify(vk, _load_json(args.proof), _load_json(args.public))
    except (ValueError, CuzkError) as e:
        print(f"cuzk verify: {e}", file=sys.stderr)
        return 2
    print("OK" if ok else "INVALID: the proof does not verify")
    return 0 if ok else 1
