"""``cuzk prove``: one proof locally, without a server (bundled kind or explicit files)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cuzk.cli._local import add_circuit_args, resolve
from cuzk.cli._progress import stage_progress
from cuzk.errors import CuzkError
from cuzk.prover.circuit import Circuit
from cuzk.prover.cpu_backend import CpuBackend
from cuzk.prover.keys import ProvingKey
from cuzk.prover.session import prove_timed


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "prove", help="prove one partition locally and write proof.json / public.json"
    )
    add_circuit_args(p)
    p.add_argument("--input", type=Path, help="input JSON (default: the bundled sample input)")
    p.add_argument(
        "--out", type=Path, default=Path("."), help="directory for proof.json and public.json"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        with stage_progress("keygen") as tick:
            name, r1cs, wasm, zkey, sample = resolve(args, tick)
        if wasm is None:
            print("cuzk prove: --r1cs needs --wasm", file=sys.stderr)
            return 2
        input_path = args.input or sample
        if input_path is None:
            print("cuzk prove: --input is required with --r1cs", file=sys.stderr)
            return 2
        try:
            inputs = json.loads(Path(input_path).read_text())
        except (OSError, json.JSONDecodeError) as e:
            print(f"cuzk prove: {input_path}: {e}", file=sys.stderr)
            return 2
        key = ProvingKey.load(zkey)
        circuit = Circuit.load(r1cs, wasm, name)
        circuit.check_key(key)
        proof, times = prove_timed(key, circuit, inputs, CpuBackend())
    except CuzkError as e:
        print(f"cuzk prove: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "proof.json").write_text(json.dumps(proof.proof, indent=1) + "\n")
    (args.out / "public.json").write_text(json.dumps(proof.public, indent=1) + "\n")
    print(
        f"{name}: proof verified={proof.verified} synthesize={times.synthesize_s * 1e3:.0f}ms "
        f"gpu_phase={times.gpu_phase_s * 1e3:.0f}ms finalize={times.finalize_s * 1e3:.0f}ms "
        f"-> {args.out / 'proof.json'}"
    )
    return 0
