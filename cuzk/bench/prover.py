"""The prover bench (``cuzk bench prover``): cuzk's CPU prover against ``snarkjs groth16 prove``
on the same zkey and witness, runs interleaved so both see the same machine load.

Two ways to prove. A bundled kind is proven in this process (key loaded once, a warm-up proof
for numba's JIT and the thread pools, then ``repeat`` timed proofs, each followed by one warm
snarkjs proof in a node process, or a snarkjs CLI run where the warm timer is unavailable): the
row has each step's median. A configured kind or a circuit of one's own is proven as whole
processes (``cuzk prove ... --wtns`` against ``snarkjs groth16 prove``), start-up and key load
included. Progress lines go to ``echo``; ``cuzk.cli.bench`` checks the arguments and prints the
rows and the table.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from cuzk.bench import Echo, quiet
from cuzk.errors import CuzkError
from cuzk.formats.wtns import write_wtns
from cuzk.prover.circuit import Circuit
from cuzk.prover.cpu_backend import CpuBackend
from cuzk.prover.keys import ProvingKey
from cuzk.prover.keystore import ensure_zkey
from cuzk.prover.session import prove_timed
from cuzk.prover.verify import verify
from cuzk.tools import python_module_command, snarkjs_timer_script


def snarkjs_cli_prove(snarkjs: str, zkey: Path, wtns: Path, workdir: Path) -> float:
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


def snarkjs_warm_prove(zkey: Path, wtns: Path, repeat: int) -> list[float]:
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


def tables_wanted(mode: str, zkey: Path) -> bool:
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


def machine() -> dict[str, Any]:
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


def run_line(kind: str, i: int, run: dict[str, Any]) -> str:
    """The progress line of one interleaved run."""
    sj = ""
    if "snarkjs_ms" in run:
        sj = f"snarkjs {run['snarkjs_ms']:.0f} ms  x{run['speedup']:.2f}  "
    return f"{kind} run {i + 1}: cuzk {run['cuzk_ms']:.0f} ms  {sj}load {run['load_1m']:.2f}"


def cli_runs(name: str, circuit_args: list[str], zkey: Path, wtns: Path, repeat: int,
             snarkjs: str | None, echo: Echo = quiet) -> dict[str, Any]:
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
                run["snarkjs_ms"] = snarkjs_cli_prove(snarkjs, zkey, wtns, work) * 1e3
                run["speedup"] = run["snarkjs_ms"] / run["cuzk_ms"]
            runs.append(run)
            echo(run_line(name, i, run))
            echo(f"  {run['cuzk_steps']}")
    row: dict[str, Any] = {"mode": "cli", "runs": runs, **_spread(runs, "cuzk_ms")}
    if snarkjs:
        row |= _spread(runs, "speedup")
        echo(f"{name}: speedup x{row['speedup_min']:.2f}..x{row['speedup_max']:.2f} "
             f"(median x{row['speedup_median']:.2f}) over {len(runs)} interleaved runs")
    return row


def configured_kind_row(kind: str, r1cs: Path, wasm: Path | None, zkey: Path,
                        sample_input: Path, config: str | None, repeat: int,
                        snarkjs: str | None, echo: Echo = quiet) -> dict[str, Any]:
    """A configured kind as its user proves it: ``cuzk prove KIND --config``, the witness of
    its sample input written once as a .wtns that both provers read."""
    circuit = Circuit.load(r1cs, wasm, kind)
    inputs = json.loads(Path(sample_input).read_text())
    with tempfile.TemporaryDirectory() as tmp:
        wtns = Path(tmp) / f"{kind}.wtns"
        write_wtns(wtns, circuit.calculate_witness(inputs), circuit.r1cs.curve)
        circuit_args = [kind, "--zkey", str(zkey)]
        if config:
            circuit_args += ["--config", str(config)]
        row = cli_runs(kind, circuit_args, zkey, wtns, repeat, snarkjs, echo)
    return {"proof_kind": kind, "configured": True, **row}


def bundled_kind_row(kind: str, r1cs: Path, wasm: Path, sample_input: Path, keys_dir: Path,
                     msm_precompute: str, repeat: int, snarkjs: str | None,
                     backend: CpuBackend, echo: Echo = quiet) -> dict[str, Any]:
    """A bundled kind proven in this process, ``repeat`` runs interleaved with snarkjs's; the
    row has each step's median (and snarkjs's, its own proof checked by cuzk verify)."""
    zkey = ensure_zkey(kind, Path(r1cs), keys_dir)
    t_load = time.perf_counter()
    key = ProvingKey.load(zkey, tables=tables_wanted(msm_precompute, zkey))
    load_ms = (time.perf_counter() - t_load) * 1e3
    echo(f"{kind}: key loaded in {load_ms:.0f} ms, msm tables "
         + (f"{key.table_bytes / 2**20:.1f} MiB" if key.tables else "off"))
    circuit = Circuit.load(r1cs, wasm, kind)
    circuit.check_key(key)
    inputs = json.loads(Path(sample_input).read_text())
    prove_timed(key, circuit, inputs, backend)  # warm-up: numba JIT, thread pools
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        wtns = work / "witness.wtns"
        write_wtns(wtns, circuit.calculate_witness(inputs), key.curve)
        runs, ours = [], []
        for i in range(repeat):  # interleaved: both provers see the same load
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
                warm = snarkjs_warm_prove(zkey, wtns, 1)
                cli = None if warm else snarkjs_cli_prove(snarkjs, zkey, wtns, work)
                run["snarkjs_ms"] = (warm[0] if warm else cli or 0.0) * 1e3
                run["snarkjs_in_process"] = bool(warm)
                run["speedup"] = run["snarkjs_ms"] / run["cuzk_ms"]
            runs.append(run)
            echo(run_line(kind, i, run))
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
            cli_ms = snarkjs_cli_prove(snarkjs, zkey, wtns, work) * 1e3
            sj_proof = json.loads((work / "sj_proof.json").read_text())
            sj_public = json.loads((work / "sj_public.json").read_text())
            row["snarkjs_proof_verifies"] = verify(key.verification_key, sj_proof, sj_public)
            row["snarkjs_cli_ms"] = cli_ms
            row["snarkjs_ms"] = statistics.median(r["snarkjs_ms"] for r in runs)
            row["snarkjs_in_process"] = all(r["snarkjs_in_process"] for r in runs)
            row |= _spread(runs, "speedup")
            row["speedup"] = row["speedup_median"]
    return row


_SIZE_ORDER = ("winning-post", "snap-update", "window-post", "porep-c2")


def size_order(kind: str) -> int:
    """Smallest circuit first, so the largest (the one the target is about) prints last."""
    return _SIZE_ORDER.index(kind) if kind in _SIZE_ORDER else len(_SIZE_ORDER)
