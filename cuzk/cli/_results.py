"""What a client command prints with ``--json``, spelled once (documented in docs/cli.md,
"Output for scripts").

One JSON object on stdout per run, whatever the outcome, so a script reads a job id or an error
from fields instead of scraping text. Every field of a command's shape is always present (null
when unknown); fields are never renamed or removed, new ones may be added, and ``format`` counts
incompatible changes (none yet). The exit status is 0 exactly when ``ok`` is true."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO, TypedDict

FORMAT = 1


class Result(TypedDict):
    """Every command's fields."""

    format: int
    command: str
    """The subcommand as typed: ``submit``, ``get``, ``cancel``, ``workers pause``, ..."""
    ok: bool
    error: str | None
    """The line the command printed on stderr, when ``ok`` is false."""
    server: str


class ProofFiles(TypedDict):
    partition: int
    proof: str
    public: str


class JobResult(Result):
    """``submit``, ``get`` and ``cancel``."""

    job_id: str | None
    """None only when a submit failed before the server accepted the job."""
    request_id: str | None
    proof_kind: str | None
    state: str | None
    """The job's last state seen (``cuzk.protocol.JOB_STATES``)."""
    partitions: int | None
    partitions_done: int | None
    job_error: str | None
    """Why the job failed, as the server says it."""
    out_dir: str | None
    proofs: list[ProofFiles]
    """The files written, one entry per partition; empty when none were."""


class WorkersResult(Result):
    """``workers pause`` and ``workers resume``."""

    workers_paused: bool | None


class KeyResult(Result):
    """``keys preload`` and ``keys evict``."""

    proof_kind: str
    resident: bool | None
    host_bytes: int | None
    evict_result: str | None
    """``evicted``, ``deferred`` (in use: evicted when its last partition ends) or
    ``not_resident``; None for a preload."""


def _base(command: str, server: str) -> Result:
    return {"format": FORMAT, "command": command, "ok": False, "error": None, "server": server}


def job_result(command: str, server: str) -> JobResult:
    return {**_base(command, server), "job_id": None, "request_id": None, "proof_kind": None,
            "state": None, "partitions": None, "partitions_done": None, "job_error": None,
            "out_dir": None, "proofs": []}


def note_job(result: JobResult, job: dict[str, Any]) -> None:
    """Copy what the server said of a job (a ``JobInfo``) into ``result``."""
    parts = job.get("partitions")
    result["job_id"] = job.get("id", result["job_id"])
    result["request_id"] = job.get("request_id", result["request_id"])
    result["proof_kind"] = job.get("proof_kind", result["proof_kind"])
    result["state"] = job.get("state", result["state"])
    result["job_error"] = job.get("error")
    if isinstance(parts, list):
        result["partitions"] = len(parts)
        result["partitions_done"] = sum(
            1 for p in parts if isinstance(p, dict) and p.get("phase") == "done")


def workers_result(command: str, server: str) -> WorkersResult:
    return {**_base(command, server), "workers_paused": None}


def key_result(command: str, server: str, proof_kind: str) -> KeyResult:
    return {**_base(command, server), "proof_kind": proof_kind, "resident": None,
            "host_bytes": None, "evict_result": None}


def emit(result: Result, out: TextIO | None = None) -> None:
    """The one line a ``--json`` run prints."""
    print(json.dumps(result), file=out or sys.stdout)
