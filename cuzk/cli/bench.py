"""``cuzk bench``: figures printed side by side in one run (prover vs snarkjs; the engine)."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from cuzk.circuits.registry import bundled_circuits
from cuzk.errors import CuzkError
from cuzk.formats.wtns import write_wtns
from cuzk.prover.circuit import Circuit
from cuzk.prover.cpu_backend import CpuBackend
from cuzk.prover.keys import ProvingKey
from cuzk.prover.keystore import DEFAULT_KEYS_DIR, ensure_zkey
from cuzk.prover.session import prove_timed
from cuzk.prover.verify import verify
from cuzk.tools import find_snarkjs, snarkjs_timer_script


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("bench", help="benchmarks that print figures")
    sub = p.add_subparsers(dest="bench", metavar="WHAT", required=True)
    pp = sub.add_parser(
        "prover", help="cuzk's CPU prover against snarkjs groth16 prove, same zkey and witness"
    )
    pp.add_argument("kinds", nargs="*", help="bundled proof kinds (default: all)")
    pp.add_argument("--repeat", type=int, default=3, help="runs per prover (median reported)")
    pp.add_argument("--no-snarkjs", action="store_true", help="skip the snarkjs column")
    pp.add_argument("--keys-dir", type=Path, default=DEFAULT_KEYS_DIR)
    pp.add_argument("--json", type=Path, help="also write the figures as JSON here")
    pp.set_defaults(func=run_prover)
    pe = sub.add_parser(
        "engine",
        help="a backlog of mixed jobs through the engine: throughput, latency, busy fraction, "
        "split proving and telemetry on/off side by side",
    )
    pe.add_argument(
        "--prover",
        choices=["auto", "real", "scripted"],
        default="auto",
        help="real: the CPU/GPU prover; scripted: a sleeping double (engine overhead only)",
    )
    pe.add_argument("--jobs", type=int, default=40)
    pe.add_argument(
        "--repeats", type=int, default=3, help="telemetry on/off pairs (median reported)"
    )
    pe.add_argument("--seed", type=int, default=0)
    pe.add_argument("--scale", type=float, default=1.0, help="scripted step-time multiplier")
    pe.add_argument("--json", type=Path, help="also write the figures as JSON here")
    pe.set_defaults(func=run_engine)
    from cuzk.cli.bench_cluster import register as register_cluster
    from cuzk.cli.bench_durability import register as register_durability
    from cuzk.cli.bench_soak import register as register_soak

    register_soak(sub)
    register_durability(sub)
    register_cluster(sub)


def run_engine(args: argparse.Namespace) -> int:
    from cuzk.cli.bench_engine import run_engine_bench

    figures = run_engine_bench(
        prover=args.prover, jobs=args.jobs, repeats=args.repeats, seed=args.seed, scale=args.scale
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")
    return 0


def _snarkjs_cli_prove(snarkjs: str, zkey: Path, wtns: Path, workdir: Path) -> float:
    """One ``snarkjs groth16 prove`` run (node start-up included); leaves its proof in workdir."""
    t0 = time.perf_counter()
    subprocess.run(
        [
            snarkjs,
            "groth16",
            "prove",
            str(zkey),
            str(wtns),
            str(workdir / "sj_proof.json"),
            str(workdir / "sj_public.json"),
        ],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - t0


def _snarkjs_warm_prove(zkey: Path, wtns: Path, repeat: int) -> list[float]:
    """groth16.prove timed inside one warm node process (no start-up, no curve set-up)."""
    script = snarkjs_timer_script()
    if script is None:
        return []
    out = subprocess.run(
        ["node", str(script), str(zkey), str(wtns), str(repeat)],
        check=True,
        capture_output=True,
        text=True,
    )
    return list(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])


def run_prover(args: argparse.Namespace) -> int:
    console = Console(width=None if sys.stdout.isatty() else 140)
    circuits = bundled_circuits()
    kinds = args.kinds or sorted(circuits, key=_size_order)
    snarkjs = None if args.no_snarkjs else find_snarkjs()
    if not args.no_snarkjs and snarkjs is None:
        print(
            "cuzk bench prover: snarkjs not found (npm ci in the repository, or --no-snarkjs)",
            file=sys.stderr,
        )
        return 2
    rows = []
    backend = CpuBackend()
    for kind in kinds:
        if kind not in circuits:
            print(f"cuzk bench prover: unknown proof kind {kind!r}", file=sys.stderr)
            return 2
        c = circuits[kind]
        try:
            zkey = ensure_zkey(kind, Path(c.r1cs_path), args.keys_dir)
            key = ProvingKey.load(zkey)
            circuit = Circuit.load(c.r1cs_path, c.wasm_path, kind)
            circuit.check_key(key)
            inputs = json.loads(Path(c.sample_input_path).read_text())
            prove_timed(key, circuit, inputs, backend)  # warm-up: numba JIT, thread pools
            ours = [prove_timed(key, circuit, inputs, backend)[1] for _ in range(args.repeat)]
        except CuzkError as e:
            print(f"cuzk bench prover: {kind}: {e}", file=sys.stderr)
            return 1
        row: dict[str, Any] = {
            "proof_kind": kind,
            "domain_size": key.sizes.domain_size,
            "n_vars": key.sizes.n_vars,
            "synthesize_ms": statistics.median(t.synthesize_s for t in ours) * 1e3,
            "gpu_phase_ms": statistics.median(t.gpu_phase_s for t in ours) * 1e3,
            "finalize_ms": statistics.median(t.finalize_s for t in ours) * 1e3,
            "cuzk_ms": statistics.median(t.total_s for t in ours) * 1e3,
        }
        if snarkjs:
            with tempfile.TemporaryDirectory() as tmp:
                work = Path(tmp)
                wtns = work / "witness.wtns"
                write_wtns(wtns, circuit.calculate_witness(inputs), key.curve)
                cli = [_snarkjs_cli_prove(snarkjs, zkey, wtns, work) for _ in range(args.repeat)]
                sj_proof = json.loads((work / "sj_proof.json").read_text())
                sj_public = json.loads((work / "sj_public.json").read_text())
                row["snarkjs_proof_verifies"] = verify(key.verification_key, sj_proof, sj_public)
                warm = _snarkjs_warm_prove(zkey, wtns, args.repeat)
            row["snarkjs_cli_ms"] = statistics.median(cli) * 1e3
            row["snarkjs_ms"] = statistics.median(warm) * 1e3 if warm else row["snarkjs_cli_ms"]
            row["snarkjs_in_process"] = bool(warm)
            row["speedup"] = row["snarkjs_ms"] / row["cuzk_ms"]
        rows.append(row)
    _print_table(console, rows, bool(snarkjs))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


_SIZE_ORDER = ("winning-post", "snap-update", "window-post", "porep-c2")


def _size_order(kind: str) -> int:
    """Smallest circuit first, so the largest (the one the target is about) prints last."""
    return _SIZE_ORDER.index(kind) if kind in _SIZE_ORDER else len(_SIZE_ORDER)


def _print_table(console: Console, rows: list[dict[str, Any]], with_snarkjs: bool) -> None:
    t = Table(title="cuzk CPU prover vs snarkjs groth16 prove (median, same zkey and witness)")
    for col in ("proof kind", "domain", "synthesize", "gpu_phase", "finalize", "cuzk total"):
        t.add_column(col, justify="right")
    if with_snarkjs:
        t.add_column("snarkjs CLI", justify="right")
        t.add_column("snarkjs in-process", justify="right")
        t.add_column("speedup", justify="right")
    for r in rows:
        cells = [
            r["proof_kind"],
            f"2^{r['domain_size'].bit_length() - 1}",
            f"{r['synthesize_ms']:.0f} ms",
            f"{r['gpu_phase_ms']:.0f} ms",
            f"{r['finalize_ms']:.0f} ms",
            f"{r['cuzk_ms']:.0f} ms",
        ]
        if with_snarkjs:
            warm = f"{r['snarkjs_ms']:.0f} ms" if r["snarkjs_in_process"] else "n/a"
            cells += [f"{r['snarkjs_cli_ms']:.0f} ms", warm, f"{r['speedup']:.2f}x"]
        t.add_row(*cells)
    console.print(t)
    if with_snarkjs:
        console.print(
            "speedup = snarkjs in-process (warm node, groth16.prove alone; CLI time if\n"
            "unavailable) / cuzk total.\n"
            "snarkjs CLI includes node start-up. snarkjs's proofs were checked with cuzk verify."
        )
