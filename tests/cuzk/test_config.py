"""Config: defaults, file, env overrides with typed parsing, and errors that name the key."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from cuzk.config import (
    DEFAULT_CONFIG_PATH,
    PROOF_KIND_SCHEMA,
    SCHEMA,
    Config,
    ConfigError,
    byte_size,
    load_config,
)
from cuzk.engine.settings import default_threads


def _files(tmp_path: Path, name: str) -> tuple[Path, Path, Path]:
    d = tmp_path / name
    d.mkdir()
    r1cs, wasm, inp = d / "c.r1cs", d / "c.wasm", d / "input.json"
    for f in (r1cs, wasm, inp):
        f.write_text("x")
    return r1cs, wasm, inp


@pytest.fixture
def bundled(tmp_path: Path) -> list[SimpleNamespace]:
    """Two stand-in bundled kinds with real files, independent of the shipped circuits."""
    out = []
    for name, parts, prio in (("porep-c2", 10, "normal"), ("winning-post", 1, "critical")):
        r1cs, wasm, inp = _files(tmp_path, name)
        out.append(
            SimpleNamespace(
                proof_kind=name,
                r1cs_path=r1cs,
                wasm_path=wasm,
                sample_input_path=inp,
                partitions=parts,
                priority=prio,
            )
        )
    return out


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "cuzk.toml"
    p.write_text(text)
    return p


def problems(excinfo: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return excinfo.value.problems


def test_defaults(bundled: list[SimpleNamespace]) -> None:
    c = load_config(env={}, bundled=bundled)
    assert c.server.listen == "127.0.0.1:9820"
    assert (c.server.host, c.server.port) == ("127.0.0.1", 9820)
    assert c.engine.backend == "auto"
    assert c.engine.gpu_workers_per_device == 2
    assert c.engine.memory_budget_bytes is None  # auto
    assert c.engine.self_verify is True
    assert c.engine.keys_dir == Path("~/.cache/cuzk/keys").expanduser()
    assert c.telemetry.metrics and c.telemetry.tracing
    assert c.telemetry.service_name == "cuzk"
    assert c.telemetry.otlp_endpoint is None
    assert list(c.proof_kinds) == ["porep-c2", "winning-post"]
    porep = c.proof_kinds["porep-c2"]
    assert porep.partitions == 10 and porep.priority == "normal" and porep.bundled
    assert porep.zkey is None
    assert porep.r1cs == bundled[0].r1cs_path


def test_shipped_default_toml_documents_every_key_and_matches_code(
    bundled: list[SimpleNamespace],
) -> None:
    """default_config.toml is the documentation; loading it must change nothing."""
    text = DEFAULT_CONFIG_PATH.read_text()
    for section, keys in SCHEMA.items():
        assert f"[{section}]" in text
        for key in keys:
            assert re.search(rf"^#? ?{key} = ", text, re.M), f"{section}.{key} undocumented"
    for key in PROOF_KIND_SCHEMA:
        assert re.search(rf"^# {key} = ", text, re.M), f"proof_kinds.*.{key} undocumented"
    tomllib.loads(text)
    from_file = load_config(DEFAULT_CONFIG_PATH, env={}, bundled=bundled)
    from_code = load_config(env={}, bundled=bundled)
    assert from_file.source == DEFAULT_CONFIG_PATH.resolve()
    assert from_file.to_dict() | {"source": None} == from_code.to_dict()


def test_file_values_and_relative_paths(tmp_path: Path, bundled: list[SimpleNamespace]) -> None:
    _files(tmp_path, "mine")
    p = write(
        tmp_path,
        """
[server]
listen = "0.0.0.0:8080"
max_body_bytes = "1MiB"
[engine]
backend = "cpu"
gpu_workers_per_device = 3
synthesis_threads = 4
memory_budget_bytes = "8GiB"
keys_dir = "keys"
self_verify = false
cuda_devices = [0, 2]
[telemetry]
service_name = "prover-a"
metrics = false
otlp_endpoint = "http://collector:4317"
[proof_kinds.porep-c2]
partitions = 4
priority = "high"
[proof_kinds.winning-post]
enabled = false
[proof_kinds.my-kind]
r1cs = "mine/c.r1cs"
wasm = "mine/c.wasm"
""",
    )
    c = load_config(p, env={}, bundled=bundled)
    assert c.server.listen == "0.0.0.0:8080" and c.server.max_body_bytes == 2**20
    assert c.engine.backend == "cpu" and c.engine.gpu_workers_per_device == 3
    assert c.engine.synthesis_threads == 4
    assert c.engine.finalizer_threads == default_threads("finalizer")  # "auto"
    assert c.engine.memory_budget_bytes == 8 * 2**30
    assert c.engine.keys_dir == tmp_path / "keys"
    assert c.engine.self_verify is False
    assert c.engine.cuda_devices == (0, 2)
    assert c.telemetry.service_name == "prover-a" and c.telemetry.metrics is False
    assert c.telemetry.otlp_endpoint == "http://collector:4317"
    assert set(c.proof_kinds) == {"porep-c2", "my-kind"}
    assert c.proof_kinds["porep-c2"].partitions == 4
    assert c.proof_kinds["porep-c2"].priority == "high"
    assert c.proof_kinds["porep-c2"].r1cs == bundled[0].r1cs_path  # untouched fields kept
    mine = c.proof_kinds["my-kind"]
    assert mine.r1cs == tmp_path / "mine" / "c.r1cs" and not mine.bundled
    assert (mine.partitions, mine.priority) == (1, "normal")


def test_env_overrides_file_with_typed_values(
    tmp_path: Path, bundled: list[SimpleNamespace]
) -> None:
    p = write(tmp_path, '[server]\nlisten = "0.0.0.0:1"\n[engine]\nself_verify = true\n')
    env = {
        "CUZK_SERVER_LISTEN": "127.0.0.1:8080",
        "CUZK_SERVER_MAX_BODY_BYTES": "2048",
        "CUZK_ENGINE_GPU_WORKERS_PER_DEVICE": "4",
        "CUZK_ENGINE_SELF_VERIFY": "no",
        "CUZK_ENGINE_MEMORY_BUDGET_BYTES": "512MiB",
        "CUZK_ENGINE_SYNTHESIS_THREADS": "auto",
        "CUZK_ENGINE_CUDA_DEVICES": "1,0",
        "CUZK_TELEMETRY_TRACING": "off",
        "CUZK_TELEMETRY_OTLP_ENDPOINT": "",
        "CUZK_PROOF_KINDS_POREP_C2_PARTITIONS": "2",
        "CUZK_PROOF_KINDS_WINNING_POST_PRIORITY": "LOW",
        # Other CUZK_* variables are not config keys and are left alone.
        "CUZK_URL": "http://elsewhere",
        "CUZK_CONFIG": "/nonexistent.toml",
        "UNRELATED": "1",
    }
    c = load_config(p, env=env, bundled=bundled)
    assert c.server.listen == "127.0.0.1:8080"
    assert c.server.max_body_bytes == 2048
    assert c.engine.gpu_workers_per_device == 4
    assert c.engine.self_verify is False
    assert c.engine.memory_budget_bytes == 512 * 2**20
    assert c.engine.synthesis_threads == default_threads("synthesis")  # "auto"
    assert c.engine.cuda_devices == (1, 0)
    assert c.telemetry.tracing is False
    assert c.telemetry.otlp_endpoint is None
    assert c.proof_kinds["porep-c2"].partitions == 2
    assert c.proof_kinds["winning-post"].priority == "low"


def test_command_line_override_wins(bundled: list[SimpleNamespace]) -> None:
    c = load_config(
        env={"CUZK_SERVER_LISTEN": "127.0.0.1:1"},
        bundled=bundled,
        overrides={"server.listen": "[::1]:9000"},
    )
    assert c.server.listen == "[::1]:9000" and c.server.host == "::1" and c.server.port == 9000
    c = load_config(env={}, bundled=bundled, overrides={"server.listen": None})
    assert c.server.listen == "127.0.0.1:9820"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"CUZK_ENGINE_GPU_WORKERS_PER_DEVICE": "x"},
            "engine.gpu_workers_per_device (from CUZK_ENGINE_GPU_WORKERS_PER_DEVICE): "
            "must be a positive integer, got 'x'",
        ),
        ({"CUZK_ENGINE_GPU_WORKERS_PER_DEVICE": "0"}, "engine.gpu_workers_per_device"),
        ({"CUZK_ENGINE_SYNTHESIS_THREADS": "-1"}, "engine.synthesis_threads"),
        (
            {"CUZK_ENGINE_RESERVED_GPU_WORKERS_PER_DEVICE": "-1"},
            "engine.reserved_gpu_workers_per_device (from "
            "CUZK_ENGINE_RESERVED_GPU_WORKERS_PER_DEVICE): must be an integer >= 0, got '-1'",
        ),
        ({"CUZK_ENGINE_FINALIZER_THREADS": "many"}, "engine.finalizer_threads"),
        ({"CUZK_ENGINE_BACKEND": "tpu"}, "engine.backend (from CUZK_ENGINE_BACKEND): must be"),
        ({"CUZK_ENGINE_MEMORY_BUDGET_BYTES": "lots"}, "engine.memory_budget_bytes"),
        ({"CUZK_ENGINE_MEMORY_BUDGET_BYTES": "0"}, "engine.memory_budget_bytes"),
        ({"CUZK_ENGINE_MEMORY_SAFETY_MARGIN_BYTES": "5XB"}, "engine.memory_safety_margin_bytes"),
        ({"CUZK_ENGINE_DEVICE_MEMORY_BUDGET_BYTES": "x"}, "engine.device_memory_budget_bytes"),
        ({"CUZK_ENGINE_CUDA_DEVICES": "0,0"}, "engine.cuda_devices"),
        ({"CUZK_ENGINE_SELF_VERIFY": "maybe"}, "engine.self_verify"),
        ({"CUZK_SERVER_LISTEN": "nowhere"}, "server.listen (from CUZK_SERVER_LISTEN)"),
        ({"CUZK_SERVER_LISTEN": "127.0.0.1:99999"}, "server.listen"),
        ({"CUZK_SERVER_MAX_BODY_BYTES": "-5"}, "server.max_body_bytes"),
        ({"CUZK_TELEMETRY_METRICS": "2"}, "telemetry.metrics"),
        ({"CUZK_TELEMETRY_SERVICE_NAME": ""}, "telemetry.service_name"),
        ({"CUZK_SERVER_PORT": "1"}, "CUZK_SERVER_PORT: server.port: unknown key"),
        ({"CUZK_PROOF_KINDS_POREP_C2_PARTITIONS": "0"}, "proof_kinds.porep-c2.partitions"),
        ({"CUZK_PROOF_KINDS_POREP_C2_PRIORITY": "urgent"}, "proof_kinds.porep-c2.priority"),
        ({"CUZK_PROOF_KINDS_POREP_C2_COLOUR": "red"}, "proof_kinds.porep-c2.colour: unknown"),
        ({"CUZK_PROOF_KINDS_NOPE_PARTITIONS": "1"}, "CUZK_PROOF_KINDS_NOPE_PARTITIONS: no proof"),
        ({"CUZK_PROOF_KINDS_POREP_C2_ZKEY": "/no/such.zkey"}, "proof_kinds.porep-c2.zkey"),
    ],
)
def test_env_errors_name_the_key(
    env: dict[str, str], expected: str, bundled: list[SimpleNamespace]
) -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(env=env, bundled=bundled)
    assert len(problems(excinfo)) == 1, problems(excinfo)
    assert expected in problems(excinfo)[0]
    assert expected in str(excinfo.value)


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("[server]\nlisten = 9820\n", "server.listen: must be HOST:PORT"),
        ("[server]\nport = 1\n", "server.port: unknown key"),
        ("[sever]\nlisten = '1.2.3.4:5'\n", "sever: unknown section; did you mean 'server'?"),
        ("[engine]\ngpu_worker_per_device = 1\n", "did you mean 'gpu_workers_per_device'?"),
        ("server = 1\n", "server: must be a table"),
        ("[engine]\ngpu_workers_per_device = true\n", "engine.gpu_workers_per_device"),
        ("[engine]\ngpu_workers_per_device = 1.5\n", "engine.gpu_workers_per_device"),
        ("[engine]\nmemory_budget_bytes = -1\n", "engine.memory_budget_bytes"),
        ("[engine]\nself_verify = 'perhaps'\n", "engine.self_verify"),
        ("[engine]\ncuda_devices = [-1]\n", "engine.cuda_devices"),
        ("[engine]\nkeys_dir = 3\n", "engine.keys_dir: must be a path string"),
        ("[journal]\npath = false\n", "journal.path: must be a path string"),
        ("[telemetry]\ntracing = 3\n", "telemetry.tracing"),
        ("[proof_kinds.porep-c2]\npartitions = 0\n", "proof_kinds.porep-c2.partitions"),
        ("[proof_kinds.porep-c2]\nshape = 'x'\n", "proof_kinds.porep-c2.shape: unknown key"),
        ("[proof_kinds.new]\npartitions = 2\n", "proof_kinds.new.r1cs: required"),
        ("[proof_kinds.Bad_Name]\npartitions = 2\n", "proof_kinds.Bad_Name: proof kind names"),
        ("[proof_kinds.new]\nr1cs = 'a.r1cs'\nwasm = 'a.wasm'\n", "proof_kinds.new.r1cs: no such"),
        ("proof_kinds = 3\n", "proof_kinds: must be a table"),
    ],
)
def test_file_errors_name_the_key(
    tmp_path: Path, toml: str, expected: str, bundled: list[SimpleNamespace]
) -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(write(tmp_path, toml), env={}, bundled=bundled)
    assert any(expected in p for p in problems(excinfo)), problems(excinfo)


def test_all_problems_reported_at_once(tmp_path: Path, bundled: list[SimpleNamespace]) -> None:
    p = write(tmp_path, "[engine]\nbackend = 'x'\ngpu_workers_per_device = 'y'\n")
    with pytest.raises(ConfigError) as excinfo:
        load_config(p, env={"CUZK_SERVER_LISTEN": "z"}, bundled=bundled)
    text = str(excinfo.value)
    for key in ("engine.backend", "engine.gpu_workers_per_device", "server.listen"):
        assert key in text


def test_unreadable_files(tmp_path: Path, bundled: list[SimpleNamespace]) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.toml", env={}, bundled=bundled)
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "[server\n"), env={}, bundled=bundled)


def test_no_enabled_kind_is_an_error(tmp_path: Path, bundled: list[SimpleNamespace]) -> None:
    p = write(
        tmp_path, "[proof_kinds.porep-c2]\nenabled=false\n[proof_kinds.winning-post]\nenabled=0\n"
    )
    with pytest.raises(ConfigError, match=r"proof_kinds\.winning-post\.enabled"):
        load_config(p, env={}, bundled=bundled)
    p = write(
        tmp_path,
        "[proof_kinds.porep-c2]\nenabled=false\n[proof_kinds.winning-post]\nenabled=false\n",
    )
    with pytest.raises(ConfigError, match="no proof kind is enabled"):
        load_config(p, env={}, bundled=bundled)


def test_missing_bundled_files_only_checked_when_asked(tmp_path: Path) -> None:
    ghost = SimpleNamespace(
        proof_kind="ghost",
        r1cs_path=tmp_path / "no.r1cs",
        wasm_path=tmp_path / "no.wasm",
        sample_input_path=None,
        partitions=1,
        priority="low",
    )
    with pytest.raises(ConfigError, match=r"proof_kinds\.ghost\.r1cs: no such file"):
        load_config(env={}, bundled=[ghost])
    assert "ghost" in load_config(env={}, bundled=[ghost], check_files=False).proof_kinds


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (0, 0),
        (4096, 4096),
        ("4096", 4096),
        ("8GiB", 8 * 2**30),
        ("8 gib", 8 * 2**30),
        ("2GB", 2 * 10**9),
        ("1.5MiB", 3 * 2**19),
        ("64K", 64 * 1024),
    ],
)
def test_byte_sizes(text: object, value: int) -> None:
    assert byte_size(text) == value


def test_engine_settings_from_config(tmp_path: Path, bundled: list[SimpleNamespace]) -> None:
    from cuzk.engine import settings as settings_mod
    p = write(
        tmp_path,
        "[engine]\nbackend='cpu'\ngpu_workers_per_device=3\nsynthesis_threads=5\n"
        "memory_budget_bytes='1GiB'\n[telemetry]\nmetrics=false\n"
        "[proof_kinds.porep-c2]\npartitions=3\n",
    )
    config = load_config(p, env={}, bundled=bundled)
    s = config.engine_settings()
    assert isinstance(s, settings_mod.EngineSettings)
    assert s.backend == "cpu" and s.gpu_workers_per_device == 3
    assert s.synthesis_threads == 5 and s.finalizer_threads >= 1
    assert s.memory_budget_bytes == 2**30
    assert s.metrics_enabled is False and s.tracing_enabled is True
    assert s.keys_dir == config.engine.keys_dir
    assert set(s.proof_kinds) == {"porep-c2", "winning-post"}
    k = s.proof_kinds["porep-c2"]
    assert (k.partitions, k.priority, k.r1cs) == (3, "normal", bundled[0].r1cs_path)
    assert s.proof_kinds["winning-post"].priority == "critical"


def test_config_dataclass_defaults_agree_with_schema(
    bundled: list[SimpleNamespace], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Config() (used when the API is built without a file) must mean the same as no file."""
    for variable in ("XDG_STATE_HOME", "XDG_CACHE_HOME"):  # Config() reads the real environment
        monkeypatch.delenv(variable, raising=False)
    loaded = load_config(env={}, bundled=bundled).to_dict()
    bare = Config().to_dict()
    for section in SCHEMA:
        assert bare[section] == loaded[section], section


def test_server_and_journal_keys_declared_with_defaults(bundled: list[SimpleNamespace]) -> None:
    c = load_config(env={}, bundled=bundled)
    s = c.server
    assert (s.auth_token, s.auth_token_file) == ("", None)
    assert s.allow_unauthenticated is False and s.metrics_require_auth is False
    assert (s.header_timeout_s, s.body_timeout_s, s.keepalive_timeout_s) == (5.0, 30.0, 5.0)
    assert (s.max_connections, s.max_requests_in_flight, s.drain_timeout_s) == (1024, 256, 30.0)
    j = c.journal
    assert j.enabled is True
    assert j.path == Path.home() / ".local" / "state" / "cuzk" / "journal.sqlite3"
    assert (j.retention_jobs, j.retention_s) == (10000, 604800)


def test_server_and_journal_keys_from_file_and_env(
    tmp_path: Path, bundled: list[SimpleNamespace]
) -> None:
    p = write(
        tmp_path,
        '[server]\nauth_token_file = "secrets/token"\nheader_timeout_s = 2\n'
        'max_connections = 10\n[journal]\npath = "state/j.sqlite3"\nretention_s = 3600\n',
    )
    env = {
        "CUZK_SERVER_ALLOW_UNAUTHENTICATED": "yes",
        "CUZK_SERVER_BODY_TIMEOUT_S": "0.5",
        "CUZK_JOURNAL_ENABLED": "off",
        "CUZK_JOURNAL_RETENTION_JOBS": "7",
    }
    c = load_config(p, env=env, bundled=bundled)
    assert c.server.auth_token_file == tmp_path / "secrets" / "token"
    assert c.server.header_timeout_s == 2.0 and c.server.body_timeout_s == 0.5
    assert c.server.max_connections == 10 and c.server.allow_unauthenticated is True
    assert c.journal.path == tmp_path / "state" / "j.sqlite3"
    assert c.journal.enabled is False
    assert (c.journal.retention_jobs, c.journal.retention_s) == (7, 3600.0)
    state = tmp_path / "xdg-state"
    c = load_config(env={"XDG_STATE_HOME": str(state)}, bundled=bundled)
    assert c.journal.path == state / "cuzk" / "journal.sqlite3"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"CUZK_SERVER_HEADER_TIMEOUT_S": "0"}, "server.header_timeout_s (from CUZK_SERVER_HEAD"),
        ({"CUZK_SERVER_DRAIN_TIMEOUT_S": "soon"}, "server.drain_timeout_s"),
        ({"CUZK_SERVER_MAX_CONNECTIONS": "0"}, "server.max_connections"),
        ({"CUZK_SERVER_METRICS_REQUIRE_AUTH": "perhaps"}, "server.metrics_require_auth"),
        ({"CUZK_JOURNAL_RETENTION_S": "-1"}, "journal.retention_s"),
        ({"CUZK_JOURNAL_RETENTION_JOBS": "x"}, "journal.retention_jobs"),
        ({"CUZK_JOURNAL_COLOUR": "red"}, "CUZK_JOURNAL_COLOUR: journal.colour: unknown key"),
    ],
)
def test_new_keys_errors_name_the_key(
    env: dict[str, str], expected: str, bundled: list[SimpleNamespace]
) -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(env=env, bundled=bundled)
    assert len(problems(excinfo)) == 1 and expected in problems(excinfo)[0], problems(excinfo)


def test_auth_token_is_never_printed(tmp_path: Path, bundled: list[SimpleNamespace]) -> None:
    token = "s3cr3t-t0ken-value"
    p = write(tmp_path, f'[server]\nauth_token = "{token}"\n')
    c = load_config(p, env={}, bundled=bundled)
    assert c.server.auth_token == token
    assert token not in repr(c) and token not in str(c.to_dict())
    assert c.to_dict()["server"]["auth_token"] == "<redacted>"
    # Errors beside a configured token do not show it; an invalid one is named, not shown.
    with pytest.raises(ConfigError) as excinfo:
        load_config(p, env={"CUZK_SERVER_LISTEN": "x"}, bundled=bundled)
    assert "server.listen" in str(excinfo.value) and token not in str(excinfo.value)
    with pytest.raises(ConfigError) as excinfo:
        load_config(write(tmp_path, "[server]\nauth_token = 12345678\n"), env={}, bundled=bundled)
    assert "server.auth_token" in str(excinfo.value) and "12345678" not in str(excinfo.value)


def test_otel_service_name_is_the_fallback(bundled: list[SimpleNamespace]) -> None:
    c = load_config(env={"OTEL_SERVICE_NAME": "from-otel"}, bundled=bundled)
    assert c.telemetry.service_name == "from-otel"
    env = {"OTEL_SERVICE_NAME": "from-otel", "CUZK_TELEMETRY_SERVICE_NAME": "mine"}
    assert load_config(env=env, bundled=bundled).telemetry.service_name == "mine"


def test_proof_kind_env_keys_with_underscores(
    tmp_path: Path, bundled: list[SimpleNamespace]
) -> None:
    sample = tmp_path / "other-input.json"
    sample.write_text("{}")
    env = {"CUZK_PROOF_KINDS_POREP_C2_SAMPLE_INPUT": str(sample)}
    c = load_config(env=env, bundled=bundled)
    assert c.proof_kinds["porep-c2"].sample_input == sample


def test_engine_settings_carry_every_engine_key(
    tmp_path: Path, bundled: list[SimpleNamespace]
) -> None:
    """Nothing the config declares for the engine is dropped on the way to the engine."""
    p = write(
        tmp_path,
        "[engine]\nbackend='cpu'\ngpu_workers_per_device=5\nreserved_gpu_workers_per_device=0\n"
        "synthesis_threads=3\n"
        "finalizer_threads=7\nmemory_budget_bytes='3GiB'\nmemory_safety_margin_bytes='1GiB'\n"
        "device_memory_budget_bytes='2GiB'\ndevice_memory_safety_margin_bytes=12345\n"
        "cuda_devices=[1]\nkeys_dir='k'\nself_verify=false\ndeadline_horizon='2d'\n"
        "request_parse_reserve_bytes='1MiB'\n",
    )
    config = load_config(p, env={}, bundled=bundled)
    s = config.engine_settings()
    for key in SCHEMA["engine"]:
        assert getattr(s, key) == getattr(config.engine, key), key
        assert getattr(s, key) != getattr(Config().engine, key), f"{key} kept its default"


def test_bundled_proof_kind_defaults_are_written_once() -> None:
    """The engine's default kinds and the config's come from the circuit registry."""
    from cuzk.circuits.registry import bundled_circuits
    from cuzk.engine.settings import default_proof_kinds

    registry = bundled_circuits()
    engine_kinds = default_proof_kinds()
    config_kinds = load_config(env={}, check_files=False).proof_kinds
    assert list(engine_kinds) == list(registry) == list(config_kinds)
    for name, c in registry.items():
        assert (engine_kinds[name].partitions, engine_kinds[name].priority) == (
            c.partitions,
            c.priority,
        )
        assert (config_kinds[name].partitions, config_kinds[name].priority) == (
            c.partitions,
            c.priority,
        )
        assert engine_kinds[name].r1cs == config_kinds[name].r1cs == c.r1cs_path


def test_keys_dir_follows_xdg_cache_home_like_the_key_store(
    tmp_path: Path, bundled: list[SimpleNamespace], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server looks for development keys where `cuzk keygen` puts them."""
    cache = tmp_path / "cache"
    c = load_config(env={"XDG_CACHE_HOME": str(cache)}, bundled=bundled)
    assert c.engine.keys_dir == cache / "cuzk" / "keys"
    c = load_config(env={"XDG_CACHE_HOME": "relative"}, bundled=bundled)  # ignored, as XDG says
    assert c.engine.keys_dir == Path.home() / ".cache" / "cuzk" / "keys"
    # "" (the declared default) from a variable clears a keys_dir set in the file.
    p = write(tmp_path, '[engine]\nkeys_dir = "mine"\n')
    assert load_config(p, env={}, bundled=bundled).engine.keys_dir == tmp_path / "mine"
    c = load_config(p, env={"CUZK_ENGINE_KEYS_DIR": " "}, bundled=bundled)
    assert c.engine.keys_dir == Path.home() / ".cache" / "cuzk" / "keys"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    import importlib

    import cuzk.prover.keystore as keystore

    keystore = importlib.reload(keystore)  # its default is read at import
    try:
        assert load_config(bundled=bundled).engine.keys_dir == keystore.DEFAULT_KEYS_DIR
    finally:
        monkeypatch.delenv("XDG_CACHE_HOME")
        importlib.reload(keystore)
