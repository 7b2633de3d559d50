"""Run in a fresh process (``python -m tests.cuzk.prover._generator_probe KEYS_DIR CACHE``):
serve the bundled kinds the way the server does, with their wasm witness generators, and print
as JSON what the process's RSS grew by beside what the ledger charges (issue 27).

- ``runtime``: the wasm runtime, paid once by the first generator that runs, against the
  engine's fixed ``prover_runtime`` reservation (``runtime_host_bytes``).
- per kind, after its first submit's input check (the generator built and run once), with no
  key loaded: what the kind holds for its generator, which the ledger charges nothing for.
- per kind, loaded and proven through ``RealProver.synthesize`` (the generator computing the
  witness): RSS held with the key resident against the key's charge, and the proof's peak
  against the key plus one partition's reservation.
"""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path
from typing import Any

from tests.cuzk.prover._ledger_probe import reset_peak, rss, trim_heap

KINDS = ("winning-post", "snap-update", "window-post", "porep-c2")


def _settled() -> int:
    gc.collect()
    trim_heap()
    return rss()


def main(keys_dir: Path, warm_up: str = "winning-post") -> dict[str, Any]:
    from cuzk.circuits.registry import bundled_circuits
    from cuzk.engine.settings import EngineSettings, default_proof_kinds
    from cuzk.prover.real_prover import RealProver

    prover = RealProver(
        EngineSettings(backend="cpu", proof_kinds=default_proof_kinds(), keys_dir=keys_dir)
    )
    samples = {k: json.loads(bundled_circuits()[k].sample_input_path.read_text()) for k in KINDS}
    out: dict[str, Any] = {"runtime_charge": getattr(prover, "runtime_host_bytes", lambda: 0)()}
    before = _settled()
    prover.check_inputs(warm_up, [samples[warm_up]])
    out["runtime"] = _settled() - before
    # The process's own one-off set-up (thread pools, arenas) on a proof of the warm-up kind.
    _prove(prover, warm_up, samples[warm_up])
    kinds: dict[str, dict[str, int]] = {}
    for kind in KINDS:
        if kind == warm_up:
            continue
        before = _settled()
        prover.check_inputs(kind, [samples[kind]])
        checked = _settled() - before
        figures = _prove(prover, kind, samples[kind])
        kinds[kind] = {"generator_held": checked, **figures}
    out["kinds"] = kinds
    return out


def _prove(prover: Any, kind: str, inputs: dict[str, Any]) -> dict[str, int]:
    """Load, prove once the way the engine does (witness from the generator), unload."""
    hint = prover.key_bytes_hint(kind)
    before = _settled()
    handle = prover.load_key(kind)
    peaked = reset_peak()
    synth = prover.synthesize(handle, inputs)
    out = prover.gpu_phase(handle, synth, "cpu")
    prover.release_abc(synth)
    prover.finalize(handle, synth, out)
    peak = rss("VmHWM:") - before
    del synth, out
    proven = _settled() - before
    figures = {
        "key_charge": hint,
        "host_bytes": handle.host_bytes,
        "partition_charge": handle.estimate.partition_bytes,
        "rss_after_proof": proven,
        "rss_peak_in_proof": peak if peaked else -1,
    }
    prover.unload_key(handle)
    del handle
    figures["rss_after_unload"] = _settled() - before
    return figures


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
