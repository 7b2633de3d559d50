"""``cuzk bench``: figures printed side by side in one run (prover vs snarkjs; the engine)."""

from __future__ import annotations

import argparse
import json
import os
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
from cuzk.tools import find_snarkjs, python_module_command, snarkjs_timer_script


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
    out = subprocess.run(
        [
            snarkjs,
            "groth16",
            "prove",
            str(zkey),
            str(wtns),
            str(workdir / "sj_proof.json"),
            str(workdir / "sj_public.json"),
        ],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        said = (out.stderr.strip() or out.stdout.strip()).splitlines()
        raise CuzkError(f"snarkjs groth16 prove exited {out.returncode}"
                        + (f": {said[-1]}" if said else "")
                        + " (is the zkey a snarkjs one for this circuit? --no-snarkjs skips it)")
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


def _tables(mode: str, zkey: Path) -> bool:
    """Whether ``--msm-precompute`` builds this key's window tables (auto: as the engine)."""
    from cuzk.engine.settings import EngineSettings
    from cuzk.formats.zkey import read_zkey
    from cuzk.prover import native_msm
    from cuzk.prover.key_layout import KeyLayout

    layout = KeyLayout.of_zkey(read_zkey(zkey, mmap=True))
    return native_msm.tables_wanted(mode, layout.table_bytes,
                                    EngineSettings().host_budget_bytes())


def _load() -> float:
    return os.getloadavg()[0]


def _machine() -> dict[str, Any]:
    """What the figures were taken on: the cores the prover uses and its multiply path."""
    from cuzk.prover import native_msm, qap
    from cuzk.prover.cpu_schedule import cores

    return {
        "cores": cores(),
        "msm": "native" if native_msm.available() else "arkworks",
        "qap": "native" if qap.native() else "numba",
        "field_arith": native_msm.arith_path(),
        "cpu_has_bmi2_adx": native_msm.fast_supported(),
    }


def _spread(runs: list[dict[str, Any]], key: str) -> dict[str, float]:
    values = [r[key] for r in runs]
    return {f"{key}_min": min(values), f"{key}_median": statistics.median(values),
            f"{key}_max": max(values)}


def _print_run(kind: str, i: int, run: dict[str, Any]) -> None:
    sj = ""
    if "snarkjs_ms" in run:
        sj = f"snarkjs {run['snarkjs_ms']:.0f} ms  x{run['speedup']:.2f}  "
    print(f"{kind} run {i + 1}: cuzk {run['cuzk_ms']:.0f} ms  {sj}load {run['load_1m']:.2f}",
          flush=True)


def _run_user_circuit(args: argparse.Namespace, snarkjs: str | None, machine: dict) -> int:
    """Whole processes from the command line: `cuzk prove` against `snarkjs groth16 prove`."""
    for flag in ("r1cs", "zkey", "wtns"):
        path = getattr(args, flag)
        if path is None or not path.is_file():
            print(f"cuzk bench prover: --{flag} {path or ''}: no such file (--r1cs needs --zkey "
                  "and --wtns)", file=sys.stderr)
            return 2
    circuit_args = ["--r1cs", str(args.r1cs), "--zkey", str(args.zkey)]
    try:
        row = _cli_runs(args.r1cs.stem, circuit_args, args.zkey, args.wtns, args.repeat, snarkjs)
    except CuzkError as e:
        print(f"cuzk bench prover: {e}", file=sys.stderr)
        return 1
    row = {"circuit": str(args.r1cs), **row}
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "results": [row]}, indent=1) + "\n")
    return 0


def _cli_runs(name: str, circuit_args: list[str], zkey: Path, wtns: Path, repeat: int,
              snarkjs: str | None) -> dict[str, Any]:
    """``repeat`` interleaved pairs of whole processes: ``cuzk prove <circuit_args> --wtns``
    (start-up, key load and checks included), then ``snarkjs groth16 prove`` on the same files."""
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cuzk_cmd = python_module_command("cuzk.cli.main", "prove", *circuit_args, "--wtns",
                                         str(wtns), "--backend", "cpu", "--out", str(work))
        for i in range(repeat):
            load = _load()
            t0 = time.perf_counter()
            out = subprocess.run(cuzk_cmd, capture_output=True, text=True)
            if out.returncode != 0:
                said = (out.stderr.strip() or out.stdout.strip()).splitlines()
                raise CuzkError(f"{name}: cuzk prove exited {out.returncode}"
                                + (f": {said[-1]}" if said else ""))
            run: dict[str, Any] = {"cuzk_ms": (time.perf_counter() - t0) * 1e3, "load_1m": load,
                                   "cuzk_steps": out.stdout.strip().splitlines()[-1]}
            if snarkjs:
                run["snarkjs_ms"] = _snarkjs_cli_prove(snarkjs, zkey, wtns, work) * 1e3
                run["speedup"] = run["snarkjs_ms"] / run["cuzk_ms"]
            runs.append(run)
            _print_run(name, i, run)
            print(f"  {run['cuzk_steps']}", flush=True)
    row: dict[str, Any] = {"mode": "cli", "runs": runs, **_spread(runs, "cuzk_ms")}
    if snarkjs:
        row |= _spread(runs, "speedup")
        print(f"{name}: speedup x{row['speedup_min']:.2f}..x{row['speedup_max']:.2f} "
              f"(median x{row['speedup_median']:.2f}) over {len(runs)} interleaved runs")
    return row


def _configured_kind_row(args: argparse.Namespace, kind: str, snarkjs: str | None
                         ) -> dict[str, Any]:
    """A configured kind as its user proves it: ``cuzk prove KIND --config``, the witness of
    its sample input written once as a .wtns that both provers read."""
    from cuzk.cli._local import pick, zkey_for

    c = pick(argparse.Namespace(kind=kind, r1cs=None, wasm=None, zkey=None,
                                config=args.config, keys_dir=args.keys_dir))
    if c.sample_input is None:
        raise CuzkError(f"proof kind {kind} has no sample_input to prove: set one in the "
                        "config, or bench it with --r1cs/--zkey/--wtns")
    zkey = zkey_for(c)
    circuit = Circuit.load(c.r1cs, c.wasm, kind)
    inputs = json.loads(Path(c.sample_input).read_text())
    with tempfile.TemporaryDirectory() as tmp:
        wtns = Path(tmp) / f"{kind}.wtns"
        write_wtns(wtns, circuit.calculate_witness(inputs), circuit.r1cs.curve)
        circuit_args = [kind, "--zkey", str(zkey)]
        config = args.config or os.environ.get("CUZK_CONFIG")
        if config:
            circuit_args += ["--config", str(config)]
        row = _cli_runs(kind, circuit_args, zkey, wtns, args.repeat, snarkjs)
    return {"proof_kind": kind, "configured": True, **row}


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
    machine = _machine()
    print("cuzk CPU prover: {cores} cores, msm={msm}, qap={qap}, field multiply {field_arith} "
          "(cpu has bmi2+adx: {cpu_has_bmi2_adx})".format(**machine), flush=True)
    if args.r1cs is not None:
        return _run_user_circuit(args, snarkjs, machine)
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
            zkey = ensure_zkey(kind, Path(c.r1cs_path), args.keys_dir or DEFAULT_KEYS_DIR)
            t_load = time.perf_counter()
            key = ProvingKey.load(zkey, tables=_tables(args.msm_precompute, zkey))
            load_ms = (time.perf_counter() - t_load) * 1e3
            print(f"{kind}: key loaded in {load_ms:.0f} ms, msm tables "
                  + (f"{key.table_bytes / 2**20:.1f} MiB" if key.tables else "off"), flush=True)
            circuit = Circuit.load(c.r1cs_path, c.wasm_path, kind)
            circuit.check_key(key)
            inputs = json.loads(Path(c.sample_input_path).read_text())
            prove_timed(key, circuit, inputs, backend)  # warm-up: numba JIT, thread pools
        except CuzkError as e:
            print(f"cuzk bench prover: {kind}: {e}", file=sys.stderr)
            return 1
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            wtns = work / "witness.wtns"
            write_wtns(wtns, circuit.calculate_witness(inputs), key.curve)
            runs, ours = [], []
            for i in range(args.repeat):  # interleaved: both provers see the same load
                load = _load()
                times = prove_timed(key, circuit, inputs, backend)[1]
                ours.append(times)
                run: dict[str, Any] = {
                    "cuzk_ms": times.total_s * 1e3, "load_1m": load,
                    "synthesize_ms": times.synthesize_s * 1e3,
                    "gpu_phase_ms": times.gpu_phase_s * 1e3,
                    "finalize_ms": times.finalize_s * 1e3,
                }
                if snarkjs:
                    warm = _snarkjs_warm_prove(zkey, wtns, 1)
                    cli = None if warm else _snarkjs_cli_prove(snarkjs, zkey, wtns, work)
                    run["snarkjs_ms"] = (warm[0] if warm else cli or 0.0) * 1e3
                    run["snarkjs_in_process"] = bool(warm)
                    run["speedup"] = run["snarkjs_ms"] / run["cuzk_ms"]
                runs.append(run)
                _print_run(kind, i, run)
            row: dict[str, Any] = {
                "proof_kind": kind,
                "domain_size": key.sizes.domain_size,
                "n_vars": key.sizes.n_vars,
                "key_load_ms": load_ms,
                "msm_table_bytes": key.table_bytes,
                "synthesize_ms": statistics.median(t.synthesize_s for t in ours) * 1e3,
                "gpu_phase_ms": statistics.median(t.gpu_phase_s for t in ours) * 1e3,
                "finalize_ms": statistics.median(t.finalize_s for t in ours) * 1e3,
                "cuzk_ms": statistics.median(t.total_s for t in ours) * 1e3,
                "runs": runs,
            }
            if snarkjs:
                cli_ms = _snarkjs_cli_prove(snarkjs, zkey, wtns, work) * 1e3
                sj_proof = json.loads((work / "sj_proof.json").read_text())
                sj_public = json.loads((work / "sj_public.json").read_text())
                row["snarkjs_proof_verifies"] = verify(key.verification_key, sj_proof, sj_public)
                row["snarkjs_cli_ms"] = cli_ms
                row["snarkjs_ms"] = statistics.median(r["snarkjs_ms"] for r in runs)
                row["snarkjs_in_process"] = all(r["snarkjs_in_process"] for r in runs)
                row |= _spread(runs, "speedup")
                row["speedup"] = row["speedup_median"]
        rows.append(row)
    if rows:
        _print_table(console, rows, bool(snarkjs))
    if args.json:
        out = {"machine": machine, "results": rows + cli_rows}
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
