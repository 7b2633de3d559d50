"""Acceptance check 1: the single-process server never imports Ray, ``--cluster`` without Ray
says what to install, and ``cuzk[cluster]`` pins it exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# Runs the real `cuzk serve` path in a fresh interpreter up to the point where uvicorn would
# start serving (replaced by a function that prints the loaded modules and returns).
CODE = """
import json, sys
import cuzk.cli.serve as serve
def run(self, *args, **kwargs):  # serve binds the port itself and passes sockets=[...]
    print("MODULES " + json.dumps(sorted(sys.modules)), flush=True)
serve._Server.run = run
from cuzk.cli.main import main
code = main(["serve", *sys.argv[1:]])
print("EXIT", code, flush=True)
"""


# Prepended to CODE: Ray cannot be imported, as on an install without the cluster extra (CI
# installs it, so a test that needs it absent must take it away).
NO_RAY = """
import importlib.abc, sys
class _NoRay(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "ray" or name.startswith("ray."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _NoRay())
"""


def _serve(tmp_path: Path, *args: str, code: str = CODE) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CUZK_JOURNAL_ENABLED": "false", "CUZK_ENGINE_BACKEND": "cpu",
           "CUZK_TELEMETRY_TRACING": "false", "XDG_STATE_HOME": str(tmp_path),
           "PYTHONPATH": str(ROOT)}
    env.pop("CUZK_CLUSTER_ADDRESS", None)
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=180, env=env, cwd=ROOT)


def test_serve_without_cluster_never_imports_ray(tmp_path: Path) -> None:
    out = _serve(tmp_path, "--listen", "127.0.0.1:0")
    line = next((x for x in out.stdout.splitlines() if x.startswith("MODULES ")), None)
    assert line is not None, out.stdout[-2000:] + out.stderr[-3000:]
    loaded = json.loads(line.removeprefix("MODULES "))
    assert "cuzk.engine.engine" in loaded and "cuzk.api.app" in loaded  # it did get that far
    assert not [m for m in loaded if m == "ray" or m.startswith(("ray.", "cuzk.cluster"))]
    assert "EXIT 0" in out.stdout


def test_serve_with_cluster_but_no_ray_says_what_to_install(tmp_path: Path) -> None:
    """Runs everywhere (Ray installed or not): Ray is made unimportable in the subprocess."""
    out = _serve(tmp_path, "--listen", "127.0.0.1:0", "--cluster", "127.0.0.1:6379",
                 code=NO_RAY + CODE)
    assert "EXIT 2" in out.stdout, out.stdout[-2000:] + out.stderr[-3000:]
    assert ("--cluster needs Ray (No module named 'ray'): install the cluster extra; in the"
            " clone, .venv/bin/pip install -c constraints.txt -e '.[cluster]'") in (
        out.stderr), out.stderr[-3000:]
    assert "MODULES " not in out.stdout  # refused before anything was served


def test_cluster_extra_pins_ray_exactly() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"]["cluster"] == ["ray[default]==2.60.0"]
    assert "ray" not in json.dumps(project["dependencies"])
    # `make test` installs the cluster extra (under the constraints file, which pins Ray the same)
    make = (ROOT / "Makefile").read_text()
    installs = [line for line in make.splitlines() if "pip install" in line and "-e '.[" in line]
    assert installs and all("cluster" in line for line in installs), installs
    constraints = (ROOT / "constraints.txt").read_text().lower().splitlines()
    pins = [line.split("#", 1)[0].strip() for line in constraints if line.startswith("ray")]
    assert all(pin in ("ray==2.60.0", "ray[default]==2.60.0") for pin in pins), pins
