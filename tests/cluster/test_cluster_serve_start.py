"""``cuzk serve --cluster`` starts or says why (issue 29), as a user runs it: a real process.

An address where nothing listens, or where something listens that is not Ray, ends in one line
("cannot reach Ray at ADDRESS"), bounded by ``cluster.connect_timeout_s``; SIGTERM and Ctrl-C
stop it within seconds while it connects. A cluster whose only GPU node is refused (it reports a
GPU, CUDA is unusable there) is served anyway: ``/readyz`` 503 and ``cuzk status`` say "no GPU
worker" and why, and a job with a deadline is not admitted. Runs in the network namespace of
this directory (``ray.init`` is called), on its shared two-node cluster."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster._cluster import two_nodes

ROOT = Path(__file__).resolve().parents[2]
CONNECTING = "cluster: connecting to the Ray cluster at"


class _Head:
    """``cuzk serve --cluster ADDRESS`` in a subprocess, its output read as it comes."""

    def __init__(self, address: str, tmp: Path, **settings: str) -> None:
        from cuzk.serve_process import serve_env

        env = serve_env(None, tmp / "keys", CUZK_SERVER_LISTEN="127.0.0.1:0",
                        CUZK_CLUSTER_SD_FILE=str(tmp / "sd.json"), PYTHONPATH=str(ROOT),
                        **settings)
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cuzk.cli.main", "serve", "--cluster", address],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, text: str, bound_s: float) -> None:
        deadline = time.monotonic() + bound_s
        while text not in self.output:
            assert self.proc.poll() is None, f"exited {self.proc.returncode}:\n{self.output}"
            assert time.monotonic() < deadline, f"no {text!r} within {bound_s} s:\n{self.output}"
            time.sleep(0.05)

    def exit_code(self, bound_s: float) -> int:
        try:
            code = self.proc.wait(bound_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"still running after {bound_s} s:\n{self.output}")
        self._reader.join(5)
        return code


@pytest.fixture
def silent_address() -> Iterator[str]:
    """A loopback port that accepts connections and never says a word (not Ray)."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(2)
        for s in [*held, server]:
            s.close()


def _closed_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_closed_port_is_one_line_at_once(in_namespace, tmp_path):
    """A closed port is told by the TCP probe, not after Ray's retries (the bound is 120 s, so
    a head that waited for Ray instead would miss the 60 s this allows)."""
    if not in_namespace:
        return
    address = _closed_address()
    head = _Head(address, tmp_path, CUZK_CLUSTER_CONNECT_TIMEOUT_S="120")
    assert head.exit_code(60) == 2, head.output
    elapsed = time.monotonic() - head.started
    assert f"cuzk serve: cannot reach Ray at {address}: Connection refused" in head.output
    assert "Traceback" not in head.output
    print(f"closed port told in {elapsed:.1f} s (process start included)")


def test_address_that_is_not_ray_times_out_with_one_line(in_namespace, tmp_path,
                                                          silent_address):
    if not in_namespace:
        return
    head = _Head(silent_address, tmp_path, CUZK_CLUSTER_CONNECT_TIMEOUT_S="3")
    assert head.exit_code(90) == 2, head.output
    assert (f"cuzk serve: cannot reach Ray at {silent_address}: no answer within 3 s"
            in head.output), head.output
    assert "Traceback" not in head.output
    assert "cuzk listening" not in head.output


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_ctrl_c_stop_a_head_that_is_connecting(in_namespace, tmp_path,
                                                           silent_address, sig):
    """While Ray's client blocks on an address that does not answer (bound 600 s), the signal
    ends the process within 10 s, with one line and no traceback."""
    if not in_namespace:
        return
    head = _Head(silent_address, tmp_path, CUZK_CLUSTER_CONNECT_TIMEOUT_S="600")
    head.wait_for(CONNECTING, 90)
    time.sleep(1.0)  # well inside ray.init, where the signal used to wait for Ray's retries
    sent = time.monotonic()
    head.proc.send_signal(sig)
    code = head.exit_code(10)
    assert code == 130, head.output
    assert "cuzk serve: stopped while starting" in head.output
    assert "Traceback" not in head.output
    print(f"{signal.Signals(sig).name} honoured in {time.monotonic() - sent:.2f} s")


def test_refused_gpu_node_serves_and_says_no_gpu_worker(in_namespace, tmp_path):
    """The shared cluster's GPU node reports a (logical) GPU; with ``engine.backend = auto``
    its GPU worker finds CUDA unusable and the node is refused. The head listens anyway:
    ``/readyz`` 503 and ``cuzk status`` name "no GPU worker" and the node's reason, and a
    winning-post (``deadline_admission = reject``) is refused with 503 and Retry-After."""
    if not in_namespace:
        return
    import httpx

    from cuzk.circuits.registry import bundled_circuits
    from cuzk.prover.real_prover import cuda_device_count

    if cuda_device_count():
        pytest.skip("CUDA is usable here: the GPU node would not be refused")
    circuit = bundled_circuits()["winning-post"]
    assert circuit.partitions == 1 and circuit.deadline_admission == "reject"
    sample = json.loads(circuit.sample_input_path.read_text())
    with two_nodes() as cluster:
        head = _Head(cluster.address, tmp_path, CUZK_ENGINE_BACKEND="auto")
        try:
            head.wait_for("cuzk listening on http://", 150)
            url = next(line.split("cuzk listening on ", 1)[1].split()[0]
                       for line in head.lines if "cuzk listening on " in line)
            with httpx.Client(base_url=url, timeout=30) as c:
                r = c.get("/readyz")
                assert r.status_code == 503, r.text
                assert "no GPU worker" in r.text and "CUDA is unusable" in r.text, r.text
                status = c.get("/v1/status").json()
                assert status["not_ready"].startswith("no GPU worker: node "), status
                refused = c.post("/v1/proofs", json={"proof_kind": "winning-post",
                                                     "inputs": [sample]})
                assert refused.status_code == 503, refused.text
                assert "no GPU worker" in refused.text
                assert refused.headers.get("retry-after"), refused.headers
            shown = subprocess.run(
                [sys.executable, "-m", "cuzk.cli.main", "status", "--once", "--server", url],
                capture_output=True, text=True, timeout=60, cwd=ROOT)
            assert shown.returncode == 0, shown.stdout + shown.stderr
            assert "NOT READY: no GPU worker: node" in " ".join(shown.stdout.split()), (
                shown.stdout)
            assert "Traceback" not in shown.stdout + shown.stderr
            head.proc.send_signal(signal.SIGTERM)
            assert head.exit_code(30) == 0, head.output
        finally:
            if head.proc.poll() is None:
                head.proc.kill()
                head.proc.wait()
        assert "refused: node " in head.output and "Traceback" not in head.output
