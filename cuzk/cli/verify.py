"""``cuzk verify``: check a Groth16 proof against a verification key (or a zkey)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from cuzk.cli._local_results import VerifyResult, add_json_argument, base, finish
from cuzk.errors import CuzkError
from cuzk.prover.keys import ProvingKey
from cuzk.prover.verify import VerificationKey, verify


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "verify",
        help="verify a proof.json / public.json pair",
        description="Check a Groth16 proof (snarkjs's proof.json and public.json) against a"
        " verification key: a snarkjs verification_key.json (--vk; `cuzk keygen` writes one"
        " beside every key) or the one inside a zkey (--zkey). The two files may come in"
        " either order (snarkjs's is public.json proof.json). Exit status 0: the proof"
        " verifies; 1: it does not; 2: a file cannot be read.",
    )
    key = p.add_mutually_exclusive_group(required=True)
    key.add_argument("--vk", type=Path, help="verification_key.json (snarkjs format)")
    key.add_argument("--zkey", type=Path, help="take the verification key from this zkey")
    p.add_argument("proof", type=Path, metavar="PROOF",
                   help="proof.json (or public.json: the two are told apart by content)")
    p.add_argument("public", type=Path, metavar="PUBLIC",
                   help="public.json (or proof.json: snarkjs's order, public first, works too)")
    add_json_argument(p)
    p.set_defaults(func=run)


_PROOF_KEYS = ("pi_a", "pi_b", "pi_c")


def _what(doc: Any) -> str | None:
    """"proof" (an object with pi_a, pi_b, pi_c), "public" (a list of signals), or None."""
    if isinstance(doc, dict) and all(k in doc for k in _PROOF_KEYS):
        return "proof"
    return "public" if isinstance(doc, list) else None


def proof_and_public(
    first: tuple[Path, Any], second: tuple[Path, Any]
) -> tuple[tuple[Path, Any], tuple[Path, Any]]:
    """The (path, content) of the proof and of the public signals, of two files given in
    either order (cuzk's ``proof public``, snarkjs's ``public proof``), told apart by content;
    two of one kind is said plainly rather than reported as a malformed proof."""
    (path1, doc1), (path2, doc2) = first, second
    what1, what2 = _what(doc1), _what(doc2)
    if (what1, what2) == ("public", "proof"):
        return second, first
    if what1 == what2 == "public":
        raise ValueError(f"{path1} and {path2} are both public signals (lists): give one"
                         " proof.json (an object with pi_a, pi_b, pi_c) and one public.json")
    if what1 == what2 == "proof":
        raise ValueError(f"{path1} and {path2} are both proofs: give one proof.json and one"
                         " public.json (a list of signals)")
    return first, second


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise ValueError(f"{path}: is a directory, not a file") from None
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not JSON ({e})") from None


def run(args: argparse.Namespace) -> int:
    result: VerifyResult = {
        **base("verify"), "valid": None, "proof": None, "public": None,
        "vk": None if args.vk is None else str(args.vk),
        "zkey": None if args.zkey is None else str(args.zkey),
    }
    try:
        vk = (
            ProvingKey.load(args.zkey).verification_key
            if args.zkey
            else VerificationKey.from_json(_load_json(args.vk))
        )
        first, second = (args.proof, _load_json(args.proof)), (args.public, _load_json(args.public))
        (proof_path, proof), (public_path, public) = proof_and_public(first, second)
        result["proof"], result["public"] = str(proof_path), str(public_path)
        ok = verify(vk, proof, public)
    except (ValueError, CuzkError) as e:
        return finish(args, result, 2, str(e))
    result["valid"] = ok
    if ok:
        if not args.json:
            print("OK")
        return finish(args, result, 0)
    if not args.json:
        print("INVALID: the proof does not verify")
    result["error"] = "the proof does not verify"
    return finish(args, result, 1)
