"""Every command block in README.md and docs/*.md is run by a test, as pasted, in a clean
directory, or is listed in SKIPPED with the reason it cannot run here; a new block that is
neither fails ``test_every_command_block_is_run_or_skipped``, so the docs cannot drift.

What the runner changes, and nothing else: the ports 9820 and 9821 become free loopback ports
(``CUZK_SERVER_LISTEN`` names the first, as ``make serve`` users get 9820 by default); ``HOME``
is a fresh directory whose key cache already holds the bundled development keys (linked from
the suite's KEYS_DIR: generating them is tested elsewhere and costs seconds each);
``CUZK_PROVER_MSM_PRECOMPUTE=off`` (window tables cost seconds at each key load, as in the rest
of the suite); a live view (``cuzk status``) runs for LIVE_S seconds and must still be running;
a ``cuzk serve`` meant for another terminal runs in the background, and the next command waits
until it listens; ``PATH`` holds this venv's ``bin`` and ``node_modules/.bin``, as the README
tells a reader."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests._tools import NODE_MODULES, node_bin, require_tool
from tests.conftest import KEYS_DIR
from tests.docs._blocks import ROOT, Block, blocks, command_blocks, strip_comment
from tests.interop.conftest import free_port

pytestmark = pytest.mark.integration

_GPU_CHECK = "a GPU host and the CUDA toolchain, minutes of kernel builds (docs/gpu-check.md; tests/benchmarks/test_gpu_check.py runs the set-up)"  # noqa: E501
_RAY = "three machines and a Ray cluster; tests/cluster runs the same roles on one box"
_DOCKER = "Docker, which the test machines lack; tests/deploy runs the stack's parts without it"
_BENCH = (
    "minutes each by design (soak --minutes 10, 20 kill -9s, every kind against snarkjs, a 2^20"
    " development key); tests/cuzk/cli/test_cli_bench_*.py, test_cli_custom_circuit.py (bench"
    " prover) and tests/cuzk/circuits/test_synthetic.py run the same commands small"
)
SKIPPED: dict[tuple[str, str], str] = {
    ("README.md", "make test"): "the whole suite: CI runs it",
    ("README.md", ".venv/bin/pip install -c constraints.txt -e '.[gpu]'"): "CUDA 13 wheels for a"
    " GPU host (docs/gpu-check.md)",
    ("README.md", "cuzk circuit synth --constraints-log2 20 --out synth/"): _BENCH,
    ("docs/cpu-prover.md", "cuzk bench prover porep-c2 --repeat 5 --json out.json"): _BENCH,
    ("docs/cluster.md", ".venv/bin/pip install -c constraints.txt -e '.[cluster]'"): "an install"
    " into the venv (network); `make test`'s set-up installs the same extra",
    ("docs/cluster.md", "RAY_USAGE_STATS_ENABLED=0 ray start --head --port=6379"
     " --node-ip-address=10.0.0.1 --dashboard-host=127.0.0.1"): _RAY,
    ("docs/cluster.md", "RAY_USAGE_STATS_ENABLED=0 ray start --address=10.0.0.1:6379"
     " --node-ip-address=10.0.0.2"): _RAY,
    ("docs/cluster.md", "cuzk serve --cluster 10.0.0.1:6379"): _RAY,
    ("docs/gpu-check.md", ".venv/bin/python scripts/build_gpu_kernels.py"): _GPU_CHECK,
    ("docs/gpu-check.md", "bash benchmarks/gpu_check.sh OUT_DIR"): _GPU_CHECK,
    ("docs/operations.md", "docker compose up -d --build"): _DOCKER,
    ("docs/operations.md", "docker compose -f docker-compose.yml -f deploy/docker-compose.cpu.yml"
     " up -d --build"): _DOCKER,
    ("docs/operations.md", "python deploy/grafana/build_dashboards.py"): "rewrites tracked files;"
    " tests/deploy run both generators and fail when a committed file differs",
    ("docs/operations.md", "CUZK_GRAFANA_URL=https://grafana.example.com python"
     " deploy/prometheus/build_rules.py"): _DOCKER,
    ("docs/cli.md", "./circuit_cpp/circuit input_0.json p0.wtns"): "circom's C++ generator,"
    " built per circuit with circom --c and make; tests/cuzk/cli/test_cli_submit_wtns.py submits"
    " a witness another generator (snarkjs wtns calculate) made, the same way",
}  # fmt: skip
RUN_ELSEWHERE = {
    "docs/custom-circuits.md": "tests/interop/test_interop_walkthrough.py runs every sh block"
}
MAKE_SERVE = ("README.md", "make serve")
USING = ("README.md", "cuzk submit winning-post --out proofs/")
LOCAL = ("README.md", "cuzk prove window-post --out out/")
MEMORY = ("README.md", "CUZK_ENGINE_MEMORY_BUDGET_BYTES=30000000 cuzk serve")
OWN = ("README.md", "circom2 weighted_sum.circom --prime bls12381 --r1cs --wasm --sym")
SEND = ("docs/operations.md", "python3 - <<'EOF'")
RUN_HERE: dict[tuple[str, str], str] = {
    MAKE_SERVE: "test_readme_make_serve",
    USING: "test_readme_using_a_server",
    LOCAL: "test_readme_without_a_server",
    MEMORY: "test_readme_507",
    OWN: "test_readme_own_circuit",
    SEND: "test_operations_send_a_proof",
}
LIVE_S = 5.0
"""How long a live view (``cuzk status``) runs before the test stops it."""
BUNDLED = ("winning-post", "snap-update", "window-post", "porep-c2")


def test_every_command_block_is_run_or_skipped():
    """A block nobody runs is a block that can go stale: each one is run here or by the test
    RUN_ELSEWHERE names, or SKIPPED says why not; an entry no block matches is stale too."""
    found = {b.key for b in command_blocks() if b.file not in RUN_ELSEWHERE}
    listed = set(SKIPPED) | set(RUN_HERE)
    assert not set(SKIPPED) & set(RUN_HERE)
    assert not found - listed, f"blocks neither run nor skipped with a reason: {found - listed}"
    assert not listed - found, f"listed blocks no doc has any more: {listed - found}"
    tests = {name for name in globals() if name.startswith("test_")}
    assert set(RUN_HERE.values()) <= tests
    assert all(len(r) > 20 for r in SKIPPED.values()), "a skip needs a reason"


def _block(key: tuple[str, str]) -> Block:
    (block,) = [b for b in command_blocks() if b.key == key]
    return block


# -- running a block --------------------------------------------------------------------------


@dataclass
class Ran:
    command: str
    rc: int
    output: str

    def __str__(self) -> str:
        return f"$ {self.command}\n(exit {self.rc})\n{self.output}"


def _is_live(command: str) -> bool:
    words = strip_comment(command).split()
    return words[:2] == ["cuzk", "status"] and not {"--once", "--json"} & set(words)


def _is_server(command: str) -> bool:
    words = [w for w in strip_comment(command).split() if not re.match(r"[A-Z_]+=", w)]
    return words[:2] == ["cuzk", "serve"]


_WAIT_READY = (
    "for _ in $(seq 900); do curl -sf http://127.0.0.1:{port}/readyz >/dev/null && break;"
    " sleep 0.1; done"
)
"""What a reader does before typing in the other terminal: wait until the server listens."""


def _ports(command: str, ports: dict[str, int]) -> str:
    for doc_port, port in ports.items():
        command = command.replace(doc_port, str(port))
    return command


def run_commands(
    commands: list[str],
    cwd: Path,
    env: dict[str, str],
    ports: dict[str, int],
    timeout: float = 240,
    stop_on_error: bool = True,
) -> list[Ran]:
    """The commands in one bash, in order, as a reader pastes them (variables carry over; a
    trailing ``&`` runs in the background); each foreground command's output and status are
    kept apart. Whatever is still running at the end (a server started with ``&``) is stopped."""
    outs = cwd / ".doc-run"
    outs.mkdir(exist_ok=True)
    script = []
    for i, command in enumerate(commands):
        command = _ports(command, ports)
        if strip_comment(command).endswith("&"):
            script.append(f"{command}\n")
        elif _is_server(command):  # "in another terminal": in the background, until it listens
            listen = re.search(r"--listen \S+:(\d+)", command)
            port = listen[1] if listen else env["CUZK_SERVER_LISTEN"].rsplit(":", 1)[1]
            script.append(f"{strip_comment(command)} &\n{_WAIT_READY.format(port=port)}\n")
        elif _is_live(command):
            live = f"timeout {LIVE_S} {strip_comment(command)} </dev/null >{outs}/{i}.out 2>&1"
            script.append(f"{live}\necho $? >{outs}/{i}.rc\n")
        else:
            script.append(f"{{ {command}\n}} </dev/null >{outs}/{i}.out 2>&1\n")
            script.append(f"rc=$?; echo $rc >{outs}/{i}.rc\n")
            if stop_on_error:  # what follows a failed step would only fail, slowly, after it
                script.append("[ $rc = 0 ] || exit 0\n")
    with open(outs / "background.log", "w") as log:
        proc = subprocess.Popen(["bash", "-c", "".join(script)], cwd=cwd, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        try:
            proc.wait(timeout=timeout)
        finally:
            _stop_group(proc)
    ran = []
    for i, command in enumerate(commands):
        if not _background(command):
            rc_file, out_file = outs / f"{i}.rc", outs / f"{i}.out"
            if not rc_file.exists():  # the script was stopped before it got here
                log = (outs / "background.log").read_text()
                ran.append(Ran(command, -1, f"never finished; the script's own output:\n{log}"))
                break
            ran.append(Ran(command, int(rc_file.read_text()), out_file.read_text()))
    return ran


def _stop_group(proc: subprocess.Popen) -> None:
    """End the process group this test started (the script and its background jobs)."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                proc.poll()
                return
            proc.poll()
            time.sleep(0.1)


def _background(command: str) -> bool:
    return strip_comment(command).endswith("&") or _is_server(command)


def assert_ran_clean(ran: list[Ran], commands: list[str]) -> None:
    """Every foreground command ran, succeeded (a live view: was still running when stopped)
    and printed no traceback."""
    foreground = [c for c in commands if not _background(c)]
    for r in ran:
        want = 124 if _is_live(r.command) else 0
        assert r.rc == want and "Traceback" not in r.output, str(r)
    assert len(ran) == len(foreground), "\n\n".join(map(str, ran))


# -- the environment a reader has ---------------------------------------------------------------


@pytest.fixture(scope="module")
def bundled_keys() -> Path:
    """KEYS_DIR with a development key for every bundled kind (made once, then cached)."""
    from cuzk.circuits.registry import bundled_circuits
    from cuzk.prover.keystore import ensure_zkey

    circuits = bundled_circuits()
    assert set(circuits) == set(BUNDLED)
    for kind in BUNDLED:
        ensure_zkey(kind, Path(circuits[kind].r1cs_path), KEYS_DIR)
    return KEYS_DIR


def reader_env(home: Path, keys: Path, port: int) -> dict[str, str]:
    """A shell after the README's set-up: the repository's tools on PATH, a home of its own
    whose key cache holds the bundled keys, no cuzk settings but the listen address."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUZK_")}
    env.pop("XDG_CACHE_HOME", None)
    cache = home / ".cache" / "cuzk" / "keys"
    cache.mkdir(parents=True)
    for f in keys.iterdir():
        if f.name.startswith(BUNDLED) and f.suffix in (".zkey", ".json"):
            try:
                os.link(f, cache / f.name)
            except OSError:
                shutil.copy2(f, cache / f.name)
    env["HOME"] = str(home)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), str(NODE_MODULES / ".bin"),
                                   env.get("PATH", "")])  # fmt: skip
    env["CUZK_SERVER_LISTEN"] = f"127.0.0.1:{port}"
    env["CUZK_PROVER_MSM_PRECOMPUTE"] = "off"
    return env


def wait_ready(port: int, proc: subprocess.Popen, log: Path, within: float = 90) -> None:
    deadline = time.monotonic() + within
    while True:
        assert proc.poll() is None, log.read_text()
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"cuzk serve not ready in {within} s"
        time.sleep(0.1)


@dataclass
class Server:
    port: int
    env: dict[str, str]
    command: str


def _installed() -> bool:
    """Whether `make serve` would only serve: the venv and the native extension up to date
    (after `make test`'s set-up, as in CI), so running it installs nothing."""
    if not shutil.which("make"):
        return False
    stamps = [".venv/bin/.runtime", "cuzk/prover/_native/.built"]
    return subprocess.run(["make", "-q", "-C", str(ROOT), *stamps], capture_output=True,
                          timeout=60).returncode == 0  # fmt: skip


@pytest.fixture(scope="module")
def make_serve_server(tmp_path_factory, bundled_keys: Path) -> Iterator[Server]:
    """The README's `make serve`, in the clone, shared by the blocks that say "with the server
    running". Where it would install first (a checkout without its own .venv) the server is
    `cuzk serve`, what it runs once installed, and test_readme_make_serve skips (fails in CI)."""
    node_bin("snarkjs")
    (command,) = _block(MAKE_SERVE).commands
    if not _installed():
        command = "cuzk serve"
    tmp = tmp_path_factory.mktemp("make-serve")
    port = free_port()
    env = reader_env(tmp / "home", bundled_keys, port)
    env["XDG_STATE_HOME"] = str(tmp / "state")
    log = tmp / "serve.log"
    with open(log, "w") as f:
        proc = subprocess.Popen(["bash", "-c", command], cwd=ROOT, env=env, stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        wait_ready(port, proc, log)
        yield Server(port, env, command)
    finally:
        _stop_group(proc)


def test_readme_make_serve(make_serve_server: Server):
    """`make serve` itself served the blocks below (not only what it runs)."""
    if make_serve_server.command != "make serve":
        require_tool("make serve", "", hint="this checkout's .venv is not installed: make test")
    body = httpx.get(f"http://127.0.0.1:{make_serve_server.port}/v1/status", timeout=10).json()
    assert body["workers"], body


# -- the blocks ---------------------------------------------------------------------------------


def test_readme_using_a_server(make_serve_server: Server, tmp_path: Path):
    """README "Using it": submit, verify with the server's key, --json for scripts, get,
    pause, cancel, resume, preload, the live view, a deadline, status and metrics by curl."""
    require_tool("curl")
    require_tool("jq")
    block = _block(USING)
    ran = run_commands(block.commands, tmp_path, make_serve_server.env,
                       {"9820": make_serve_server.port})  # fmt: skip
    assert_ran_clean(ran, block.commands)
    (verify,) = [r for r in ran if "groth16 verify" in r.command]
    assert "OK!" in verify.output
    assert (tmp_path / "again" / "proof_0.json").is_file()
    (cancel,) = [r for r in ran if r.command.startswith("cuzk cancel")]
    assert "cancel" in cancel.output.lower()
    assert "cuzk_" in ran[-1].output  # /metrics


def test_readme_without_a_server(tmp_path: Path, bundled_keys: Path):
    """README "Without a server": prove, keygen, verify with the key keygen names."""
    block = _block(LOCAL)
    env = reader_env(tmp_path / "home", bundled_keys, free_port())
    work = tmp_path / "work"
    work.mkdir()
    ran = run_commands(block.commands, work, env, {})
    assert_ran_clean(ran, block.commands)
    (verify,) = [r for r in ran if r.command.startswith("cuzk verify")]
    assert verify.output.strip() == "OK"


def test_readme_507(tmp_path: Path, bundled_keys: Path):
    """README "Memory": the 507 answer it quotes is the one a real server gives, word for word."""
    block = _block(MEMORY)
    assert block.lang == "console"
    port = free_port()
    env = reader_env(tmp_path / "home", bundled_keys, port)
    work = tmp_path / "work"
    work.mkdir()
    ran = run_commands(block.commands, work, env, {"9820": port}, stop_on_error=False)
    expected = _console_outputs(block)
    assert len(ran) == len(expected) == 1
    assert ran[0].output.strip() == expected[0], str(ran[0])
    assert ran[0].rc != 0


def _console_outputs(block: Block) -> list[str]:
    """What a console block shows after each foreground ``$`` command."""
    out: list[list[str]] = []
    for line in block.body.splitlines():
        if line.startswith("$ "):
            if not _background(line[2:]):
                out.append([])
        elif out:
            out[-1].append(line)
    return ["\n".join(o).strip() for o in out]


def test_readme_own_circuit(tmp_path: Path, bundled_keys: Path):
    """README "Your own circuit", the short path, from an empty directory holding only the
    circuit docs/custom-circuits.md gives: compile, key, check (with a sample input), prove
    (also in rapidsnark's order), serve, submit, verify."""
    node_bin("circom2")
    node_bin("snarkjs")
    require_tool("curl")
    (source,) = [b for b in blocks(ROOT / "docs" / "custom-circuits.md") if b.lang == "circom"]
    work = tmp_path / "work"
    work.mkdir()
    (work / "weighted_sum.circom").write_text(source.body)
    block = _block(OWN)
    ports = {"9820": free_port(), "9821": free_port()}
    env = reader_env(tmp_path / "home", bundled_keys, ports["9820"])
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    ran = run_commands(block.commands, work, env, ports)
    assert_ran_clean(ran, block.commands)
    verified = [r for r in ran if "groth16 verify" in r.command]
    # local, rapidsnark's order (a zkey and a witness alone), the server's
    assert len(verified) == 3 and all("OK!" in r.output for r in verified)
    assert (work / "proofs" / "proof_1.json").is_file()  # --partitions 2


def test_operations_send_a_proof(make_serve_server: Server):
    """docs/operations.md "Send a proof": the python heredoc, run where it says (the clone)."""
    block = _block(SEND)
    script = _ports(block.body, {"9820": make_serve_server.port})
    proc = subprocess.run(["bash", "-c", script], cwd=ROOT, env=make_serve_server.env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"'id': '[0-9a-f]{32}'", proc.stdout), proc.stdout
