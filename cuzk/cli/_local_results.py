"""What the local commands (``prove``, ``keygen``, ``verify``, ``circuit check``) print with
``--json``, spelled once (documented in docs/cli.md, "Output for scripts: the local commands").

The same contract as the client commands' (``cuzk submit --json``): one JSON object on one line
of stdout per run, whatever the outcome, and nothing else there; every field of a command's
shape always present (null when unknown); fields never renamed or removed, new ones may be
added; ``format`` counts incompatible changes (none yet). The exit status is 0 exactly when
``ok`` is true; ``error`` is the line the command printed on stderr, without its
``cuzk COMMAND:`` prefix."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TypedDict

FORMAT = 1


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object on stdout, whatever the outcome, instead of text (its"
        " shape: docs/cli.md, \"Output for scripts: the local commands\")",
    )


class LocalResult(TypedDict):
    """Every local command's fields."""

    format: int
    command: str
    ok: bool
    error: str | None


class Timings(TypedDict):
    """Milliseconds of each step of ``cuzk prove`` (what its text line shows)."""

    startup: float | None
    read: float
    key_load: float
    synthesize: float
    gpu_phase: float
    finalize: float


class ProveResult(LocalResult):
    name: str | None
    """The proof kind, or the circuit's name (its r1cs's or zkey's stem)."""
    zkey: str | None
    development_key: bool | None
    """True when the key is a development key made (or cached) for this run."""
    backend: str | None
    proof: str | None
    public: str | None
    """The files written; null when none were."""
    public_signals: list[str] | None
    verified: bool | None
    timings_ms: Timings | None


class KeyFiles(TypedDict):
    proof_kind: str | None
    """The bundled kind; null for ``--r1cs``."""
    r1cs: str
    zkey: str
    vk: str


class KeygenResult(LocalResult):
    keys: list[KeyFiles]
    """One entry per key made or found in the cache; empty on failure."""


class VerifyResult(LocalResult):
    valid: bool | None
    """The proof verifies; null when a file could not be read."""
    proof: str | None
    public: str | None
    """Which of the two files is the proof, which the public signals (told by content)."""
    vk: str | None
    zkey: str | None


class CheckResult(LocalResult):
    belong: bool | None
    """The files belong together; null when a file is missing or the input is refused."""
    r1cs: str
    wasm: str
    zkey: str | None
    input: str | None
    constraints: int | None
    signals: int | None
    public_signals: int | None
    domain_log2: int | None
    input_satisfied: bool | None
    """The witness of ``--input`` satisfies every constraint; null without ``--input``."""
    phase2_contributions: int | None
    circuit_hash: str | None
    """Section 10's hash, as snarkjs prints "Circuit Hash"; null without that section."""


def base(command: str) -> LocalResult:
    return {"format": FORMAT, "command": command, "ok": False, "error": None}


def finish(args: argparse.Namespace, result: LocalResult, code: int,
           error: str | None = None) -> int:
    """The end of a run: the error line on stderr (``cuzk COMMAND: ...``) when there is one,
    the JSON object on stdout with ``--json``; returns the exit status."""
    if error is not None:
        line = " ".join(error.split())
        print(f"cuzk {result['command']}: {line}", file=sys.stderr)
        result["error"] = line
    result["ok"] = code == 0
    if getattr(args, "json", False):
        print(json.dumps(result))
    return code
