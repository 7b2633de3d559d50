"""``cuzk bench``: the benches' options, and the prover and engine benches' output (the benches
themselves are ``cuzk.bench``; the other benches' commands are ``cuzk.cli.bench_*``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from cuzk.circuits.registry import bundled_circuits
from cuzk.errors import CuzkError
from cuzk.prover.keystore import DEFAULT_KEYS_DIR
from cuzk.tools import find_snarkjs


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("bench", help="benchmarks that print figures")
    sub = p.add_subparsers(dest="bench", metavar="WHAT", required=True)
    pp = sub.add_parser(
        "prover", help="cuzk's CPU prover against snarkjs groth16 prove, same zkey and witness",
        description="Prove each proof kind with cuzk's CPU prover and with `snarkjs groth16"
        " prove` (needs `make node`), interleaved, on the same zkey and witness, and print the"
        " steps' times and the speed-up side by side; --r1cs times a circuit of your own as"
        " whole processes.",
    )
    pp.add_argument("kinds", nargs="*", help="proof kinds: bundled (default: all of them) or "
                    "--config's [proof_kinds.<name>], proven as whole `cuzk prove` processes")
    pp.add_argument(
        "--repeat", type=int, default=3,
        help="interleaved runs per prover (cuzk, snarkjs, cuzk, ...); each run is printed"
        " (default: %(default)s)",
    )
    pp.add_argument("--r1cs", type=Path, help="a circuit of your own (with --zkey and --wtns): "
                    "whole `cuzk prove` processes against `snarkjs groth16 prove`")
    pp.add_argument("--zkey", type=Path, help="the proving key of --r1cs (a ceremony key)")
    pp.add_argument("--wtns", type=Path, help="a witness of --r1cs")
    pp.add_argument("--no-snarkjs", action="store_true", help="skip the snarkjs column")
    pp.add_argument("--config", type=Path, default=None,
                    help="cuzk config whose proof kinds KINDS may name (default: $CUZK_CONFIG)")
    pp.add_argument("--keys-dir", type=Path, default=None,
                    help=f"development key cache (default: the config's, else {DEFAULT_KEYS_DIR})")
    pp.add_argument("--json", type=Path, help="also write the figures as JSON here")
    pp.add_argument(
        "--msm-precompute", choices=("auto", "off", "on"), default="auto",
        help="window tables for the bundled kinds' keys, as [prover] msm_precompute (auto: "
        "weighed against the auto-detected host memory budget, as `cuzk serve` does; default:"
        " %(default)s)")
    pp.set_defaults(func=run_prover)
    pe = sub.add_parser(
        "engine",
        help="a backlog of mixed jobs through the engine: throughput, latency, busy fraction, "
        "split proving and telemetry on/off side by side",
        description="Run a backlog of mixed jobs (the bundled proof kinds, weighted) through"
        " an engine in this process, with telemetry on and off in turn, and print throughput,"
        " latency, GPU-worker busy fraction and split proving side by side. No server, no"
        " network.",
    )
    pe.add_argument(
        "--prover",
        choices=["auto", "real", "scripted"],
        default="auto",
        help="real: the CPU/GPU prover; scripted: the simulated prover, whose steps sleep (the"
        " engine's overhead only); auto: real when the prover and the bundled circuits' inputs"
        " are there, else scripted (default: %(default)s)",
    )
    pe.add_argument("--jobs", type=int, default=40,
                    help="jobs in the backlog (default: %(default)s)")
    pe.add_argument(
        "--repeats", type=int, default=3,
        help="telemetry on/off pairs, the median reported (default: %(default)s)",
    )
    pe.add_argument("--seed", type=int, default=0,
                    help="random seed of the backlog's mix, so two runs prove the same jobs"
                    " (default: %(default)s)")
    pe.add_argument("--scale", type=float, default=1.0,
                    help="scripted prover only: step-time multiplier (default: %(default)s)")
    pe.add_argument("--json", type=Path, help="also write the figures as JSON here")
    pe.set_defaults(func=run_engine)
    from cuzk.cli.bench_cluster import register as register_cluster
    from cuzk.cli.bench_deadlines import register as register_deadlines
    from cuzk.cli.bench_durability import register as register_durability
    from cuzk.cli.bench_soak import register as register_soak

    register_soak(sub)
    register_durability(sub)
    register_deadlines(sub)
    register_cluster(sub)


def run_engine(args: argparse.Namespace) -> int:
    from cuzk.bench.engine import run_engine_bench
    from cuzk.cli.bench_engine import report

    bench = run_engine_bench(prover=args.prover, jobs=args.jobs, repeats=args.repeats,
                             seed=args.seed, scale=args.scale, echo=print)
    for line in report(bench):
        print(line)
    if args.json:
        args.json.write_text(json.dumps(bench.figures(), indent=2, default=str) + "\n")
    return 0


def _echo(line: str) -> None:
    print(line, flush=True)


def _run_user_circuit(args: argparse.Namespace, snarkjs: str | None, machine: dict) -> int:
    """Whole processes from the command line: `cuzk prove` against `snarkjs groth16 prove`."""
    from cuzk.bench.prover import cli_runs

    for flag in ("r1cs", "zkey", "wtns"):
        path = getattr(args, flag)
        if path is None or not path.is_file():
            print(f"cuzk bench prover: --{flag} {path or ''}: no such file (--r1cs needs --zkey "
                  "and --wtns)", file=sys.stderr)
            return 2
    circuit_args = ["--r1cs", str(args.r1cs), "--zkey", str(args.zkey)]
    try:
        row = cli_runs(args.r1cs.stem, circuit_args, args.zkey, args.wtns, args.repeat, snarkjs,
                       _echo)
    except CuzkError as e:
        print(f"cuzk bench prover: {e}", file=sys.stderr)
        return 1
    row = {"circuit": str(args.r1cs), **row}
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "results": [row]}, indent=1) + "\n")
    return 0


def _configured_kind_row(args: argparse.Namespace, kind: str, snarkjs: str | None
                         ) -> dict[str, Any]:
    """A configured kind, resolved as ``cuzk prove KIND --config`` resolves it."""
    from cuzk.bench.prover import configured_kind_row
    from cuzk.cli._local import pick, zkey_for

    c = pick(argparse.Namespace(kind=kind, r1cs=None, wasm=None, zkey=None,
                                config=args.config, keys_dir=args.keys_dir))
    if c.sample_input is None:
        raise CuzkError(f"proof kind {kind} has no sample_input to prove: set one in the "
                        "config, or bench it with --r1cs/--zkey/--wtns")
    zkey = zkey_for(c)
    config = args.config or os.environ.get("CUZK_CONFIG")
    return configured_kind_row(kind, c.r1cs, c.wasm, zkey, c.sample_input,
                               str(config) if config else None, args.repeat, snarkjs, _echo)


def run_prover(args: argparse.Namespace) -> int:
    from cuzk.bench.prover import bundled_kind_row, machine, size_order
    from cuzk.prover.cpu_backend import CpuBackend

    console = Console(width=None if sys.stdout.isatty() else 140)
    circuits = bundled_circuits()
    kinds = args.kinds or sorted(circuits, key=size_order)
    snarkjs = None if args.no_snarkjs else find_snarkjs()
    if not args.no_snarkjs and snarkjs is None:
        print(
            "cuzk bench prover: snarkjs not found (npm ci in the repository, or --no-snarkjs)",
            file=sys.stderr,
        )
        return 2
    taken_on = machine()
    print("cuzk CPU prover: {cores} cores, msm={msm}, qap={qap}, field multiply {field_arith} "
          "(cpu has bmi2+adx: {cpu_has_bmi2_adx})".format(**taken_on), flush=True)
    if args.r1cs is not None:
        return _run_user_circuit(args, snarkjs, taken_on)
    configured = _configured_kinds(args)
    if configured is None:
        return 2
    rows, cli_rows = [], []
    backend = CpuBackend()
    for kind in kinds:
        if kind in configured:
            try:
                cli_rows.append(_configured_kind_row(args, kind, snarkjs))
            except CuzkError as e:
                print(f"cuzk bench prover: {kind}: {e}", file=sys.stderr)
                return 1
            continue
        if kind not in circuits:
            known = ", ".join(sorted({*circuits, *configured}))
            print(f"cuzk bench prover: unknown proof kind {kind!r}; known: {known}",
                  file=sys.stderr)
            return 2
        c = circuits[kind]
        try:
            rows.append(bundled_kind_row(
                kind, Path(c.r1cs_path), Path(c.wasm_path), Path(c.sample_input_path),
                args.keys_dir or DEFAULT_KEYS_DIR, args.msm_precompute, args.repeat, snarkjs,
                backend, _echo))
        except CuzkError as e:
            print(f"cuzk bench prover: {kind}: {e}", file=sys.stderr)
            return 1
    if rows:
        _print_table(console, rows, bool(snarkjs))
    if args.json:
        out = {"machine": taken_on, "results": rows + cli_rows}
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


def _configured_kinds(args: argparse.Namespace) -> set[str] | None:
    """Names of --config's / $CUZK_CONFIG's proof kinds (empty without a config); None, said
    on stderr, when the config cannot be read."""
    path = args.config or os.environ.get("CUZK_CONFIG") or None
    if path is None:
        return set()
    from cuzk.config import ConfigError, load_config

    try:
        return set(load_config(path).proof_kinds)
    except ConfigError as e:
        print(f"cuzk bench prover: {e}", file=sys.stderr)
        return None


def _print_table(console: Console, rows: list[dict[str, Any]], with_snarkjs: bool) -> None:
    t = Table(title="cuzk CPU prover vs snarkjs groth16 prove (median, same zkey and witness)")
    for col in ("proof kind", "domain", "synthesize", "gpu_phase", "finalize", "cuzk total"):
        t.add_column(col, justify="right")
    if with_snarkjs:
        t.add_column("snarkjs CLI", justify="right")
        t.add_column("snarkjs in-process", justify="right")
        t.add_column("speedup (range)", justify="right")
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
            spread = f"{r['speedup']:.2f}x ({r['speedup_min']:.2f}-{r['speedup_max']:.2f})"
            cells += [f"{r['snarkjs_cli_ms']:.0f} ms", warm, spread]
        t.add_row(*cells)
    console.print(t)
    if with_snarkjs:
        console.print(
            "speedup = snarkjs in-process (warm node, groth16.prove alone; CLI time if\n"
            "unavailable) / cuzk total, per interleaved run: median (min-max).\n"
            "snarkjs CLI includes node start-up. snarkjs's proofs were checked with cuzk verify."
        )
