"""A custom proof kind with 2 partitions through the real engine over HTTP: `cuzk circuit add`
writes the config, a real `cuzk serve` process proves with the ceremony key, snarkjs verifies
every proof with the verification key fetched from the server. A broken configured key stops
the server at start with one line naming the file and the section."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cuzk.prover.test_prover_keycheck import corrupt
from tests.interop.conftest import Ceremony, cuzk_env, free_port, run, write_json

pytestmark = pytest.mark.integration
KIND = "weighted-sum"


def _cuzk(*args: object) -> list[str]:
    return [sys.executable, "-m", "cuzk.cli.main", *map(str, args)]


def _add_kind(ceremony: Ceremony, config: Path, zkey: Path) -> None:
    sample = write_json(config.parent / "sample.json", ceremony.inputs(1))
    run(*_cuzk("circuit", "add", KIND, "--r1cs", ceremony.r1cs, "--wasm", ceremony.wasm,
               "--zkey", zkey, "--partitions", 2, "--sample-input", sample,
               "--config", config))  # fmt: skip


@pytest.fixture
def server(ceremony: Ceremony, tmp_path: Path) -> Iterator[str]:
    config = tmp_path / "cuzk.toml"
    config.write_text('[engine]\nbackend = "cpu"\n')
    _add_kind(ceremony, config, ceremony.zkey)
    port = free_port()
    with open(tmp_path / "serve.log", "w") as log:
        proc = subprocess.Popen(
            _cuzk("serve", "--config", config, "--listen", f"127.0.0.1:{port}"),
            stdout=log, stderr=subprocess.STDOUT, env=cuzk_env(tmp_path),
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "cuzk serve not ready in 60 s"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


def test_two_partitions_over_http_verify_with_the_servers_vk(
    server: str, ceremony: Ceremony, tmp_path: Path
):
    inputs = [ceremony.inputs(11), ceremony.inputs(12)]
    with httpx.Client(base_url=server, timeout=30) as client:
        kinds = {c["proof_kind"]: c for c in client.get("/v1/circuits").json()["circuits"]}
        assert kinds[KIND]["partitions"] == 2
        assert kinds[KIND]["resident"] is True  # loaded and checked when the server started
        r = client.post("/v1/proofs", json={"proof_kind": KIND, "inputs": inputs})
        assert r.status_code == 202, r.text
        job = client.get(f"/v1/proofs/{r.json()['id']}", params={"wait": 120}).json()
        assert job["state"] == "succeeded", job
        vk = client.get(f"/v1/circuits/{KIND}/verification_key")
        assert vk.status_code == 200
    vk_path = write_json(tmp_path / "server_vk.json", vk.json())
    assert vk.json() == json.loads(ceremony.vk.read_text())  # the ceremony's key, exactly
    assert len(job["proofs"]) == 2
    for i, entry in enumerate(job["proofs"]):
        proof = write_json(tmp_path / f"proof_{i}.json", entry["proof"])
        public = write_json(tmp_path / f"public_{i}.json", entry["public"])
        assert "OK" in run(ceremony.snarkjs, "groth16", "verify", vk_path, public, proof)
        assert entry["public"] == ceremony.expected_public(inputs[i])


def test_cuzk_submit_sends_the_configured_sample_input(
    server: str, ceremony: Ceremony, tmp_path: Path
):
    out = tmp_path / "proofs"
    run(*_cuzk("submit", KIND, "--server", server, "--out", out, "--timeout", 120))
    expected = ceremony.expected_public(ceremony.inputs(1))
    for i in range(2):
        assert json.loads((out / f"public_{i}.json").read_text()) == expected


@pytest.mark.parametrize("section", [4, 9, "other"])
def test_broken_configured_key_refuses_to_start(
    ceremony: Ceremony, tmp_path: Path, section, bundled
):
    config = tmp_path / "cuzk.toml"
    config.write_text('[engine]\nbackend = "cpu"\n')
    _add_kind(ceremony, config, ceremony.zkey)  # checked good when added ...
    bad = tmp_path / "bad.zkey"
    if section == "other":  # ... then replaced by a key of another circuit
        shutil.copy(bundled("winning-post").zkey_path, bad)
    elif section == 4:  # a coefficient value's low limbs: only the r1cs comparison sees it
        from cuzk.formats.binfile import read_binfile

        (sec,) = read_binfile(ceremony.zkey, "zkey", 2).sections[4]
        data = bytearray(ceremony.zkey.read_bytes())
        at = sec.offset + 4 + 12
        data[at : at + 16] = bytes(b ^ 0xFF for b in data[at : at + 16])
        bad.write_bytes(bytes(data))
    else:
        corrupt(ceremony.zkey, bad, section)
    config.write_text(config.read_text().replace(str(ceremony.zkey), str(bad)))
    proc = subprocess.run(
        _cuzk("serve", "--config", config, "--listen", f"127.0.0.1:{free_port()}"),
        capture_output=True, text=True, timeout=120, env=cuzk_env(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("cuzk serve:")]
    assert line.startswith(f"cuzk serve: refusing to start: proof kind {KIND}: {bad}: ")
    assert "Traceback" not in proc.stderr
    if section == "other":
        assert f"is not a key for circuit {KIND}: " in line
    else:
        assert f"{bad}: section {section} (" in line
