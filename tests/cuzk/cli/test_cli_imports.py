"""``cuzk status`` and ``cuzk submit`` are HTTP clients: starting them imports no prover, no
numba, no engine and no server. (Their import time, ``python -X importtime -c "import
cuzk.cli.status"``, is a figure to measure, not to assert here.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SERVER_SIDE = ("numba", "cuzk.prover", "kernels", "cuzk.engine", "cuzk.telemetry", "cuzk.api",
               "cuzk.circuits", "prometheus_client", "opentelemetry", "starlette", "uvicorn",
               "pydantic", "wasmtime", "py_arkworks_bls12381", "numpy")


@pytest.mark.parametrize("command", ["status", "submit", "get"])
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
