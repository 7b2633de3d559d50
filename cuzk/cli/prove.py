"""``cuzk prove``: one proof locally, without a server (a proof kind or explicit files).

The arguments are checked completely (files exist, inputs parse, the backend is usable) before
any long work: generating a development key, loading the key, computing the witness.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuzk.cli._local import UsageError, add_circuit_args, pick, zkey_for
from cuzk.cli._output import check_output_dir, write_text
from cuzk.errors import CuzkError

if TYPE_CHECKING:
    from cuzk.config import ProverConfig

BACKENDS = ("auto", "cpu", "cuda")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "prove",
        help="prove one partition locally and write proof.json / public.json",
        description="Prove one partition without a server: a proof kind (bundled, or from"
        " --config), or a circuit given as --r1cs with --wasm. The witness is computed from"
        " --input, or read from --wtns (made by any generator: snarkjs, circom's C++ one).",
    )
    add_circuit_args(p)
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--input", type=Path, help="input JSON (default: the proof kind's sample input)"
    )
    src.add_argument(
        "--wtns", type=Path, help="a ready witness (.wtns) instead of --input; needs no --wasm"
    )
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="compute backend for the NTT and MSMs: auto = CUDA when usable, else CPU"
        " (default: %(default)s)",
    )
    p.add_argument(
        "--out", type=Path, default=Path("."), help="directory for proof.json and public.json"
    )
    p.add_argument(
        "-v",
        "--verbose",
        dest="detail",
        action="store_true",
        help="also say how the CPU prover runs: its field multiply, cores, MSM implementation",
    )
    p.set_defaults(func=run)


def _process_age_s() -> float | None:
    """Seconds since this process started (Linux), so start-up is reported with the steps."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def _prover_config(args: argparse.Namespace) -> ProverConfig:
    """[prover] from --config / $CUZK_CONFIG and the CUZK_PROVER_* variables."""
    from cuzk.config import ConfigError, load_config

    try:
        config = load_config(args.config or os.environ.get("CUZK_CONFIG") or None,
                             check_files=False)
    except ConfigError as e:
        raise UsageError(str(e)) from None
    return config.prover


def _backend(name: str):
    """The compute backend, refused at once when CUDA is asked for and not there. For ``auto``
    without CuPy the CUDA backend (which imports numba) is not even imported."""
    from cuzk.prover.backend import cupy_installed

    if name == "cuda" or (name == "auto" and cupy_installed()):
        from cuzk.prover.cuda_backend import CudaBackend, cuda_device_count

        if cuda_device_count() > 0:
            return CudaBackend(0)
    if name == "cuda":
        from cuzk.prover.backend import no_cuda

        raise no_cuda("--backend cuda", "--backend auto or cpu")
    from cuzk.prover.cpu_backend import CpuBackend

    return CpuBackend()


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except CuzkError as e:
        print(f"cuzk prove: {e}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from cuzk.formats.wtns import read_wtns
    from cuzk.prover import native_msm, qap
    from cuzk.prover.circuit import Circuit
    from cuzk.prover.cpu_schedule import cores
    from cuzk.prover.keys import ProvingKey
    from cuzk.prover.session import prove_timed

    startup_s = _process_age_s()
    t_read = time.perf_counter()
    # 1. Everything about the arguments, cheap and before anything long.
    c = pick(args, need_wasm=args.wtns is None)
    check_output_dir(args.out, "--out")
    prover_config = _prover_config(args)
    native_msm.configure(prover_config.field_arith)
    inputs: dict = {}
    witness_file = None
    if args.wtns is not None:
        if not args.wtns.is_file():
            raise UsageError(f"--wtns {args.wtns}: no such file")
        witness_file = read_wtns(args.wtns)
    else:
        input_path = args.input or c.sample_input
        if input_path is None:
            raise UsageError(f"--input FILE (or --wtns FILE) is required: {c.name} has no sample")
        try:
            inputs = json.loads(Path(input_path).read_text())
        except OSError as e:
            raise UsageError(f"{input_path}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise UsageError(f"{input_path}: not JSON: {e.msg} at line {e.lineno}") from None
        if not isinstance(inputs, dict):
            raise UsageError(f"{input_path}: expected one JSON object of signal names to values")
    backend = _backend(args.backend)
    # A ready witness needs only the r1cs's header before proving: its terms are read if the
    # proof fails its self-check, to say whether the key or the witness is at fault.
    circuit = Circuit.load(c.r1cs, c.wasm if args.wtns is None else None, c.name,
                           constraints=args.wtns is None)
    witness = None if witness_file is None else circuit.check_witness(witness_file, args.wtns)

    # 2. The long work: a development key if none is given, loading and checking the key.
    if c.zkey is not None:
        zkey = c.zkey
    else:
        from cuzk.cli._progress import stage_progress
        from cuzk.prover.keystore import check_keys_dir

        check_keys_dir(c.keys_dir)  # an unwritable cache: said before any progress is drawn
        t_keygen = time.perf_counter()
        with stage_progress("keygen") as tick:
            zkey = zkey_for(c, tick)
        t_read += time.perf_counter() - t_keygen
    read_s = time.perf_counter() - t_read  # arguments, r1cs, witness (keygen aside)
    t_load = time.perf_counter()
    # One proof per process: "auto" has no budget to weigh and builds no window tables.
    tables = backend.name == "cpu" and native_msm.tables_wanted(
        prover_config.msm_precompute, 0, None)
    key = ProvingKey.load(zkey, tables=tables)  # point sections memory-mapped, checked in place
    if witness is None:
        circuit.check_key(key)
    else:
        circuit.check_key_sizes(key)  # coefficients: only if the proof fails (prove_timed)
    load_s = time.perf_counter() - t_load
    if args.detail:
        print(
            f"cpu prover: msm={'native' if native_msm.available() else 'arkworks'} "
            f"qap={'native' if qap.native() else 'numba'} "
            f"field_arith={native_msm.arith_path()} "
            f"(cpu has bmi2+adx: {'yes' if native_msm.fast_supported() else 'no'}) "
            f"cores={cores()} msm_tables="
            + (f"on ({key.table_bytes / 2**20:.1f} MiB)" if key.tables else
               f"off (msm_precompute={prover_config.msm_precompute})"),
            file=sys.stderr,
        )
    proof, times = prove_timed(key, circuit, inputs, backend, witness=witness, check_first=False)

    args.out.mkdir(parents=True, exist_ok=True)
    write_text(args.out / "proof.json", json.dumps(proof.proof, indent=1) + "\n", "--out")
    write_text(args.out / "public.json", json.dumps(proof.public, indent=1) + "\n", "--out")
    startup = "n/a" if startup_s is None else f"{startup_s * 1e3:.0f}ms"
    print(
        f"{c.name}: proof verified={proof.verified} backend={backend.name} "
        f"field_arith={native_msm.arith_path() if backend.name == 'cpu' else 'n/a'} "
        f"startup={startup} read={read_s * 1e3:.0f}ms key_load={load_s * 1e3:.0f}ms "
        f"synthesize={times.synthesize_s * 1e3:.0f}ms "
        f"gpu_phase={times.gpu_phase_s * 1e3:.0f}ms finalize={times.finalize_s * 1e3:.0f}ms "
        f"-> {args.out / 'proof.json'}"
    )
    return 0
