"""cuzk configuration: one TOML file, every key overridable by a ``CUZK_<SECTION>_<KEY>`` variable.

Precedence, lowest first: built-in defaults (documented in ``cuzk/default_config.toml``), the
TOML file, then the environment. Everything is validated when loaded, and every error names the
key it is about (and the environment variable, when the value came from one), so a bad
deployment fails at start instead of at the first proof.

Proof kinds default to the bundled circuits; ``[proof_kinds.<name>]`` tables override the
fields of a bundled kind or add a new one, and ``enabled = false`` drops one. Environment
overrides for a proof kind use the kind's name upper-cased with ``-`` and ``.`` as ``_``:
``CUZK_PROOF_KINDS_POREP_C2_PARTITIONS=4``.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cuzk.engine.settings import (
    DEFAULT_DRAIN_TIMEOUT_S,
    DEFAULT_RETENTION_JOBS,
    DEFAULT_RETENTION_S,
)
from cuzk.errors import CuzkError
from cuzk.protocol import PRIORITIES

BACKENDS = ("auto", "cpu", "cuda")
DEFAULT_LISTEN = "127.0.0.1:9820"
DEFAULT_CONFIG_PATH = Path(__file__).parent / "default_config.toml"
ENV_PREFIX = "CUZK_"


class ConfigError(CuzkError):
    """One or more configuration problems; each line names the key (and env variable) at fault."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid configuration:\n" + "\n".join(f"  {p}" for p in self.problems))


# --------------------------------------------------------------------------- value parsers
# Each parser takes the raw value (a TOML value, or the string from an environment variable) and
# the directory relative paths are resolved against; it raises ValueError with a message that
# does not name the key (the caller prefixes it).


def _got(value: object) -> str:
    return f"got {value!r}"


def _int(value: object, *, minimum: int, what: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"must be {what}, {_got(value)}")
    if isinstance(value, int):
        result = value
    elif isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        result = int(value)
    else:
        raise ValueError(f"must be {what}, {_got(value)}")
    if result < minimum:
        raise ValueError(f"must be {what}, {_got(value)}")
    return result


def positive_int(value: object, base: Path | None = None) -> int:
    return _int(value, minimum=1, what="a positive integer")


def _threads(value: object, base: Path | None = None) -> int | None:
    """``"auto"`` leaves the choice to the engine (sized from the CPU count)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return None
    return _int(value, minimum=1, what='a positive integer or "auto"')


_BYTE_UNITS = {
    "": 1, "b": 1,
    "k": 2**10, "kib": 2**10, "kb": 10**3,
    "m": 2**20, "mib": 2**20, "mb": 10**6,
    "g": 2**30, "gib": 2**30, "gb": 10**9,
    "t": 2**40, "tib": 2**40, "tb": 10**12,
}  # fmt: skip


def byte_size(value: object, base: Path | None = None) -> int:
    """A byte count: an integer, or a string such as ``"8GiB"``, ``"512 MiB"``, ``"2GB"``."""
    what = 'a byte size (an integer or a string such as "8GiB")'
    if isinstance(value, bool):
        raise ValueError(f"must be {what}, {_got(value)}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"must be {what} >= 0, {_got(value)}")
        return value
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", value)
        if m and m.group(2).lower() in _BYTE_UNITS:
            return int(float(m.group(1)) * _BYTE_UNITS[m.group(2).lower()])
    raise ValueError(f"must be {what}, {_got(value)}")


def _byte_size_or_auto(value: object, base: Path | None = None) -> int | None:
    """``"auto"``: the engine sizes it from the machine (MemTotal minus the safety margin)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return None
    try:
        result = byte_size(value)
    except ValueError:
        raise ValueError(
            f'must be "auto" or a byte size (an integer or a string such as "8GiB"), {_got(value)}'
        ) from None
    if result == 0:
        raise ValueError(f'must be "auto" or a byte size > 0, {_got(value)}')
    return result


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def boolean(value: object, base: Path | None = None) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"must be a boolean (true/false), {_got(value)}")


def _string(value: object, base: Path | None = None) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a non-empty string, {_got(value)}")
    return value.strip()


def _optional_string(value: object, base: Path | None = None) -> str | None:
    """An empty string means "not set", so an env variable can clear a value from the file."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _string(value)


def _positive_seconds(value: object, base: Path | None = None) -> float:
    what = "a number of seconds > 0"
    if isinstance(value, bool):
        raise ValueError(f"must be {what}, {_got(value)}")
    try:
        result = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"must be {what}, {_got(value)}") from None
    if not 0 < result < float("inf"):
        raise ValueError(f"must be {what}, {_got(value)}")
    return result


def _choice(options: tuple[str, ...]) -> Callable[[object, Path | None], str]:
    def parse(value: object, base: Path | None = None) -> str:
        if isinstance(value, str) and value.strip().lower() in options:
            return value.strip().lower()
        raise ValueError(f"must be one of {', '.join(options)}; {_got(value)}")

    return parse


def parse_listen(value: object, base: Path | None = None) -> str:
    """``HOST:PORT`` (IPv6 hosts in brackets); returns it normalized."""
    host, port = split_listen(value)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def split_listen(value: object) -> tuple[str, int]:
    what = "must be HOST:PORT (for example 127.0.0.1:9820)"
    if not isinstance(value, str) or ":" not in value:
        raise ValueError(f"{what}, {_got(value)}")
    host, _, port_text = value.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"{what}, {_got(value)}")
    return host, int(port_text)


def _path(value: object, base: Path | None = None) -> Path:
    """A path; ``~`` is expanded and a relative path is taken from the config file's directory."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a non-empty path string, {_got(value)}")
    p = Path(value.strip()).expanduser()
    if not p.is_absolute():
        p = (base or Path.cwd()) / p
    return p


def _optional_path(value: object, base: Path | None = None) -> Path | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _path(value, base)


def _devices(value: object, base: Path | None = None) -> tuple[int, ...] | None:
    """``"all"`` (None), a list of device indices, or a comma-separated string of them."""
    what = 'must be "all" or a list of CUDA device indices such as [0, 1] or "0,1"'
    if isinstance(value, str):
        if value.strip().lower() == "all":
            return None
        parts = [p.strip() for p in value.split(",")]
    elif isinstance(value, list):
        parts = value
    else:
        raise ValueError(f"{what}, {_got(value)}")
    try:
        devices = tuple(_int(p, minimum=0, what="an index") for p in parts)
    except ValueError:
        raise ValueError(f"{what}, {_got(value)}") from None
    if not devices or len(set(devices)) != len(devices):
        raise ValueError(f"{what} (non-empty, no repeats), {_got(value)}")
    return devices


def _proof_kind_name(name: str) -> str | None:
    """Proof kind names are labels and URL path parts: keep them plain."""
    if re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,63}", name):
        return None
    return (
        "proof kind names must be 1-64 characters of lower-case letters, digits, '.', '_' or '-',"
        f" starting with a letter or digit; got {name!r}"
    )


# --------------------------------------------------------------------------- schema


DEFAULT_KEYS_DIR = "~/.cache/cuzk/keys"


@dataclass(frozen=True)
class _Key:
    parse: Callable[[Any, Path | None], Any]
    default: Any  # raw (unparsed) default, or a zero-argument callable producing one
    doc: str


SCHEMA: dict[str, dict[str, _Key]] = {
    "server": {
        "listen": _Key(parse_listen, DEFAULT_LISTEN, "HOST:PORT the HTTP API listens on"),
        "max_body_bytes": _Key(
            byte_size, "8MiB", "largest request body accepted; larger ones get 413"
        ),
        "auth_token": _Key(
            _optional_string, None, "bearer token every route but health needs; empty = off"
        ),
        "auth_token_file": _Key(
            _optional_path, None, "file holding the bearer token (instead of auth_token)"
        ),
        "allow_unauthenticated": _Key(
            boolean, False, "allow a non-loopback listen without a token"
        ),
        "metrics_require_auth": _Key(boolean, False, "/metrics needs the token too"),
        "header_timeout_s": _Key(
            _positive_seconds, 5.0, "time to receive a request's headers (408 / close after)"
        ),
        "body_timeout_s": _Key(
            _positive_seconds, 30.0, "time to receive a request's body once its headers are in"
        ),
        "keepalive_timeout_s": _Key(
            _positive_seconds, 5.0, "an idle kept-alive connection is closed after this"
        ),
        "max_connections": _Key(positive_int, 1024, "open connections; more are refused (503)"),
        "max_requests_in_flight": _Key(
            positive_int, 256, "requests being handled at once; more get 503"
        ),
        "drain_timeout_s": _Key(
            _positive_seconds,
            DEFAULT_DRAIN_TIMEOUT_S,
            "on SIGTERM/SIGINT, how long partitions in flight may take to finish",
        ),
    },
    "journal": {
        "enabled": _Key(boolean, True, "journal accepted jobs so they survive a restart"),
        "path": _Key(
            _optional_path, "", "SQLite journal file; empty = $XDG_STATE_HOME/cuzk/journal.sqlite3"
        ),
        "retention_jobs": _Key(
            positive_int, DEFAULT_RETENTION_JOBS, "finished jobs kept (newest first)"
        ),
        "retention_s": _Key(
            _positive_seconds, DEFAULT_RETENTION_S, "seconds a finished job is kept"
        ),
    },
    "engine": {
        "backend": _Key(
            _choice(BACKENDS), "auto", "auto (CUDA when usable, else CPU), cpu or cuda"
        ),
        "gpu_workers_per_device": _Key(positive_int, 2, "GPU workers per device"),
        "synthesis_threads": _Key(_threads, "auto", "CPU threads synthesizing partitions"),
        "finalizer_threads": _Key(_threads, "auto", "CPU threads finalizing partitions"),
        "memory_budget_bytes": _Key(
            _byte_size_or_auto, "auto", "host memory budget; auto = MemTotal minus margin"
        ),
        "memory_safety_margin_bytes": _Key(
            byte_size, "2GiB", "left out of an auto-detected budget"
        ),
        "device_memory_budget_bytes": _Key(
            _byte_size_or_auto, "auto", "per-GPU memory budget; auto = device total minus margin"
        ),
        "device_memory_safety_margin_bytes": _Key(
            byte_size, "1GiB", "left out of an auto-detected device budget"
        ),
        "cuda_devices": _Key(_devices, "all", 'CUDA device indices, "all" or e.g. "0,1"'),
        "keys_dir": _Key(_path, DEFAULT_KEYS_DIR, "where generated proving keys are cached"),
        "self_verify": _Key(boolean, True, "verify every proof before returning it"),
    },
    "telemetry": {
        "service_name": _Key(
            _string,
            lambda: os.environ.get("OTEL_SERVICE_NAME") or "cuzk",
            "OpenTelemetry service.name (default: $OTEL_SERVICE_NAME or cuzk)",
        ),
        "metrics": _Key(boolean, True, "serve Prometheus metrics on /metrics"),
        "tracing": _Key(boolean, True, "record OpenTelemetry spans"),
        "otlp_endpoint": _Key(
            _optional_string, None, "OTLP endpoint; unset = the standard OTEL_* variables"
        ),
    },
}

PROOF_KIND_SCHEMA: dict[str, _Key] = {
    "enabled": _Key(boolean, True, "false drops the kind (for example a bundled one)"),
    "r1cs": _Key(_path, None, "circuit .r1cs (required for a kind that is not bundled)"),
    "wasm": _Key(_path, None, "witness generator .wasm (required for a kind that is not bundled)"),
    "zkey": _Key(_optional_path, None, "proving key; unset = generated into keys_dir on first use"),
    "sample_input": _Key(_optional_path, None, "example input for one partition (cuzk submit)"),
    "partitions": _Key(positive_int, 1, "partitions (independent proofs) per job"),
    "priority": _Key(_choice(PRIORITIES), "normal", "default priority: " + ", ".join(PRIORITIES)),
}


# --------------------------------------------------------------------------- result types


@dataclass(frozen=True)
class ServerConfig:
    listen: str = DEFAULT_LISTEN
    max_body_bytes: int = 8 * 2**20
    auth_token: str | None = None
    auth_token_file: Path | None = None
    allow_unauthenticated: bool = False
    metrics_require_auth: bool = False
    header_timeout_s: float = 5.0
    body_timeout_s: float = 30.0
    keepalive_timeout_s: float = 5.0
    max_connections: int = 1024
    max_requests_in_flight: int = 256
    drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S

    @property
    def host(self) -> str:
        return split_listen(self.listen)[0]

    @property
    def port(self) -> int:
        return split_listen(self.listen)[1]


@dataclass(frozen=True)
class EngineConfig:
    backend: str = "auto"
    gpu_workers_per_device: int = 2
    synthesis_threads: int | None = None  # None: the engine decides from the CPU count
    finalizer_threads: int | None = None
    memory_budget_bytes: int | None = None  # None: auto-detected
    memory_safety_margin_bytes: int = 2 * 2**30
    device_memory_budget_bytes: int | None = None  # None: auto-detected per device
    device_memory_safety_margin_bytes: int = 2**30
    cuda_devices: tuple[int, ...] | None = None  # None: every visible device
    keys_dir: Path = field(default_factory=lambda: Path(DEFAULT_KEYS_DIR).expanduser())
    self_verify: bool = True


@dataclass(frozen=True)
class JournalConfig:
    enabled: bool = True
    path: Path | None = None  # None: default_journal_path() when the engine starts
    retention_jobs: int = DEFAULT_RETENTION_JOBS
    retention_s: float = DEFAULT_RETENTION_S

    def resolved_path(self) -> Path | None:
        """The journal file the engine opens, or None when the journal is disabled."""
        if not self.enabled:
            return None
        from cuzk.engine.journal import default_journal_path

        return self.path or default_journal_path()


@dataclass(frozen=True)
class TelemetryConfig:
    service_name: str = "cuzk"
    metrics: bool = True
    tracing: bool = True
    otlp_endpoint: str | None = None


@dataclass(frozen=True)
class ProofKindConfig:
    name: str
    r1cs: Path
    wasm: Path
    zkey: Path | None = None
    sample_input: Path | None = None
    partitions: int = 1
    priority: str = "normal"
    bundled: bool = False


@dataclass(frozen=True)
class Config:
    server: ServerConfig = field(default_factory=ServerConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    journal: JournalConfig = field(default_factory=JournalConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    proof_kinds: dict[str, ProofKindConfig] = field(default_factory=dict)
    source: Path | None = None  # the TOML file, if any

    def to_dict(self) -> dict[str, Any]:
        """JSON-able view (paths as strings), for logs and ``cuzk serve --print-config``."""

        def clean(v: Any) -> Any:
            if isinstance(v, Path):
                return str(v)
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            return v

        return clean(asdict(self))

    def engine_settings(self) -> Any:
        """The engine's own ``EngineSettings``, so the engine never depends on config parsing."""
        return engine_settings(self)


def default_threads(kind: str, cpus: int | None = None) -> int:
    """Pool sizes for ``"auto"``: synthesis gets half the CPUs, finalization a quarter (min 2).

    Synthesis (witness + a/b/c) is the heaviest CPU step; finalization (one G2 MSM and a
    verify per partition) is lighter, and the GPU phase on the CPU backend needs cores too.
    """
    cpus = cpus or os.cpu_count() or 2
    return max(2, cpus // 2) if kind == "synthesis" else max(2, cpus // 4)


def engine_settings(config: Config) -> Any:
    """Translate a Config into ``cuzk.engine.settings.EngineSettings``."""
    import dataclasses

    from cuzk.engine.settings import EngineSettings, ProofKindSettings

    e = config.engine
    values: dict[str, Any] = {
        "backend": e.backend,
        "cuda_devices": list(e.cuda_devices) if e.cuda_devices is not None else None,
        "gpu_workers_per_device": e.gpu_workers_per_device,
        "synthesis_threads": e.synthesis_threads or default_threads("synthesis"),
        "finalizer_threads": e.finalizer_threads or default_threads("finalizer"),
        "memory_budget_bytes": e.memory_budget_bytes,
        "memory_safety_margin_bytes": e.memory_safety_margin_bytes,
        "device_memory_budget_bytes": e.device_memory_budget_bytes,
        "device_memory_safety_margin_bytes": e.device_memory_safety_margin_bytes,
        "keys_dir": e.keys_dir,
        "self_verify": e.self_verify,
        "metrics_enabled": config.telemetry.metrics,
        "tracing_enabled": config.telemetry.tracing,
        "service_name": config.telemetry.service_name,
        "journal_path": config.journal.resolved_path(),
        "job_retention": config.journal.retention_jobs,
        "job_retention_s": config.journal.retention_s,
        "proof_kinds": {
            name: ProofKindSettings(
                name=name,
                partitions=k.partitions,
                priority=k.priority,
                r1cs=k.r1cs,
                wasm=k.wasm,
                zkey=k.zkey,
            )
            for name, k in config.proof_kinds.items()
        },
    }
    # Pass only what this engine version knows (self_verify, for one, may not be a field).
    known = {f.name for f in dataclasses.fields(EngineSettings)}
    return EngineSettings(**{k: v for k, v in values.items() if k in known})


# --------------------------------------------------------------------------- loading


@dataclass
class _Raw:
    value: Any
    base: Path | None
    origin: str | None = None  # env variable name when the value came from the environment


def _env_kind_token(name: str) -> str:
    return re.sub(r"[-.]", "_", name).upper()


def _bundled_kinds() -> list[Any]:
    from cuzk.circuits.registry import bundled_circuits

    found = bundled_circuits()
    return list(found.values()) if isinstance(found, Mapping) else list(found)


def load_config(
    path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    bundled: Iterable[Any] | None = None,
    check_files: bool = True,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Build a validated Config from defaults, an optional TOML file and the environment.

    ``overrides`` (``{"server.listen": "..."}``) are command-line values, applied last.
    ``bundled`` replaces the bundled circuit registry (tests); ``check_files`` makes missing
    circuit files an error, which is what ``cuzk serve`` wants.
    Raises ConfigError listing every problem, each naming its key.
    """
    env = os.environ if env is None else env
    problems: list[str] = []
    source = Path(path).expanduser().resolve() if path is not None else None
    doc: dict[str, Any] = {}
    if source is not None:
        try:
            with open(source, "rb") as f:
                doc = tomllib.load(f)
        except FileNotFoundError:
            raise ConfigError([f"{source}: config file not found"]) from None
        except OSError as e:
            raise ConfigError([f"{source}: cannot read config file: {e.strerror}"]) from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError([f"{source}: not valid TOML: {e}"]) from None
    base = source.parent if source is not None else None

    # Collect raw values per (section, key), file first, then environment, then overrides.
    raw: dict[str, dict[str, _Raw]] = {s: {} for s in SCHEMA}
    kind_raw: dict[str, dict[str, _Raw]] = {}
    for section, table in doc.items():
        if section == "proof_kinds":
            if not isinstance(table, dict):
                problems.append("proof_kinds: must be a table of [proof_kinds.<name>] tables")
                continue
            for name, ktable in table.items():
                if (msg := _proof_kind_name(name)) is not None:
                    problems.append(f"proof_kinds.{name}: {msg}")
                    continue
                if not isinstance(ktable, dict):
                    problems.append(f"proof_kinds.{name}: must be a table")
                    continue
                for key, value in ktable.items():
                    if key not in PROOF_KIND_SCHEMA:
                        problems.append(
                            f"proof_kinds.{name}.{key}: unknown key"
                            f" (known: {', '.join(PROOF_KIND_SCHEMA)})"
                        )
                        continue
                    kind_raw.setdefault(name, {})[key] = _Raw(value, base)
                kind_raw.setdefault(name, {})
            continue
        if section not in SCHEMA:
            problems.append(
                f"{section}: unknown section (known: {', '.join([*SCHEMA, 'proof_kinds'])})"
            )
            continue
        if not isinstance(table, dict):
            problems.append(f"{section}: must be a table ([{section}])")
            continue
        for key, value in table.items():
            if key not in SCHEMA[section]:
                problems.append(
                    f"{section}.{key}: unknown key (known: {', '.join(SCHEMA[section])})"
                )
                continue
            raw[section][key] = _Raw(value, base)

    # Proof kinds: bundled defaults, then file tables.
    try:
        bundled_list = _bundled_kinds() if bundled is None else list(bundled)
    except ImportError as e:  # the registry is part of the package; this is a broken install
        raise ConfigError([f"proof_kinds: bundled circuit registry unavailable: {e}"]) from None
    bundled_by_name = {b.proof_kind: b for b in bundled_list}
    all_kind_names = list(bundled_by_name) + [n for n in kind_raw if n not in bundled_by_name]

    env_tokens = {_env_kind_token(n): n for n in all_kind_names}
    kind_prefix = ENV_PREFIX + "PROOF_KINDS_"
    for var in sorted(env):
        if not var.startswith(ENV_PREFIX):
            continue
        value = env[var]
        if var.startswith(kind_prefix):
            token, _, key_token = var[len(kind_prefix) :].rpartition("_")
            key = key_token.lower()
            if token not in env_tokens:
                problems.append(
                    f"{var}: no proof kind matches {token!r}"
                    f" (configured: {', '.join(all_kind_names) or 'none'})"
                )
                continue
            name = env_tokens[token]
            if key not in PROOF_KIND_SCHEMA:
                problems.append(
                    f"{var}: proof_kinds.{name}.{key}: unknown key"
                    f" (known: {', '.join(PROOF_KIND_SCHEMA)})"
                )
                continue
            kind_raw.setdefault(name, {})[key] = _Raw(value, None, var)
            continue
        for section in SCHEMA:
            prefix = ENV_PREFIX + section.upper() + "_"
            if var.startswith(prefix):
                key = var[len(prefix) :].lower()
                if key not in SCHEMA[section]:
                    problems.append(
                        f"{var}: {section}.{key}: unknown key (known: {', '.join(SCHEMA[section])})"
                    )
                else:
                    raw[section][key] = _Raw(value, None, var)
                break
        # Any other CUZK_* variable (CUZK_CONFIG, CUZK_URL, ...) is not a config key.

    for dotted, value in (overrides or {}).items():
        section, _, key = dotted.partition(".")
        if section not in SCHEMA or key not in SCHEMA[section]:
            raise ValueError(f"override for unknown key {dotted!r}")
        if value is not None:
            raw[section][key] = _Raw(value, None, "command line")

    def where(section: str, key: str, r: _Raw | None) -> str:
        if r is not None and r.origin:
            return f"{section}.{key} (from {r.origin})"
        return f"{section}.{key}"

    # Parse the fixed sections.
    parsed: dict[str, dict[str, Any]] = {}
    for section, keys in SCHEMA.items():
        parsed[section] = {}
        for key, spec in keys.items():
            r = raw[section].get(key)
            value = r.value if r is not None else spec.default
            if callable(value):
                value = value()
            try:
                parsed[section][key] = spec.parse(value, r.base if r else None)
            except ValueError as e:
                problems.append(f"{where(section, key, r)}: {e}")

    # Parse the proof kinds.
    kinds: dict[str, ProofKindConfig] = {}
    for name in all_kind_names:
        b = bundled_by_name.get(name)
        layer = kind_raw.get(name, {})
        values: dict[str, Any] = {
            "r1cs": Path(b.r1cs_path) if b else None,
            "wasm": Path(b.wasm_path) if b else None,
            "zkey": None,
            "sample_input": Path(b.sample_input_path)
            if b and getattr(b, "sample_input_path", None)
            else None,
            "partitions": int(b.partitions) if b else PROOF_KIND_SCHEMA["partitions"].default,
            "priority": str(b.priority) if b else PROOF_KIND_SCHEMA["priority"].default,
            "enabled": True,
        }
        ok = True
        for key, r in layer.items():
            try:
                values[key] = PROOF_KIND_SCHEMA[key].parse(r.value, r.base)
            except ValueError as e:
                problems.append(f"{where('proof_kinds', f'{name}.{key}', r)}: {e}")
                ok = False
        if not ok or not values["enabled"]:
            continue
        for key in ("r1cs", "wasm"):
            if values[key] is None:
                problems.append(
                    f"proof_kinds.{name}.{key}: required for a proof kind that is not bundled"
                )
                ok = False
        if not ok:
            continue
        if check_files:
            for key in ("r1cs", "wasm", "zkey", "sample_input"):
                p = values[key]
                if p is not None and not Path(p).is_file():
                    r = layer.get(key)
                    at = where("proof_kinds", f"{name}.{key}", r)
                    problems.append(f"{at}: no such file: {p}")
        del values["enabled"]
        kinds[name] = ProofKindConfig(name=name, bundled=b is not None, **values)

    if not kinds and not any(p.startswith("proof_kinds") for p in problems):
        problems.append("proof_kinds: no proof kind is enabled")
    if problems:
        raise ConfigError(problems)

    return Config(
        server=ServerConfig(**parsed["server"]),
        engine=EngineConfig(**parsed["engine"]),
        journal=JournalConfig(**parsed["journal"]),
        telemetry=TelemetryConfig(**parsed["telemetry"]),
        proof_kinds=kinds,
        source=source,
    )
