"""docs/custom-circuits.md, run as written: every ```sh block's commands in order in an empty
directory (the server block in the background), the ```circom / ```json blocks written to the
files they name, the ```toml block compared with what `cuzk circuit add` wrote. The only change
is the port: 9820 becomes a free one. (README's short path is run by tests/docs.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests._tools import NODE_MODULES, node_bin, require_tool
from tests.interop.conftest import cuzk_env, free_port

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "custom-circuits.md"
FENCE = re.compile(r"^```([a-z]+)(?: (\S+))?\n(.*?)^```\n", re.S | re.M)


@dataclass(frozen=True)
class Block:
    lang: str
    tag: str | None
    body: str

    @property
    def commands(self) -> list[str]:
        return [ln for ln in self.body.splitlines() if ln.strip() and not ln.startswith("#")]


def blocks(text: str) -> list[Block]:
    return [Block(m[1], m[2], m[3]) for m in FENCE.finditer(text)]


def _path_with_tools() -> str:
    """cuzk from this venv; snarkjs and circom2 from node_modules (what `make node` installs)."""
    venv_bin = Path(sys.executable).parent
    return os.pathsep.join([str(venv_bin), str(NODE_MODULES / ".bin"), os.environ.get("PATH", "")])


def test_walkthrough_commands_run_as_written(tmp_path: Path):
    node_bin("snarkjs")
    node_bin("circom2")
    require_tool("curl")
    work = tmp_path / "work"
    work.mkdir()
    env = cuzk_env(tmp_path)
    env["PATH"] = _path_with_tools()
    port = str(free_port())
    server = None
    outputs: list[tuple[str, str]] = []
    try:
        for block in blocks(DOC.read_text()):
            if block.lang in ("circom", "json") and block.tag:
                (work / block.tag).write_text(block.body)
            elif block.lang == "toml" and block.tag is None:  # "alone": tested in the CLI
                written = (work / "cuzk.toml").read_text()
                assert block.body.strip() in written, "the doc's table is not what was written"
            elif block.lang == "sh" and block.tag == "server":
                (command,) = block.commands
                server = _start_server(command.replace("9820", port), work, env, port)
            elif block.lang == "sh":
                for command in block.commands:
                    command = command.replace("9820", port)
                    proc = subprocess.run(["bash", "-c", command], cwd=work, env=env,
                                          capture_output=True, text=True, timeout=300)  # fmt: skip
                    assert proc.returncode == 0, (
                        f"{command}\nexited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
                    )
                    outputs.append((command, proc.stdout + proc.stderr))
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=30)
            finally:
                if server.poll() is None:
                    server.kill()
                    server.wait(timeout=10)
    verified = [out for cmd, out in outputs if "groth16 verify" in cmd]
    assert len(verified) == 5 and all("OK!" in out for out in verified)
    assert server is not None, "the walkthrough never started the server"
    assert (work / "proofs" / "proof_1.json").is_file()  # 2 partitions


def _start_server(command: str, cwd: Path, env: dict, port: str) -> subprocess.Popen:
    with open(cwd / "serve.log", "w") as log:
        proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=cwd, env=env,
                                stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, (cwd / "serve.log").read_text()
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "cuzk serve not ready in 60 s"
        time.sleep(0.1)
