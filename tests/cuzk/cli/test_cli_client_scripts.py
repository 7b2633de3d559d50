"""``cuzk submit`` and ``cuzk get`` as scripts use them (a subprocess, a loopback server): one
JSON object on stdout whatever the outcome (docs/cli.md, "Output for scripts"); ``get`` says it
retries an unreachable server and shows a job's partitions while it waits; a server that is not
cuzk is named so, never dumped."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from cuzk.cli._results import JobResult, job_result, key_result, workers_result
from cuzk.engine.engine import Engine
from cuzk.simulated_prover import ScriptedProver
from tests.cuzk.cli._cli import cuzk, json_out, said

JOB_FIELDS = set(JobResult.__annotations__)


def test_submit_and_get_print_one_json_object(tmp_path: Path, server_url: str) -> None:
    out = tmp_path / "proofs"
    submit = cuzk(tmp_path, "submit", "winning-post", "--server", server_url, "--out", str(out),
                  "--request-id", "script-1", "--json")
    assert submit.returncode == 0, submit.stderr
    result = json_out(submit)
    assert set(result) == JOB_FIELDS and result["format"] == 1
    job_id = result["job_id"]
    assert (result["command"], result["state"], result["request_id"], result["proof_kind"]) == (
        "submit", "succeeded", "script-1", "winning-post")
    assert (result["partitions"], result["partitions_done"], result["out_dir"]) == (
        1, 1, str(out))
    assert result["proofs"] == [{"partition": 0, "proof": str(out / "proof_0.json"),
                                 "public": str(out / "public_0.json")}]
    assert json.loads((out / "proof_0.json").read_text())["protocol"] == "groth16"
    assert "partitions" not in submit.stderr  # no progress bar: a script reads stdout only

    again = tmp_path / "again"
    get = cuzk(tmp_path, "get", job_id, "--server", server_url, "--out", str(again), "--json")
    assert get.returncode == 0, get.stderr
    fetched = json_out(get)
    assert fetched == {**result, "command": "get", "out_dir": str(again), "proofs": [
        {"partition": 0, "proof": str(again / "proof_0.json"),
         "public": str(again / "public_0.json")}]}
    assert (again / "public_0.json").read_text() == (out / "public_0.json").read_text()


def test_failures_are_json_too(tmp_path: Path, server_url: str, prover: ScriptedProver) -> None:
    unknown = cuzk(tmp_path, "submit", "nope", "--server", server_url, "--json")
    result = json_out(unknown)
    assert unknown.returncode == 1 and result["job_id"] is None
    assert result["error"].startswith("the server has no proof kind 'nope'"), result
    assert said(unknown, "submit") == f"cuzk submit: {result['error']}"

    prover.fail("finalize", "9", RuntimeError("self-verification failed"))
    inputs = tmp_path / "in.json"
    inputs.write_text('{"tag": "9"}')
    failed = cuzk(tmp_path, "submit", "winning-post", "--input", str(inputs), "--server",
                  server_url, "--out", str(tmp_path / "none"), "--json")
    result = json_out(failed)
    assert failed.returncode == 1 and result["state"] == "failed"
    assert "self-verification failed" in result["job_error"]
    assert result["error"].startswith(f"job {result['job_id']} failed: ")
    assert result["proofs"] == [] and not (tmp_path / "none").exists()

    missing = cuzk(tmp_path, "get", "no-such-job", "--server", server_url, "--json")
    result = json_out(missing)
    assert result["error"].startswith("no job no-such-job on the server ("), result


def test_get_says_it_retries_an_unreachable_server(tmp_path: Path, closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}"
    proc = cuzk(tmp_path, "get", "j1", "--server", url, "--retry-for", "1")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    first, last = proc.stderr.splitlines()  # said once, not at every try; then the error
    assert first.startswith(f"cuzk get: cannot reach the cuzk server at {url}"), proc.stderr
    assert first.endswith("; retrying for up to 1 s"), first
    assert last.endswith("(still so after retrying for 1 s)"), last


def test_get_wait_shows_the_partitions_then_says_the_job_is_unfinished(
    tmp_path: Path, server_url: str, engine: Engine
) -> None:
    engine.pause_workers()  # the job stays queued for the GPU: a bounded, certain wait
    answer = httpx.post(f"{server_url}/v1/proofs", timeout=30, json={
        "proof_kind": "porep-c2", "inputs": [{"tag": "1"}, {"tag": "2"}, {"tag": "3"}]})
    job_id = answer.json()["id"]
    try:
        proc = cuzk(tmp_path, "get", job_id, "--server", server_url, "--wait", "1")
    finally:
        engine.resume_workers()
    assert "0/3 partitions" in proc.stderr and "porep-c2" in proc.stderr, proc.stderr
    line = said(proc, "get")
    assert f"job {job_id} is running; it has no proofs to write yet" in line, line
    assert "--wait SECONDS" in line


@pytest.fixture(scope="module")
def other_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m http.server`` on loopback: answers every cuzk route with an HTML 404 (and
    POST or DELETE with an HTML 501)."""
    root = tmp_path_factory.mktemp("www")

    class Quiet(SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join(10)


@pytest.mark.parametrize("argv", [
    ["submit", "winning-post"], ["get", "j1"], ["cancel", "j1"], ["workers", "pause"],
    ["status", "--once"],
], ids=lambda a: " ".join(a))
def test_a_server_that_is_not_cuzk_is_named_so(
    tmp_path: Path, other_server: str, argv: list[str]
) -> None:
    proc = cuzk(tmp_path, *argv, "--server", other_server)
    line = said(proc, " ".join(a for a in argv if not a.startswith("-") and a != "j1"
                               and a != "winning-post"))
    assert f"not a cuzk server at {other_server}" in line, line
    assert "check --server or CUZK_URL" in line and "<" not in line, line  # no HTML


def test_the_json_shapes_are_the_documented_ones() -> None:
    """docs/cli.md names every field of every result; a field added without a line there
    fails here."""
    doc = (Path(__file__).resolve().parents[3] / "docs" / "cli.md").read_text()
    section = doc.split("## Output for scripts", 1)[1]
    for result in (job_result("get", "u"), workers_result("workers pause", "u"),
                   key_result("keys evict", "u", "k")):
        for field in result:
            assert f"`{field}`" in section, field


def test_a_server_url_that_is_no_url_is_one_line(tmp_path: Path) -> None:
    proc = cuzk(tmp_path, "get", "j1", "--server", "http://[oops]:9820", "--json")
    line = said(proc, "get")
    assert "the server URL 'http://[oops]:9820' is not a URL" in line, line
    assert "--server or CUZK_URL" in line and json_out(proc)["error"] in line
