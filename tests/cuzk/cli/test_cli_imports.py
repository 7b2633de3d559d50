"""``cuzk status``, ``cuzk submit`` and the other server verbs are HTTP clients: starting them
imports no prover, no numba, no engine and no server. (Their import time, ``python -X
importtime -c "import cuzk.cli.status"``, is a figure to measure, not to assert here.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SERVER_SIDE = ("numba", "cuzk.prover", "kernels", "cuzk.engine", "cuzk.telemetry", "cuzk.api",
               "cuzk.circuits", "prometheus_client", "opentelemetry", "starlette", "uvicorn",
               "pydantic", "wasmtime", "py_arkworks_bls12381", "numpy")


@pytest.mark.parametrize("command", ["status", "submit", "get", "cancel", "workers", "keys"])
def test_client_commands_import_nothing_of_the_server(command: str) -> None:
    code = (
        "import json, sys\n"
        "from cuzk.cli.main import main\n"
        f"try:\n    main([{command!r}, '--help'])\n"
        "except SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert f"usage: cuzk {command}" in out.stdout, out.stderr[-2000:]
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert f"cuzk.cli.{command}" in loaded
    heavy = sorted(m for m in loaded if m.startswith(SERVER_SIDE))
    assert heavy == [], f"cuzk {command} imports {heavy}"


# kernels.curves and kernels._threads are constants and a core count: allowed.
ONE_PROOF_NEEDS_NONE_OF = ("numba", "llvmlite", "kernels.field", "kernels.fr64", "kernels.ntt",
                           "kernels.qap", "kernels.gpu", "wasmtime", "rich", "cuzk.engine.engine",
                           "cuzk.prover.cuda_backend", "cuzk.prover.keygen")


def test_prove_from_a_ready_witness_imports_no_numba_wasm_or_engine(tmp_path) -> None:
    """A one-proof process with the native extensions (what `pip install -e .` builds) proves
    without numba (about 0.9 s of start-up and first dispatch), the wasm runtime, rich or the
    scheduler; the import graph regresses silently unless a test looks."""
    from tests.cuzk.prover.test_prover_keycheck import R1CS, ZKEY

    wtns = R1CS.parent / "tiny.wtns"
    args = ["prove", "--r1cs", str(R1CS), "--zkey", str(ZKEY), "--wtns", str(wtns),
            "--out", str(tmp_path)]
    code = (
        "import json, sys\n"
        "from cuzk.cli.main import main\n"
        f"rc = main({args!r})\n"
        "print(json.dumps([rc, sorted(sys.modules)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    rc, loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert rc == 0, out.stderr[-2000:]
    assert "proof verified=True" in out.stdout
    assert "cuzk.prover._native._msm" in loaded and "cuzk.prover._native._qap" in loaded
    heavy = sorted(m for m in loaded if m.startswith(ONE_PROOF_NEEDS_NONE_OF))
    assert heavy == [], f"cuzk prove --wtns imports {heavy}"
