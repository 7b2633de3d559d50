"""Every API verb on the command line: ``cuzk cancel``, ``cuzk workers pause|resume`` and ``cuzk
keys preload|evict`` run as a user runs them (a subprocess) against the real app on a loopback
port, each with its text, its ``--json`` object and its refusals said on one line."""

from __future__ import annotations

from pathlib import Path

import httpx

from cuzk.engine.engine import Engine
from tests.cuzk.cli._cli import cuzk, json_out, said
from tests.cuzk.cli.conftest import AUTH_TOKEN


def _submit(server_url: str, kind: str, tags: list[str]) -> str:
    body = {"proof_kind": kind, "inputs": [{"tag": t} for t in tags]}
    answer = httpx.post(f"{server_url}/v1/proofs", json=body, timeout=30)
    assert answer.status_code == 202, answer.text
    return str(answer.json()["id"])


def test_pause_cancel_resume_on_the_command_line(
    tmp_path: Path, server_url: str, engine: Engine
) -> None:
    paused = cuzk(tmp_path, "workers", "pause", "--server", server_url, "--json")
    assert paused.returncode == 0, paused.stderr
    assert json_out(paused) == {
        "format": 1, "command": "workers pause", "ok": True, "error": None,
        "server": server_url, "workers_paused": True}
    assert engine.status()["paused"] is True

    job_id = _submit(server_url, "porep-c2", ["1", "2", "3"])  # waits: workers are paused
    cancelled = cuzk(tmp_path, "cancel", job_id, "--server", server_url, "--json")
    assert cancelled.returncode == 0, cancelled.stderr
    result = json_out(cancelled)
    assert (result["job_id"], result["state"], result["proof_kind"]) == (
        job_id, "cancelled", "porep-c2")
    assert (result["partitions"], result["partitions_done"], result["proofs"]) == (3, 0, [])
    assert engine.get(job_id).to_dict()["state"] == "cancelled"

    again = cuzk(tmp_path, "cancel", job_id, "--server", server_url)  # idempotent, as text
    assert again.returncode == 0, again.stderr
    assert again.stdout == (f"job {job_id} cancelled (porep-c2, 0 of 3 partitions had"
                            " finished)\n")

    resumed = cuzk(tmp_path, "workers", "resume", "--server", server_url)
    assert (resumed.returncode, resumed.stdout) == (0, "GPU workers resumed\n"), resumed.stderr
    assert engine.status()["paused"] is False


def test_cancel_refusals_are_one_line(tmp_path: Path, server_url: str, engine: Engine) -> None:
    unknown = cuzk(tmp_path, "cancel", "no-such-job", "--server", server_url)
    line = said(unknown, "cancel")
    assert line.startswith("cuzk cancel: no job no-such-job on the server ("), line
    assert unknown.returncode == 1

    job_id = _submit(server_url, "winning-post", ["5"])
    assert engine.wait(job_id, 20).to_dict()["state"] == "succeeded"
    late = cuzk(tmp_path, "cancel", job_id, "--server", server_url, "--json")
    assert late.returncode == 1
    result = json_out(late)
    assert result["state"] == "succeeded" and result["job_id"] == job_id
    assert result["error"] == f"job {job_id} had already ended succeeded; nothing to cancel"
    assert said(late, "cancel") == f"cuzk cancel: {result['error']}"
    assert engine.get(job_id).to_dict()["state"] == "succeeded"  # unchanged


def test_preload_and_evict_a_key(tmp_path: Path, server_url: str, engine: Engine) -> None:
    def resident() -> bool:
        return next(c for c in engine.circuits() if c["proof_kind"] == "winning-post")[
            "resident"]

    assert not resident()
    preload = cuzk(tmp_path, "keys", "preload", "winning-post", "--server", server_url,
                   "--json")
    assert preload.returncode == 0, preload.stderr
    result = json_out(preload)
    assert (result["command"], result["proof_kind"], result["resident"]) == (
        "keys preload", "winning-post", True)
    assert result["host_bytes"] == 1000 and result["evict_result"] is None  # the scripted key
    assert resident()

    evict = cuzk(tmp_path, "keys", "evict", "winning-post", "--server", server_url)
    assert evict.returncode == 0, evict.stderr
    assert evict.stdout == "proving key of winning-post evicted: its memory is free\n"
    assert not resident()
    again = cuzk(tmp_path, "keys", "evict", "winning-post", "--server", server_url, "--json")
    assert json_out(again)["evict_result"] == "not_resident"

    unknown = cuzk(tmp_path, "keys", "preload", "nope", "--server", server_url)
    line = said(unknown, "keys preload")
    assert "unknown proof kind 'nope' (available: porep-c2, winning-post)" in line, line


TOKEN = AUTH_TOKEN


def test_the_verbs_send_the_token_as_submit_does(
    tmp_path: Path, authed_url: str, engine: Engine
) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    paused = cuzk(tmp_path, "workers", "pause", "--server", authed_url, "--token-file",
                  str(token))
    assert paused.returncode == 0, paused.stderr
    assert engine.status()["paused"] is True
    resumed = cuzk(tmp_path, "workers", "resume", "--server", authed_url,
                   CUZK_AUTH_TOKEN=TOKEN)
    assert resumed.returncode == 0, resumed.stderr
    assert engine.status()["paused"] is False

    refused = cuzk(tmp_path, "workers", "pause", "--server", authed_url)
    line = said(refused, "workers pause")
    assert "401" in line and "set $CUZK_AUTH_TOKEN or --token-file" in line, line
    assert engine.status()["paused"] is False  # changed nothing
