"""Run in a fresh process (``python -m tests.cuzk.prover._ledger_probe DIR``): load a synthetic
circuit's kind the way the server does and prove it once, and print, as JSON, what the ledger
charges for the kind beside what the process's RSS grew by.

The synthetic circuit has no witness generator: the kind's circuit is what ``RealProver.circuit``
keeps (the r1cs header) without one, and the proof starts from its ``witness.wtns``
(``_generator_probe`` measures the bundled kinds with theirs).
"""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuzk.engine.backend import KeyHandle
    from cuzk.prover.real_prover import RealProver


def rss(field: str = "VmRSS:") -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux clear_refs 5), so the peak is this step's."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _prover(directories: dict[str, Path]) -> RealProver:
    from cuzk.engine.settings import EngineSettings, ProofKindSettings
    from cuzk.prover.real_prover import RealProver

    kinds = {name: ProofKindSettings(name, 1, "normal", r1cs=d / "circuit.r1cs",
                                     wasm=d / "no.wasm", zkey=d / "circuit.zkey")
             for name, d in directories.items()}
    return RealProver(EngineSettings(backend="cpu", proof_kinds=kinds))


class _NoWitnessGenerator:
    """Stands in for the wasm witness generator a synthetic circuit does not have (its sizes
    from the r1cs header; it computes nothing: the proof starts from the circuit's .wtns)."""

    working_bytes = 0  # it computes nothing

    def __init__(self, wasm_path: object, cache_dir: object = None) -> None:
        from cuzk.formats.r1cs import read_r1cs

        header = read_r1cs(Path(str(wasm_path)).with_name("circuit.r1cs"), load_constraints=False)
        self.path = str(wasm_path)
        self.n_vars = header.n_wires
        self.curve = header.curve


def _load(prover: RealProver, name: str) -> KeyHandle:
    """``load_key`` as the server runs it (the kind's circuit loaded by ``RealProver.circuit``),
    the witness generator aside."""
    import cuzk.witness.wasm

    real = cuzk.witness.wasm.WitnessCalculator
    cuzk.witness.wasm.WitnessCalculator = _NoWitnessGenerator  # type: ignore[assignment, misc]
    try:
        return prover.load_key(name)
    finally:
        cuzk.witness.wasm.WitnessCalculator = real  # type: ignore[misc]


def trim_heap() -> None:
    """Return freed heap to the system (glibc), so RSS reads what is in use."""
    import ctypes

    ctypes.CDLL("libc.so.6").malloc_trim(0)


def _prove(prover: RealProver, handle: KeyHandle, directory: Path) -> None:
    from cuzk.formats.wtns import read_wtns
    from cuzk.prover.groth16 import synthesize_from_witness

    witness = read_wtns(directory / "witness.wtns").values
    synth = synthesize_from_witness(handle.key.key, witness)
    handle.key.circuit.check_satisfied(witness, synth.abc[2], handle.key.terms)
    out = prover.gpu_phase(handle, synth, "cpu")
    prover.release_abc(synth)
    prover.finalize(handle, synth, out)


def main(directory: Path, warm_up: Path) -> dict[str, int | bool]:
    """``warm_up``: a small circuit loaded and proven first, so what the process sets up once
    (libraries, thread pools, their stacks) is not put on the measured kind."""
    import numpy as np

    prover = _prover({"warm-up": warm_up, "measured": directory})
    warm = _load(prover, "warm-up")
    _prove(prover, warm, warm_up)
    prover.unload_key(warm)
    del warm
    ledger = prover.key_bytes_hint("measured")  # what the budget charges before the load
    gc.collect()
    trim_heap()
    before = rss()
    handle = _load(prover, "measured")
    gc.collect()
    loaded = rss() - before
    kept = prover.circuit("measured").r1cs
    peaked = reset_peak()
    _prove(prover, handle, directory)
    peak = rss("VmHWM:") - before
    gc.collect()
    trim_heap()
    proven = rss() - before
    stats = {"host_bytes": handle.host_bytes, "working_bytes": handle.estimate.partition_bytes,
             "check_terms_bytes": handle.key.terms.nbytes}
    prover.unload_key(handle)
    del handle
    gc.collect()
    trim_heap()
    return {
        "ledger_key_bytes": ledger,
        **stats,
        "rss_after_load": loaded,
        "rss_after_proof": proven,
        "rss_peak_in_proof": peak if peaked else -1,
        "rss_after_unload": rss() - before,
        "circuit_keeps_terms": kept.constraints is not None,
        "circuit_file_read": not isinstance(kept._file.data, np.memmap),
    }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2]))))
