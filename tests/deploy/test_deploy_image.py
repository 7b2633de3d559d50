"""The image's filesystem layout and entrypoint, built here as far as Docker-less CI allows.

There is no Docker engine in CI, so the test lays out what the Dockerfile creates (the cuzk
user's home with the directories `install -d -o cuzk` makes, as a fresh named volume would
hold them) in a temporary directory, and runs the image's entrypoint there as an unprivileged
user with the Dockerfile's environment: it must serve, generate a proving key into the volume
and prove a job. A volume the engine cannot write is refused at start with a message that says
which directory (the shipped image used to fail every job with a PermissionError instead).

Run as root (as CI is), the entrypoint runs as uid 65534 through setpriv, keeping only
CAP_DAC_READ_SEARCH so that it can read this machine's Python under /root; writes are checked
as for any unprivileged user, which is what the test is about.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from tests.deploy._deploy_util import ROOT, free_port, require_tool

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DOCKERFILE = (ROOT / "Dockerfile").read_text()
ENTRYPOINT = ROOT / "deploy" / "docker" / "entrypoint.sh"
HOME = re.search(r"--home-dir (\S+)", DOCKERFILE).group(1)
UNPRIVILEGED = 65534  # nobody, when the tests run as root (CI does)


def _image_env() -> dict[str, str]:
    """The ENV the Dockerfile sets after creating the user (KEY=VALUE pairs)."""
    block = DOCKERFILE[DOCKERFILE.index("USER cuzk"):]
    env = {}
    for m in re.finditer(r"^ENV ((?:.*\\\n)*.*)$", block, flags=re.M):
        env.update(re.findall(r"(\w+)=(\S+)", m.group(1).replace("\\\n", " ")))
    return env


def _uid() -> int:
    return UNPRIVILEGED if os.geteuid() == 0 else os.geteuid()


@pytest.fixture
def volume():
    """A fresh copy of the image's /var/lib/cuzk, owned by the user the engine runs as."""
    top = Path(tempfile.mkdtemp(prefix="cuzk-image-"))
    top.chmod(0o755)  # traversable by the unprivileged user
    home = top / HOME.lstrip("/")
    home.mkdir(parents=True)
    made = re.search(r"install -d -o cuzk -g cuzk -m (\d+) (.+)", DOCKERFILE)
    for path in made.group(2).split():
        d = top / path.lstrip("/")
        d.mkdir(parents=True, exist_ok=True)
        d.chmod(int(made.group(1), 8))
    if os.geteuid() == 0:
        for d in [home, *home.rglob("*")]:
            os.chown(d, UNPRIVILEGED, UNPRIVILEGED)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _start(top: Path, port: int) -> tuple[subprocess.Popen, dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUZK_", "OTEL_", "XDG_"))}
    for key, value in _image_env().items():
        env[key] = str(top / value.lstrip("/")) if value.startswith("/var/") else value
    env.update({
        "CUZK_SERVER_LISTEN": f"127.0.0.1:{port}",
        "CUZK_ENGINE_BACKEND": "cpu",
        "OTEL_TRACES_EXPORTER": "none",
        "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}",
        "PYTHONPATH": str(ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    cmd = ["/bin/sh", str(ENTRYPOINT), "serve"]
    if os.geteuid() == 0:
        cmd = [require_tool("setpriv"), f"--reuid={UNPRIVILEGED}", f"--regid={UNPRIVILEGED}",
               "--clear-groups", "--inh-caps=+dac_read_search",
               "--ambient-caps=+dac_read_search", *cmd]
    proc = subprocess.Popen(cmd, env=env, cwd=top, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    return proc, env


def _http(url: str, body: dict | None = None, timeout: float = 30) -> dict:
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"},
                                 method="GET" if body is None else "POST")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read() or b"{}")


def test_image_env_points_into_the_home_volume():
    env = _image_env()
    assert env["HOME"] == HOME
    assert env["CUZK_ENGINE_KEYS_DIR"].startswith(HOME + "/")
    assert env["XDG_STATE_HOME"].startswith(HOME + "/")


def test_entrypoint_as_unprivileged_user_proves_a_job_on_a_fresh_volume(volume):
    port = free_port()
    proc, env = _start(volume, port)
    base = f"http://127.0.0.1:{port}"
    try:
        # A fresh volume has no numba cache: the engine compiles its CPU kernels before it
        # answers (tens of seconds on a loaded 2-core machine), so its first job is not late.
        deadline = time.monotonic() + 240
        while True:
            assert proc.poll() is None, f"entrypoint exited {proc.returncode}: {proc.stdout.read()}"
            try:
                _http(f"{base}/readyz", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline, "engine never became ready"
                time.sleep(0.3)
        inputs = [json.loads((ROOT / "cuzk/circuits/data/winning-post/input.json").read_text())]
        job = _http(f"{base}/v1/proofs", {"proof_kind": "winning-post", "inputs": inputs})
        done = _http(f"{base}/v1/proofs/{job['id']}?wait=120", timeout=130)
        assert done["state"] == "succeeded", done
        keys = Path(env["CUZK_ENGINE_KEYS_DIR"])
        made = [p for p in keys.iterdir() if p.suffix == ".zkey"]
        assert made, "no proving key generated into the volume"
        assert all(p.stat().st_uid == _uid() for p in made)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    assert proc.returncode == 0, out


def test_entrypoint_refuses_a_volume_it_cannot_write(volume):
    keys = volume / _image_env()["CUZK_ENGINE_KEYS_DIR"].lstrip("/")
    if os.geteuid() == 0:
        os.chown(keys, 0, 0)  # what Docker makes of a path the image did not create
        keys.chmod(0o755)
    else:
        keys.chmod(0o555)
    proc, _ = _start(volume, free_port())
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 73, out
    assert f"{keys} is not writable by uid {_uid()}" in out
    assert "chown" in out
