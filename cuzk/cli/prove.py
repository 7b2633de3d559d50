"""``cuzk prove``: one proof locally, without a server (a proof kind or explicit files).

The arguments are checked completely (files exist, inputs parse, the backend is usable) before
any long work: generating a development key, loading the key, computing the witness.

A zkey and a witness alone are enough (the zkey holds the A and B coefficients, C is a*b), so
rapidsnark's call works as it is: ``cuzk prove CIRCUIT.zkey WITNESS.wtns PROOF.json PUBLIC.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cuzk import progress
from cuzk.cli._local import UsageError, add_circuit_args, pick, zkey_for
from cuzk.cli._local_results import ProveResult, Timings, add_json_argument, base, finish
from cuzk.cli._output import check_output_dir, check_output_file, write_text
from cuzk.errors import CuzkError, FormatError
from cuzk.files import not_a_file

if TYPE_CHECKING:
    from cuzk.config import ProverConfig
    from cuzk.formats.wtns import Witness
    from cuzk.prover.keys import ProvingKey

BACKENDS = ("auto", "cpu", "cuda")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "prove",
        help="prove one partition locally and write proof.json / public.json",
        description="Prove one partition without a server: a proof kind (bundled, or from"
        " --config), or a circuit given as --r1cs with --wasm. The witness is computed from"
        " --input, or read from --wtns (made by any generator: snarkjs, circom's C++ one)."
        " A zkey and a witness alone also prove (--zkey with --wtns, no --r1cs: the key holds"
        " the constraints' coefficients), and so does rapidsnark's call as it is:"
        " `cuzk prove CIRCUIT.zkey WITNESS.wtns PROOF.json PUBLIC.json`.",
    )
    add_circuit_args(p)
    p.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="rapidsnark's order, after CIRCUIT.zkey in KIND's place: WITNESS.wtns PROOF.json"
        " PUBLIC.json",
    )
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
        "--out", type=Path, default=None,
        help="directory for proof.json and public.json (default: the current directory)",
    )
    p.add_argument(
        "-v",
        "--verbose",
        dest="detail",
        action="store_true",
        help="also say how the CPU prover runs: its field multiply, cores, MSM implementation",
    )
    add_json_argument(p)
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


def prove_result() -> ProveResult:
    return {**base("prove"), "name": None, "zkey": None, "development_key": None,
            "backend": None, "proof": None, "public": None, "public_signals": None,
            "verified": None, "timings_ms": None}


def run(args: argparse.Namespace) -> int:
    result = prove_result()
    try:
        _run(args, result)
    except CuzkError as e:
        return finish(args, result, 2, str(e))
    return finish(args, result, 0)


RAPIDSNARK_FORM = "cuzk prove CIRCUIT.zkey WITNESS.wtns PROOF.json PUBLIC.json"


def _outputs(args: argparse.Namespace) -> tuple[Path, Path]:
    """Where proof.json and public.json go. Rapidsnark's positional form is turned into
    ``--zkey``/``--wtns`` here (KIND is then the zkey); any option it would clash with is
    refused rather than silently ignored."""
    rapid = bool(args.files) or (args.kind is not None and args.kind.endswith(".zkey"))
    if not rapid:
        out = args.out or Path(".")
        check_output_dir(out, "--out")
        return out / "proof.json", out / "public.json"
    if not args.kind.endswith(".zkey") and not Path(args.kind).is_file():
        raise UsageError(
            f"unexpected argument {args.files[0]} after proof kind {args.kind}"
            f" (rapidsnark's order is {RAPIDSNARK_FORM})"
        )
    if len(args.files) != 3:
        given = " ".join([args.kind, *args.files])
        raise UsageError(f"{given}: expected four files in rapidsnark's order: {RAPIDSNARK_FORM}")
    for flag in ("zkey", "wtns", "input", "wasm", "out"):
        if getattr(args, flag) is not None:
            raise UsageError(
                f"--{flag} does not go with rapidsnark's form ({RAPIDSNARK_FORM}): the four"
                " files name the key, the witness and both outputs"
            )
    args.zkey, args.wtns, args.kind = Path(args.kind), Path(args.files[0]), None
    args.labels = {"zkey": "CIRCUIT.zkey", "wtns": "WITNESS.wtns"}
    proof, public = Path(args.files[1]), Path(args.files[2])
    inputs = {args.zkey.resolve(): "CIRCUIT.zkey", args.wtns.resolve(): "WITNESS.wtns"}
    if proof.resolve() == public.resolve():
        raise UsageError(f"PROOF.json and PUBLIC.json are the same file ({proof}): name two")
    for label, path in (("PROOF.json", proof), ("PUBLIC.json", public)):
        if path.resolve() in inputs:
            raise UsageError(
                f"{label} {path} is the {inputs[path.resolve()]} given: writing it would"
                f" destroy it (the order is {RAPIDSNARK_FORM})"
            )
    check_output_file(proof, "PROOF.json")
    check_output_file(public, "PUBLIC.json")
    return proof, public


def _step_printer(wanted: bool, key_load_s: float) -> progress.Sink:
    """The prover's steps on stderr as they pass (on a terminal, or with -v), each with the
    seconds since proving began, so a long proof is not silent; piped without -v, nothing."""
    t0 = time.perf_counter()

    def show(step: str) -> None:
        print(f"  {time.perf_counter() - t0:7.2f}s  {step}", file=sys.stderr, flush=True)

    if not wanted:
        return lambda step: None
    print(f"  key loaded in {key_load_s:.2f}s; proving:", file=sys.stderr, flush=True)
    return show


def _key_only(args: argparse.Namespace) -> bool:
    """A zkey and a witness, no circuit: prove from the key's coefficients alone."""
    return args.r1cs is None and args.kind is None and args.zkey is not None and (
        args.wtns is not None)


def _check_witness_against_key(witness: Witness, key: ProvingKey, wtns: Path) -> np.ndarray:
    """Curve and length of a .wtns against the zkey it is proven with (no r1cs to ask)."""
    if witness.curve is not key.curve:
        raise FormatError(
            wtns, f"is a {witness.curve.name} witness, {key.path} a {key.curve.name} key")
    if len(witness) != key.sizes.n_vars:
        raise FormatError(
            wtns,
            f"has {len(witness)} signals, {key.path} needs {key.sizes.n_vars}: a witness of"
            " another circuit",
        )
    return np.ascontiguousarray(witness.values, dtype=np.uint32)


def _run(args: argparse.Namespace, result: ProveResult) -> None:
    from cuzk.formats.wtns import read_wtns
    from cuzk.prover import native_msm, qap
    from cuzk.prover.circuit import Circuit
    from cuzk.prover.cpu_schedule import cores
    from cuzk.prover.keys import ProvingKey
    from cuzk.prover.session import prove_timed

    startup_s = _process_age_s()
    t_read = time.perf_counter()
    # 1. Everything about the arguments, cheap and before anything long.
    proof_path, public_path = _outputs(args)
    key_only = _key_only(args)
    c = None if key_only else pick(args, need_wasm=args.wtns is None)
    labels = getattr(args, "labels", {"zkey": "--zkey", "wtns": "--wtns"})
    for flag in ("zkey", "wtns") if key_only else ("wtns",) if args.wtns else ():
        problem = not_a_file(getattr(args, flag))
        if problem:
            raise UsageError(f"{labels[flag]} {getattr(args, flag)}: {problem}")
    prover_config = _prover_config(args)
    native_msm.configure(prover_config.field_arith)
    inputs: dict = {}
    witness_file = None
    if args.wtns is not None:
        witness_file = read_wtns(args.wtns)
    else:
        assert c is not None
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
    circuit = witness = None
    if c is not None:
        # A ready witness needs only the r1cs's header before proving: its terms are read if
        # the proof fails its self-check, to say whether the key or the witness is at fault.
        circuit = Circuit.load(c.r1cs, c.wasm if args.wtns is None else None, c.name,
                               constraints=args.wtns is None)
        if witness_file is not None:
            witness = circuit.check_witness(witness_file, args.wtns)

    # 2. The long work: a development key if none is given, loading and checking the key.
    result["name"] = c.name if c is not None else Path(args.zkey).stem
    result["backend"] = backend.name
    result["development_key"] = c is not None and c.zkey is None
    if c is None:
        zkey = args.zkey
    elif c.zkey is not None:
        zkey = c.zkey
    else:
        from cuzk.cli._progress import stage_progress
        from cuzk.prover.keystore import check_keys_dir

        check_keys_dir(c.keys_dir)  # an unwritable cache: said before any progress is drawn
        t_keygen = time.perf_counter()
        with stage_progress("keygen") as tick:
            zkey = zkey_for(c, tick)
        t_read += time.perf_counter() - t_keygen
    result["zkey"] = str(zkey)
    read_s = time.perf_counter() - t_read  # arguments, r1cs, witness (keygen aside)
    t_load = time.perf_counter()
    # One proof per process: "auto" has no budget to weigh and builds no window tables.
    tables = backend.name == "cpu" and native_msm.tables_wanted(
        prover_config.msm_precompute, 0, None)
    key = ProvingKey.load(zkey, tables=tables)  # point sections memory-mapped, checked in place
    if circuit is None:
        assert witness_file is not None
        witness = _check_witness_against_key(witness_file, key, args.wtns)
    elif witness is None:
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
    with progress.reporting(_step_printer(args.detail or sys.stderr.isatty(), load_s)):
        proof, times = prove_timed(key, circuit, inputs, backend, witness=witness,
                                   check_first=False,
                                   source=None if args.wtns is None else str(args.wtns))

    for path, body, what in ((proof_path, proof.proof, "proof"),
                             (public_path, proof.public, "public signals")):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(body, indent=1) + "\n", what)
    result["proof"], result["public"] = str(proof_path), str(public_path)
    result["public_signals"], result["verified"] = proof.public, proof.verified
    t: Timings = {
        "startup": None if startup_s is None else round(startup_s * 1e3, 1),
        "read": round(read_s * 1e3, 1),
        "key_load": round(load_s * 1e3, 1), "synthesize": round(times.synthesize_s * 1e3, 1),
        "gpu_phase": round(times.gpu_phase_s * 1e3, 1),
        "finalize": round(times.finalize_s * 1e3, 1),
    }
    result["timings_ms"] = t
    if args.json:
        return
    startup = "n/a" if t["startup"] is None else f"{t['startup']:.0f}ms"
    print(
        f"{result['name']}: proof verified={proof.verified} backend={backend.name} "
        f"field_arith={native_msm.arith_path() if backend.name == 'cpu' else 'n/a'} "
        f"startup={startup} read={t['read']:.0f}ms key_load={t['key_load']:.0f}ms "
        f"synthesize={t['synthesize']:.0f}ms "
        f"gpu_phase={t['gpu_phase']:.0f}ms finalize={t['finalize']:.0f}ms "
        f"-> {proof_path}"
    )
