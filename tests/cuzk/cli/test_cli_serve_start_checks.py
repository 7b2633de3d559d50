"""What `cuzk serve` checks before it takes a job: a port already in use is the first thing it
says, on one line, before it opens the journal or checks keys (not an error buried after
seconds of start-up logs); a configured circuit it can never prove stops the start."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from cuzk.curves import BLS12_381, BN128_SCALAR_PRIME
from cuzk.serve_process import ServeFailed, ServeProcess, serve_env
from tests.cuzk.cli._durability import KEYS_DIR
from tests.cuzk.prover.test_prover_keycheck import R1CS, WASM


def test_a_port_in_use_is_reported_first_and_alone(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with ServeProcess(serve_env(tmp_path / "journal.sqlite3", KEYS_DIR,
                                    CUZK_SERVER_LISTEN=f"127.0.0.1:{port}")) as server:
            with pytest.raises(ServeFailed):
                server.start(timeout=120)
            assert server.wait(30) == 2
    lines = [line for line in server.output.splitlines() if line.strip()]
    assert lines == [f"cuzk serve: cannot listen on 127.0.0.1:{port}: Address already in use"], (
        server.output)
    assert not (tmp_path / "journal.sqlite3").exists()  # nothing was opened before refusing


def test_a_configured_bn128_circuit_without_a_key_stops_the_start(tmp_path: Path) -> None:
    """Without a zkey the key is made on first use; the circuit's curve is checked at start,
    not at the first submit (which answered 500)."""
    data = bytearray(R1CS.read_bytes())
    r = BLS12_381.r.to_bytes(32, "little")
    at = bytes(data).index(r)
    data[at : at + 32] = BN128_SCALAR_PRIME.to_bytes(32, "little")
    bn = tmp_path / "bn.r1cs"
    bn.write_bytes(bytes(data))
    config = tmp_path / "cuzk.toml"
    config.write_text(f'[proof_kinds.tiny]\nr1cs = "{bn}"\nwasm = "{WASM}"\n')
    env = serve_env(tmp_path / "journal.sqlite3", KEYS_DIR, CUZK_CONFIG=str(config))
    with ServeProcess(env) as server:  # killed on the way out, whatever happens
        with pytest.raises(ServeFailed):
            server.start(timeout=120)
        assert server.wait(30) == 2
    assert "refusing to start: proof kind tiny:" in server.output
    assert "compiled for bn128" in server.output and "Traceback" not in server.output


def test_a_bad_nvml_recording_stops_the_start_with_the_reason(tmp_path: Path) -> None:
    """telemetry.nvml_replay names a recording the server cannot use: one line naming the key
    and what is wrong, before anything is opened; never a traceback."""
    bad = tmp_path / "nvml.json"
    bad.write_text('{"format": "cuzk-nvml-recording/1", "interval_s": 1, "devices": '
                   '{"cpu": {"utilization_percent": [120], "memory_used_bytes": [1]}}}')
    env = serve_env(tmp_path / "journal.sqlite3", KEYS_DIR,
                    CUZK_TELEMETRY_NVML_REPLAY=str(bad))
    with ServeProcess(env) as server:
        with pytest.raises(ServeFailed):
            server.start(timeout=120)
        assert server.wait(30) == 2
    lines = [line for line in server.output.splitlines() if line.strip()]
    assert lines == [f"cuzk serve: refusing to start: telemetry.nvml_replay: {bad}: "
                     "devices.cpu.utilization_percent must be a non-empty list of numbers in "
                     "0..100"], server.output
    assert not (tmp_path / "journal.sqlite3").exists()
