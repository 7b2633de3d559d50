"""`cuzk submit` keeps the durability contract by default: every submit carries a request id, a
503 is retried after its Retry-After and a dropped connection is retried with the same id, all
within a bound; the output directory is checked before the job exists; `cuzk get` writes a
finished job's proofs again."""

from __future__ import annotations

import argparse
import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console

from cuzk.cli import submit as submit_cmd
from cuzk.cli._http import default_server
from cuzk.cli.main import main

PROOF = {"pi_a": ["1"], "protocol": "groth16"}
DONE_JOB = {"id": "j1", "state": "succeeded", "partitions": [{"phase": "done"}],
            "proofs": [{"proof": PROOF, "public": ["7"]}]}


class FakeServer:
    """An httpx transport standing in for the server: ``posts`` answers each POST in turn (a
    status code, or an exception raised as if the connection dropped)."""

    def __init__(self, posts: list[int | Exception], job: dict[str, Any] | None = None) -> None:
        self.posts = posts
        self.job = job or DONE_JOB
        self.bodies: list[dict[str, Any]] = []
        self.times: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/circuits":
            return httpx.Response(200, json={"circuits": [{"proof_kind": "k", "partitions": 1}]})
        if request.method == "POST":
            self.bodies.append(json.loads(request.content))
            self.times.append(time.monotonic())
            answer = self.posts.pop(0) if self.posts else 202
            if isinstance(answer, Exception):
                raise answer
            if answer == 503:
                return httpx.Response(503, headers={"Retry-After": "1"},
                                      json={"error": "draining"})
            return httpx.Response(answer, json=self.job)
        return httpx.Response(200, json=self.job)


def _submit(server: FakeServer, tmp_path: Path, **kw: Any) -> tuple[int, str]:
    inputs = tmp_path / "in.json"
    inputs.write_text('{"a": 1}')
    args = argparse.Namespace(**({
        "proof_kind": "k", "input": str(inputs), "server": None, "out": str(tmp_path / "out"),
        "request_id": None, "priority": None, "timeout": 20.0, "no_wait": False,
        "retry_for": 30.0} | kw))
    err = io.StringIO()
    with httpx.Client(transport=httpx.MockTransport(server), base_url="http://cuzk") as client:
        code = submit_cmd.submit(client, args, console=Console(file=err, width=200),
                                 out=io.StringIO())
    return code, err.getvalue()


def _run(fn: Callable[[], int]) -> tuple[int, str]:
    try:
        return fn(), ""
    except Exception as e:  # CliError: what `cuzk submit` prints as its one-line error
        return 1, str(e)


def test_a_submit_always_carries_a_request_id_and_reuses_it_after_a_dropped_connection(
    tmp_path: Path,
):
    server = FakeServer([httpx.RemoteProtocolError("Server disconnected"), 202])
    code, err = _submit(server, tmp_path)
    assert code == 0, err
    ids = [b.get("request_id") for b in server.bodies]
    assert len(ids) == 2 and ids[0] and ids[0] == ids[1], ids
    assert "retrying" in err
    assert json.loads((tmp_path / "out" / "proof_0.json").read_text()) == PROOF


def test_two_submits_get_different_request_ids(tmp_path: Path):
    server = FakeServer([202, 202])
    assert _submit(server, tmp_path)[0] == 0 and _submit(server, tmp_path)[0] == 0
    assert server.bodies[0]["request_id"] != server.bodies[1]["request_id"]


def test_a_503_is_retried_after_its_retry_after(tmp_path: Path):
    server = FakeServer([503, 202])
    code, err = _submit(server, tmp_path)
    assert code == 0, err
    assert len(server.times) == 2
    assert server.times[1] - server.times[0] >= 0.9  # Retry-After: 1 was honoured


def test_retrying_is_bounded(tmp_path: Path):
    server = FakeServer([503] * 100)
    started = time.monotonic()
    code, err = _run(lambda: _submit(server, tmp_path, retry_for=2.5)[0])
    assert code == 1 and "retrying for 2.5 s" in err, err
    assert 2 <= len(server.bodies) <= 4
    assert time.monotonic() - started < 30


def test_no_retry_when_asked(tmp_path: Path):
    server = FakeServer([503, 202])
    code, err = _run(lambda: _submit(server, tmp_path, retry_for=0)[0])
    assert code == 1 and "503" in err and len(server.bodies) == 1


def test_an_unwritable_out_dir_is_refused_before_the_job_exists(tmp_path: Path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    server = FakeServer([202])
    code, err = _run(lambda: _submit(server, tmp_path, out=str(blocker / "proofs"))[0])
    assert code == 1 and "not a directory" in err, err
    assert server.bodies == []  # nothing was submitted


def test_get_writes_a_finished_jobs_proofs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]):
    server = FakeServer([])
    real_client = httpx.Client

    def client(*args: Any, **kw: Any) -> httpx.Client:
        return real_client(transport=httpx.MockTransport(server), base_url="http://cuzk")

    monkeypatch.setattr(httpx, "Client", client)
    assert main(["get", "j1", "--out", str(tmp_path / "again")]) == 0
    assert json.loads((tmp_path / "again" / "public_0.json").read_text()) == ["7"]
    assert "1 proof written" in capsys.readouterr().out
    server.job = {"id": "j2", "state": "running", "partitions": [], "proofs": None}
    assert main(["get", "j2", "--out", str(tmp_path / "none")]) == 1
    assert "j2 is running" in capsys.readouterr().err


@pytest.mark.parametrize(("listen", "url"), [
    ("127.0.0.1:9901", "http://127.0.0.1:9901"),
    ("0.0.0.0:9902", "http://127.0.0.1:9902"),
    ("[::1]:9903", "http://[::1]:9903"),
    ("127.0.0.1:0", "http://127.0.0.1:9820"),
])
def test_the_client_default_follows_the_servers_listen_setting(
    monkeypatch: pytest.MonkeyPatch, listen: str, url: str
):
    monkeypatch.delenv("CUZK_URL", raising=False)
    monkeypatch.setenv("CUZK_SERVER_LISTEN", listen)
    assert default_server() == url
    monkeypatch.setenv("CUZK_URL", "http://elsewhere:1")
    assert default_server() == "http://elsewhere:1"
