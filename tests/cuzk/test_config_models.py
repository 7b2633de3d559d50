"""The config sections are typed models: built in code they validate like a loaded file, their
parsers take back their own results, a secret stays hidden, and the engine stays free of them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from cuzk.config import (
    ClusterConfig,
    JournalConfig,
    ProofKindConfig,
    ProverConfig,
    ServerConfig,
    TelemetryConfig,
    engine_model,
    load_config,
)
from cuzk.engine.settings import EngineSettings


@pytest.fixture
def bundled(tmp_path: Path) -> list[SimpleNamespace]:
    files = [tmp_path / n for n in ("c.r1cs", "c.wasm", "input.json")]
    for f in files:
        f.write_text("x")
    return [SimpleNamespace(proof_kind="porep-c2", r1cs_path=files[0], wasm_path=files[1],
                            sample_input_path=files[2], partitions=10, priority="normal")]


def test_a_loaded_config_rebuilt_in_code_from_its_values_is_equal(
    tmp_path: Path, bundled: list[SimpleNamespace]
) -> None:
    """Every parser accepts what it returns (paths, None for "" / "auto" / "all", tables), so
    code that builds a section from typed values gets the same section."""
    p = tmp_path / "cuzk.toml"
    p.write_text('[server]\nauth_token = "t"\nauth_token_file = "tok"\n'
                 '[telemetry]\nnvml_replay = "r.json"\n[engine]\ncuda_devices = [1]\n'
                 '[proof_kinds.porep-c2]\nphase_seconds = {proving = 2.5}\n')
    c = load_config(p, env={}, bundled=bundled)
    sections = (c.server, c.telemetry, c.journal, c.prover, c.cluster, c.proof_kinds["porep-c2"])
    for section in sections:
        assert type(section)(**dict(section)) == section, type(section).__name__
    defaults = load_config(env={}, bundled=bundled)  # None values: no deadline, budgets "auto"
    assert defaults.proof_kinds["porep-c2"].deadline is None
    assert defaults.engine.memory_budget_bytes is None and defaults.engine.cuda_devices is None
    for config in (c, defaults):
        kind = config.proof_kinds["porep-c2"]
        assert ProofKindConfig(**dict(kind)) == kind
        model = engine_model()
        values = {k: getattr(config.engine, k) for k in model.model_fields}
        assert EngineSettings(**dict(model(**values))) == config.engine


@pytest.mark.parametrize(("model", "values", "expected"), [
    (ServerConfig, {"max_connections": 0}, "must be a positive integer, got 0"),
    (ServerConfig, {"listen": "nowhere"}, "must be HOST:PORT"),
    (ServerConfig, {"colour": "red"}, "Extra inputs are not permitted"),
    (TelemetryConfig, {"metrics": "maybe"}, "must be a boolean"),
    (JournalConfig, {"retention_s": -1}, "must be a positive number of seconds"),
    (ProverConfig, {"field_arith": "fast"}, "must be one of auto, portable"),
    (ClusterConfig, {"gpu_slots": "many"}, 'must be a positive integer or "auto"'),
])
def test_a_section_built_in_code_is_validated(
    model: type, values: dict[str, object], expected: str
) -> None:
    with pytest.raises(ValidationError) as excinfo:
        model(**values)
    assert expected in str(excinfo.value)


def test_a_secret_is_never_shown_by_the_model() -> None:
    token = "s3cr3t-t0ken-value"
    server = ServerConfig(auth_token=token)
    assert server.auth_token == token
    for shown in (repr(server), str(server.model_dump()), server.model_dump_json()):
        assert token not in shown
    assert server.model_dump()["auth_token"] == "<redacted>"
    assert ServerConfig().model_dump()["auth_token"] == ""
    with pytest.raises(ValidationError) as excinfo:
        ServerConfig(auth_token=token, listen="x")  # an error beside it
    assert token not in str(excinfo.value)
    with pytest.raises(ValidationError) as excinfo:
        ServerConfig(auth_token=123456789)  # a bad token is named, never shown
    assert "auth_token" in str(excinfo.value) and "123456789" not in str(excinfo.value)


def test_the_engine_and_the_prover_import_no_pydantic() -> None:
    """EngineSettings stays a plain dataclass (the [engine] model is built in cuzk.config from
    its declarations) and the prover reads its choices from cuzk.settings_schema: importing
    pydantic and building a model costs about 100 ms, in every process that proves."""
    code = ("import sys, cuzk.engine.settings, cuzk.engine.engine, cuzk.prover.native_msm\n"
            "print(sorted(m for m in sys.modules if m.startswith('pydantic')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "[]"
