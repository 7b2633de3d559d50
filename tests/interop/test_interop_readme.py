"""README's custom-circuit short path, run as pasted: its commands in order in a directory
holding only the walkthrough's circuit and input (as the README says), `cuzk serve` in the
background (the README runs it in a second terminal), circom2 and snarkjs from node_modules on
PATH (what `make node` installs). The only change is the port: 9820 becomes a free one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests._tools import require_tool
from tests.interop.conftest import cuzk_env, free_port
from tests.interop.test_interop_walkthrough import DOC, README, _path_with_tools, _start_server
from tests.interop.test_interop_walkthrough import blocks as doc_blocks

pytestmark = pytest.mark.integration


def readme_commands() -> list[str]:
    """The indented command lines of README's "Your own circuit", comments cut off."""
    section = README.read_text().split("## Your own circuit", 1)[1].split("\n## ", 1)[0]
    return [ln.strip().split("  #")[0].strip() for ln in section.splitlines()
            if ln.startswith("    ") and ln.strip()]


def test_readme_custom_circuit_path_runs_as_pasted(tmp_path: Path):
    require_tool("curl")
    commands = readme_commands()
    assert commands[0].startswith("circom2 "), "the README compiles with what `make node` installs"
    work = tmp_path / "work"
    work.mkdir()
    for block in doc_blocks(DOC.read_text()):
        if block.tag in ("weighted_sum.circom", "input.json"):
            (work / block.tag).write_text(block.body)
    env = cuzk_env(tmp_path)
    env["PATH"] = _path_with_tools(tmp_path)
    port = str(free_port())
    server = None
    verified = []
    try:
        for command in commands:
            command = command.replace("9820", port)
            if command.startswith("cuzk serve "):
                server = _start_server(command, work, env, port)
                continue
            proc = subprocess.run(["bash", "-c", command], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0 and "Traceback" not in proc.stderr, (
                f"{command}\nexited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
            if "groth16 verify" in command:
                verified.append(proc.stdout)
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=30)
            finally:
                if server.poll() is None:
                    server.kill()
                    server.wait(timeout=10)
    assert server is not None, "the README never starts the server"
    assert len(verified) == 2 and all("OK!" in out for out in verified), verified
    assert (work / "proof.json").is_file() and (work / "proofs" / "proof_1.json").is_file()


def test_readme_first_proof_is_verified_with_snarkjs_as_pasted(tmp_path: Path):
    """"Using it": a server proof checked by snarkjs against the server's verification key,
    the three lines as pasted, run from a directory laid out as the clone is (node_modules)."""
    from tests._tools import NODE_MODULES, node_bin
    from tests.conftest import KEYS_DIR

    require_tool("curl")
    node_bin("snarkjs")
    text = README.read_text().split("## Using it", 1)[1].split("\nWithout a server:", 1)[0]
    block = text.split("against\nthe verification key of the key the server proves with:", 1)[1]
    commands = [ln.strip() for ln in block.splitlines() if ln.startswith("    ")]
    assert [c.split()[0] for c in commands] == ["cuzk", "curl", "node_modules/.bin/snarkjs"]
    work = tmp_path / "work"
    work.mkdir()
    (work / "node_modules").symlink_to(NODE_MODULES)
    env = cuzk_env(tmp_path)
    port = str(free_port())
    env |= {"PATH": _path_with_tools(tmp_path), "CUZK_URL": f"http://127.0.0.1:{port}",
            "CUZK_ENGINE_KEYS_DIR": str(KEYS_DIR), "CUZK_ENGINE_BACKEND": "cpu"}
    server = _start_server(f"cuzk serve --listen 127.0.0.1:{port}", work, env, port)
    try:
        outputs = []
        for command in commands:
            proc = subprocess.run(["bash", "-c", command.replace("9820", port)], cwd=work,
                                  env=env, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0 and "Traceback" not in proc.stderr, (
                f"{command}\nexited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
            outputs.append(proc.stdout)
        assert "OK!" in outputs[-1], outputs
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait(timeout=10)
