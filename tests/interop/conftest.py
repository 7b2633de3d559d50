"""A circuit cuzk has never seen, compiled with circom2 and given a key by a real snarkjs
ceremony (powers of tau of the smallest power that fits, then a phase-2 contribution), made
once per test session in a temporary directory: about ten seconds of node on two cores."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests._tools import node_bin

DATA = Path(__file__).resolve().parent / "data"
CIRCUIT = DATA / "weighted_sum.circom"
POWER = 4
"""2^4 = 16 >= 5 constraints + 6 public signals + 1: the smallest power snarkjs accepts here."""


def run(*args: object, cwd: Path | None = None, timeout: float = 120) -> str:
    proc = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=timeout, cwd=cwd
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc.stdout


@dataclass(frozen=True)
class Ceremony:
    dir: Path
    r1cs: Path
    wasm: Path
    zkey: Path
    vk: Path  # snarkjs zkey export verificationkey
    snarkjs: str
    circuit_hash: str  # what snarkjs printed as "Circuit Hash" during the phase-2 contribution

    def inputs(self, seed: int) -> dict:
        return {"a": [seed + i for i in range(4)], "w": [7 * seed + i for i in range(4)],
                "offset": seed * 3}  # fmt: skip

    def expected_public(self, inputs: dict) -> list[str]:
        out = sum(a * w for a, w in zip(inputs["a"], inputs["w"], strict=True)) + inputs["offset"]
        return [str(out), *map(str, inputs["a"]), str(inputs["offset"])]


@pytest.fixture(scope="session")
def ceremony(tmp_path_factory) -> Ceremony:
    circom = node_bin("circom2")
    snarkjs = node_bin("snarkjs")
    d = tmp_path_factory.mktemp("ceremony")
    run(circom, CIRCUIT, "--prime", "bls12381", "--r1cs", "--wasm", "--sym", "-o", d)
    run(snarkjs, "powersoftau", "new", "bls12381", POWER, d / "pot_0.ptau")
    run(snarkjs, "powersoftau", "contribute", d / "pot_0.ptau", d / "pot_1.ptau",
        "--name=first", "-e=interop test phase 1")  # fmt: skip
    run(snarkjs, "powersoftau", "prepare", "phase2", d / "pot_1.ptau", d / "pot.ptau")
    run(snarkjs, "groth16", "setup", d / "weighted_sum.r1cs", d / "pot.ptau", d / "ws_0.zkey")
    contributed = run(snarkjs, "zkey", "contribute", d / "ws_0.zkey", d / "weighted_sum.zkey",
                      "--name=second", "-e=interop test phase 2")  # fmt: skip
    run(snarkjs, "zkey", "export", "verificationkey", d / "weighted_sum.zkey", d / "vk.json")
    return Ceremony(
        dir=d,
        r1cs=d / "weighted_sum.r1cs",
        wasm=d / "weighted_sum_js" / "weighted_sum.wasm",
        zkey=d / "weighted_sum.zkey",
        vk=d / "vk.json",
        snarkjs=snarkjs,
        circuit_hash=_printed_hash(contributed, "Circuit Hash"),
    )


def _printed_hash(output: str, label: str) -> str:
    """snarkjs prints a 64-byte hash as 4 lines of 4 hex words after ``label:``."""
    lines = output.splitlines()
    (at,) = [i for i, line in enumerate(lines) if f"{label}:" in line]
    return "".join("".join(line.split()) for line in lines[at + 1 : at + 5])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cuzk_env(tmp: Path) -> dict[str, str]:
    """The environment a `cuzk` subprocess runs in: no inherited config, a private key cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUZK_")}
    env["XDG_CACHE_HOME"] = str(tmp / "cache")
    return env


def write_json(path: Path, obj: object) -> Path:
    path.write_text(json.dumps(obj))
    return path
