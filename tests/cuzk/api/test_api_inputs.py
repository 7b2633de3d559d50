"""Signal values that are not field elements are 400s naming the signal; server-side file faults
are 500s naming the file; no input of any size gives a 500."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from cuzk.api.app import create_app
from cuzk.api.signals import FIELD_ORDER
from cuzk.config import Config
from cuzk.engine.engine import Engine
from cuzk.engine.settings import EngineSettings, ProofKindSettings
from cuzk.prover.real_prover import RealProver
from cuzk.simulated_prover import ScriptedProver

pytestmark = pytest.mark.filterwarnings("ignore::starlette.exceptions.StarletteDeprecationWarning")

R = FIELD_ORDER
KIND = "winning-post"


def submit_raw(client: TestClient, value_json: str, kind: str = KIND, signal: str = "tag") -> Any:
    """POST a body whose one signal value is the literal JSON text ``value_json``."""
    body = f'{{"proof_kind": "{kind}", "inputs": [{{"{signal}": {value_json}}}]}}'
    return client.post(
        "/v1/proofs", content=body.encode(), headers={"content-type": "application/json"}
    )


BAD_VALUES = [
    ("decimal-string-5000-digits", json.dumps("9" * 5000), "'tag'", "too long"),
    ("json-number-5000-digits", "9" * 5000, "'tag'", "5000 digits"),
    ("json-number-1e400", "1e400", "'tag'", "out of range"),
    ("json-fraction", "1.5", "'tag'", "not an integer"),
    ("huge-float-integer", "1e20", "'tag'", "2^53"),
    ("r", str(R), "'tag'", "not below r"),
    ("minus-r", str(-R), "'tag'", "not below r"),
    ("r-as-string", json.dumps(str(R)), "'tag'", "not below r"),
    ("r-as-hex", json.dumps(hex(R)), "'tag'", "not below r"),
    ("hex-65-digits", json.dumps("0x" + "1" * 65), "'tag'", "not below r"),
    ("words", json.dumps("twelve"), "'tag'", "not a decimal or 0x-hexadecimal"),
    ("float-string", json.dumps("1.5"), "'tag'", "not a decimal"),
    ("upper-hex-prefix", json.dumps("0X10"), "'tag'", "not a decimal"),
    ("true", "true", "'tag'", "true is not a number"),
    ("null", "null", "'tag'", "null is not a number"),
    ("object", '{"a": 1}', "'tag'", "an object is not a number"),
    ("nested-array-element", '[[1, 2], [3, "x"]]', "'tag[1][1]'", "not a decimal"),
    ("deep-nesting-long-string", "[" * 50 + json.dumps("1" * 300) + "]" * 50, "'tag[0]", "too"),
]


@pytest.mark.parametrize(
    ("value_json", "where", "problem"),
    [v[1:] for v in BAD_VALUES],
    ids=[v[0] for v in BAD_VALUES],
)
def test_a_value_that_is_no_field_element_is_400_naming_the_signal(
    client: TestClient, prover: ScriptedProver, value_json: str, where: str, problem: str
) -> None:
    before = client.get("/v1/status").json()["counters"]
    calls = dict(prover.calls)
    r = submit_raw(client, value_json)
    assert r.status_code == 400, r.text
    message = r.json()["error"]
    assert message.startswith(f"inputs[0]: input signal {where}"), message
    assert problem in message, message
    assert "accepted: an integer n with -r < n < r" in message
    assert len(message) < 600  # never echoes a huge value back
    assert client.get("/v1/status").json()["counters"] == before
    assert prover.calls == calls


@pytest.mark.parametrize(
    "value_json",
    [
        "0",
        str(R - 1),
        str(-(R - 1)),
        json.dumps(str(R - 1)),
        json.dumps(" 42 "),
        json.dumps("-7"),
        json.dumps(hex(R - 1)),
        json.dumps("0x" + "0" * 100 + "1"),  # leading zeros do not make a value large
        "3.0",
        "[1, [2, 3], []]",
    ],
)
def test_field_element_representations_are_accepted(client: TestClient, value_json: str) -> None:
    r = submit_raw(client, value_json)
    assert r.status_code == 202, r.text


def test_oversize_numbers_elsewhere_in_the_body_are_400(client: TestClient) -> None:
    for body in (
        '{"proof_kind": ' + "7" * 5000 + ', "inputs": [{}]}',
        '{"proof_kind": "winning-post", "inputs": [{}], "priority": ' + "1" * 5000 + "}",
        '{"proof_kind": "winning-post", "inputs": [{}], "request_id": ' + "1" * 5000 + "}",
    ):
        r = client.post("/v1/proofs", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400, r.text
        assert "5000 digits" in r.json()["error"]


# --------------------------------------------------------------------------- the real prover


@pytest.fixture(scope="module")
def real_setup(bundled) -> Any:  # type: ignore[no-untyped-def]
    return bundled(KIND)


def real_engine(zkey: Path) -> Engine:
    settings = EngineSettings(
        backend="cpu",
        synthesis_threads=1,
        finalizer_threads=1,
        memory_budget_bytes=1 << 30,
        proof_kinds={KIND: ProofKindSettings(KIND, 1, "critical", zkey=zkey)},
    )
    return Engine(settings, RealProver(settings)).start()


@pytest.fixture(scope="module")
def real_client(real_setup: Any) -> Iterator[TestClient]:
    engine = real_engine(real_setup.zkey_path)
    with TestClient(create_app(engine, Config())) as c:
        yield c
    engine.shutdown(timeout=10)


@pytest.mark.parametrize("literal", [json.dumps("1" * 5000), "1" * 5000])
def test_real_prover_5000_digit_signal_is_400_not_500(
    real_client: TestClient, real_setup: Any, literal: str
) -> None:
    """The reported case: a 5,000-digit value for a real circuit's signal."""
    signal = next(iter(real_setup.inputs))
    inputs = dict(real_setup.inputs)
    inputs[signal] = "PLACEHOLDER"
    body = json.dumps({"proof_kind": KIND, "inputs": [inputs]}).replace('"PLACEHOLDER"', literal)
    r = real_client.post("/v1/proofs", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert f"input signal '{signal}'" in r.json()["error"]
    assert "set_int_max_str_digits" not in r.text


def test_truncated_key_on_the_server_is_500_naming_the_file(
    real_setup: Any, tmp_path: Path
) -> None:
    broken = tmp_path / "truncated.zkey"
    shutil.copyfile(real_setup.zkey_path, broken)
    with open(broken, "r+b") as f:
        f.truncate(broken.stat().st_size // 2)
    engine = real_engine(broken)
    try:
        with TestClient(create_app(engine, Config())) as c:
            r = c.post(f"/v1/keys/{KIND}/preload")
            assert r.status_code == 500, r.text
            body = r.json()
            assert body["file"] == str(broken)
            assert str(broken) in body["error"]
            assert body["problem"] and "section" in body["error"]
            # The server is still up and says so.
            assert c.get("/healthz").status_code == 200
    finally:
        engine.shutdown(timeout=10)
