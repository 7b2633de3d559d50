"""What refusing a hostile submit body costs the server: seconds per request, over the real app.

Usage: python benchmarks/bench_submit_validation.py [--repeat 3]
Two servers: one over the real prover (bundled winning-post and porep-c2: a body is bounded by
what their circuits can take) and one over the scripted prover (no circuit to read: only
server.max_body_bytes, 8 MiB, bounds the body, so every body below is parsed and validated).
Prints the status and the min/max seconds of each case; the tests assert behaviour, never
timings.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from collections.abc import Callable

from starlette.exceptions import StarletteDeprecationWarning

with warnings.catch_warnings():
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from starlette.testclient import TestClient

from cuzk.api.app import create_app
from cuzk.engine.engine import Engine
from cuzk.engine.settings import EngineSettings, ProofKindSettings, default_proof_kinds
from cuzk.prover.real_prover import RealProver
from cuzk.simulated_prover import ScriptedProver

N = 10**6
CASES: dict[str, Callable[[], bytes]] = {
    "10^6-element signal array": lambda: json.dumps(
        {"proof_kind": "winning-post", "inputs": [{"leaf": [1] * N}]}).encode(),
    "10^6 non-object inputs": lambda: json.dumps(
        {"proof_kind": "winning-post", "inputs": [5] * N}).encode(),
    "10^6 empty partition objects": lambda: json.dumps(
        {"proof_kind": "winning-post", "inputs": [{}] * N}).encode(),
    "10^5 unknown fields": lambda: json.dumps(
        {"proof_kind": "winning-post", "inputs": [{}], **{f"f{i}": 1 for i in range(10**5)}}
    ).encode(),
}


def _measure(client: TestClient, body: bytes, repeat: int) -> tuple[int, float, float]:
    times, status = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = client.post("/v1/proofs", content=body, headers={"content-type": "application/json"})
        times.append(time.perf_counter() - t0)
        status = r.status_code
    return status, min(times), max(times)


def _run(label: str, engine: Engine, repeat: int) -> None:
    with TestClient(create_app(engine)) as client:
        for name, build in CASES.items():
            body = build()
            status, lo, hi = _measure(client, body, repeat)
            print(f"{label:9} {name:30} {len(body) / 1e6:5.1f} MB  {status}  {lo:.3f}-{hi:.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    repeat = ap.parse_args().repeat
    print(f"load average {os.getloadavg()[0]:.1f}, {repeat} runs each")
    kinds = default_proof_kinds()
    settings = EngineSettings(
        backend="cpu", synthesis_threads=1, finalizer_threads=1, memory_budget_bytes=1 << 33,
        proof_kinds={k: kinds[k] for k in ("winning-post", "porep-c2")},
    )
    real = Engine(settings, RealProver(settings)).start()
    try:
        _run("real", real, repeat)
    finally:
        real.shutdown(timeout=10)
    scripted_settings = EngineSettings(
        backend="cpu", synthesis_threads=1, finalizer_threads=1, memory_budget_bytes=1 << 33,
        proof_kinds={"winning-post": ProofKindSettings("winning-post", 1, "critical")},
    )
    scripted = Engine(scripted_settings, ScriptedProver()).start()
    try:
        _run("scripted", scripted, repeat)
    finally:
        scripted.shutdown(timeout=10)


if __name__ == "__main__":
    main()
