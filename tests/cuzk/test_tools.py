"""cuzk/tools.py: a child interpreter running one of cuzk's modules imports the cuzk that the
parent runs, even when started in a directory holding another ``cuzk/`` (a checkout)."""

from __future__ import annotations

import subprocess
import sys

from cuzk import __version__
from cuzk.tools import python_module_command


def test_a_cuzk_directory_in_the_working_directory_does_not_shadow_the_package(tmp_path):
    shadow = tmp_path / "cuzk"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('the checkout shadowed cuzk')\n")
    # The shadow is real: a plain ``python -m`` started there imports it and fails.
    plain = subprocess.run([sys.executable, "-m", "cuzk.cli.main", "--version"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert plain.returncode != 0 and "the checkout shadowed cuzk" in plain.stderr
    command = python_module_command("cuzk.cli.main", "--version")
    assert command[0] == sys.executable
    out = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == f"cuzk {__version__}"
    assert "Traceback" not in out.stderr
