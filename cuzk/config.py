"""cuzk configuration: one TOML file, every key overridable by a ``CUZK_<SECTION>_<KEY>`` variable.

Precedence, lowest first: built-in defaults, the TOML file, the environment, then command-line
values. Every key is declared once, with its default and a one-line description, by
``cuzk.settings_schema.setting``: the ``[engine]`` keys on ``cuzk.engine.settings.EngineSettings``
(the engine's own plain settings), the others on the section dataclasses below, the bundled proof
kinds' defaults in ``cuzk.circuits.registry``. The documented ``cuzk/default_config.toml`` is
generated from those declarations (``python -m cuzk.config --dump-defaults``).

Everything is validated when loaded; unknown sections and keys (in the file or in a variable of a
known section) are errors; every error names the key it is about (and the environment variable,
when the value came from one), so a bad deployment fails at start instead of at the first proof.
Secrets (``server.auth_token``) never appear in a dump, a repr or an error.

Proof kinds default to the bundled circuits; ``[proof_kinds.<name>]`` tables override the
fields of a bundled kind or add a new one, and ``enabled = false`` drops one. Environment
overrides for a proof kind use the kind's name upper-cased with ``-`` and ``.`` as ``_``:
``CUZK_PROOF_KINDS_POREP_C2_PARTITIONS=4``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import sys
import textwrap
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuzk.errors import CuzkError
from cuzk.files import not_a_file
from cuzk.protocol import (
    DEADLINE_ADMISSIONS,
    DEADLINE_MISS_POLICIES,
    DEFAULT_PRIORITY,
    PRIORITIES,
)
from cuzk.settings_schema import (
    REQUIRED,
    ParseContext,
    Setting,
    boolean,
    byte_size,
    choice,
    int_or_auto,
    non_empty_string,
    optional_duration,
    optional_path,
    optional_string,
    parse_listen,
    path,
    phase_seconds,
    positive_int,
    positive_seconds,
    secret_string,
    setting,
    settings_of,
    split_listen,
    xdg_path,
)

if TYPE_CHECKING:
    from cuzk.engine.settings import EngineSettings

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "DEFAULT_LISTEN",
    "PRIORITIES",
    "PROOF_KIND_SCHEMA",
    "ClusterConfig",
    "Config",
    "ConfigError",
    "JournalConfig",
    "ProofKindConfig",
    "ProverConfig",
    "ServerConfig",
    "TelemetryConfig",
    "byte_size",
    "dump_defaults",
    "engine_settings",
    "load_config",
]

DEFAULT_LISTEN = "127.0.0.1:9820"
DEFAULT_CONFIG_PATH = Path(__file__).parent / "default_config.toml"
ENV_PREFIX = "CUZK_"
REDACTED = "<redacted>"


class ConfigError(CuzkError):
    """One or more configuration problems; each line names the key (and env variable) at fault."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid configuration:\n" + "\n".join(f"  {p}" for p in self.problems))


# --------------------------------------------------------------------------- sections


@dataclass(frozen=True)
class ServerConfig:
    """[server]: the HTTP API."""

    listen: str = setting(
        DEFAULT_LISTEN, "HOST:PORT of the HTTP API (IPv6 as [::1]:9820).", parse_listen
    )
    max_body_bytes: int = setting(
        "8MiB",
        "Largest request body accepted; a larger one is refused with 413 while it is being read."
        " A submit is bounded tighter by what the configured kinds' inputs can need.",
        byte_size,
    )
    auth_token: str = setting(
        "",
        "Bearer token: when set (here, in auth_token_file, or CUZK_SERVER_AUTH_TOKEN), every "
        "route but /healthz, /readyz (and /metrics unless metrics_require_auth) needs "
        '`Authorization: Bearer ...`. "" = authentication off, which `cuzk serve` allows on a '
        "loopback address only, unless allow_unauthenticated = true. Never printed.",
        secret_string,
        secret=True,
    )
    auth_token_file: Path | None = setting(
        "", 'A file holding the bearer token (instead of auth_token); "" = none.', optional_path
    )
    allow_unauthenticated: bool = setting(
        False, "Allow a non-loopback listen address without a token.", boolean
    )
    metrics_require_auth: bool = setting(False, "/metrics needs the token too.", boolean)
    header_timeout_s: float = setting(
        5.0,
        "A request's headers must arrive within this many seconds of the connection (or of "
        "its first byte, on a kept-alive connection); 408 / close after.",
        positive_seconds,
    )
    body_timeout_s: float = setting(
        30.0,
        "A request's body must arrive within this many seconds of its headers (408 after).",
        positive_seconds,
    )
    write_timeout_s: float = setting(
        30.0,
        "Once a response fills the connection's send buffer, the client must read enough of it"
        " to let writing resume within this many seconds, or it is disconnected.",
        positive_seconds,
    )
    keepalive_timeout_s: float = setting(
        5.0, "An idle kept-alive connection is closed after this many seconds.", positive_seconds
    )
    max_connections: int = setting(
        1024, "Open connections beyond this are answered 503 and closed.", positive_int
    )
    max_requests_in_flight: int = setting(
        256,
        "Requests being handled at once (health checks and long-polls excepted); more get 503"
        " with Retry-After, and /readyz says not ready while it is reached.",
        positive_int,
    )
    max_long_polls: int = setting(
        64,
        "Long-polls (GET /v1/proofs/{id}?wait=N) waiting at once, on their own threads and apart"
        " from max_requests_in_flight, so they never hold up submits; more get 429.",
        positive_int,
    )
    max_long_polls_per_client: int = setting(
        16,
        "Long-polls waiting at once from one client address (all clients behind one proxy share"
        " it); more get 429 with Retry-After.",
        positive_int,
    )
    drain_timeout_s: float = setting(
        30.0,
        "On SIGTERM, seconds to finish in-flight requests and running jobs before exiting.",
        positive_seconds,
    )

    @property
    def host(self) -> str:
        return split_listen(self.listen)[0]

    @property
    def port(self) -> int:
        return split_listen(self.listen)[1]


@dataclass(frozen=True)
class TelemetryConfig:
    """[telemetry]: Prometheus metrics and OpenTelemetry traces."""

    service_name: str = setting(
        "cuzk",
        'OpenTelemetry service.name. Default: $OTEL_SERVICE_NAME when set, else "cuzk".',
        non_empty_string,
        env_fallback="OTEL_SERVICE_NAME",
    )
    metrics: bool = setting(
        True,
        "Serve Prometheus metrics on /metrics (OpenMetrics with exemplars when the scraper asks).",
        boolean,
    )
    tracing: bool = setting(
        True,
        "Record OpenTelemetry spans (cuzk.job > cuzk.partition > ...). They leave the process "
        "when OTEL_TRACES_EXPORTER asks, or over OTLP when an endpoint is set here or through "
        "the standard OTEL_EXPORTER_OTLP_* variables (docs/telemetry.md lists them all).",
        boolean,
    )
    otlp_endpoint: str | None = setting(
        "",
        'OTLP endpoint such as "http://localhost:4318", used when OTEL_EXPORTER_OTLP_ENDPOINT '
        "is not set; the protocol is OTEL_EXPORTER_OTLP_PROTOCOL's (default http/protobuf). "
        '"" = the standard OTEL_* variables only.',
        optional_string,
    )
    nvml_replay: Path | None = setting(
        "",
        "A recording of NVML samples (JSON, docs/operations.md) exported as the device gauges "
        "(cuzk_device_utilization_ratio, cuzk_device_memory_used_bytes) of the devices it "
        "names, instead of reading the driver: rehearses the device dashboards and alerts on "
        'a host without a GPU. "" = the driver, when pynvml and a GPU are present.',
        optional_path,
    )


FIELD_ARITH = ("auto", "portable")
MSM_PRECOMPUTE = ("auto", "off", "on")
# auto builds a key's window tables when they take at most this share of the host memory budget.
MSM_PRECOMPUTE_BUDGET_SHARE = 16


@dataclass(frozen=True)
class ProverConfig:
    """[prover]: the CPU prover (the backend without a GPU, and a GPU host's fallback)."""

    field_arith: str = setting(
        "auto",
        'Field multiply of the CPU MSMs: "auto" = mulx/adcx/adox where the CPU has BMI2 and ADX '
        '(checked at start), "portable" = plain 64-bit C everywhere.',
        choice(FIELD_ARITH),
    )
    msm_precompute: str = setting(
        "auto",
        "Precomputed window tables for the proving keys' MSM points, built once at key load "
        "(the key's host bytes and the memory budget count them; about 7x the key's point "
        'sections for porep-c2): "on", "off", or "auto" = on for a kind whose tables take at '
        f"most 1/{MSM_PRECOMPUTE_BUDGET_SHARE} of the host memory budget "
        "(engine.memory_budget_bytes). `cuzk prove`, one "
        'proof per process, builds them only when "on": the build costs more than one proof '
        "saves.",
        choice(MSM_PRECOMPUTE),
    )


@dataclass(frozen=True)
class JournalConfig:
    """[journal]: the on-disk record of accepted jobs, so a restart loses none."""

    enabled: bool = setting(
        True, "Record accepted jobs on disk and recover them at start.", boolean
    )
    path: Path = setting(
        "",
        'The journal file (SQLite); "" = $XDG_STATE_HOME/cuzk/journal.sqlite3 '
        "(~/.local/state/cuzk/journal.sqlite3).",
        xdg_path("XDG_STATE_HOME", ".local/state", "cuzk", "journal.sqlite3"),
    )
    retention_jobs: int = setting(
        10000, "Finished jobs kept in the journal; the oldest are deleted first.", positive_int
    )
    retention_s: float = setting(
        604800, "Seconds a finished job is kept in the journal (604800 = 7 days).", positive_seconds
    )


@dataclass(frozen=True)
class ClusterConfig:
    """[cluster]: run the engine's steps on a Ray cluster (docs/cluster.md)."""

    address: str | None = setting(
        "",
        'Ray cluster to drive, as "host:port" of `ray start --head`; "" = one process '
        "(Ray is never imported). Needs pip install 'cuzk[cluster]'.",
        optional_string,
    )
    gpu_slots: int = setting(
        "auto",
        "GPU workers the head can drive at once (its threads are fixed at start); "
        '"auto" = the GPUs Ray reports at start.',
        int_or_auto(lambda: 0),
    )
    connect_timeout_s: float = setting(
        30,
        "Seconds the head waits to reach Ray at the address (a TCP connect, then joining as "
        'the driver) before it exits with "cannot reach Ray at ADDRESS".',
        positive_seconds,
    )
    sd_file: Path = setting(
        "",
        "Prometheus file_sd file the head keeps listing every live cuzk endpoint of the cluster "
        '(labels node, role); "" = $XDG_STATE_HOME/cuzk/cuzk_sd.json.',
        xdg_path("XDG_STATE_HOME", ".local/state", "cuzk", "cuzk_sd.json"),
    )


def _proof_kind_name(name: str) -> str | None:
    """Proof kind names are labels and URL path parts: keep them plain."""
    if re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,63}", name):
        return None
    return (
        "proof kind names must be 1-64 characters of lower-case letters, digits, '.', '_' or '-',"
        f" starting with a letter or digit; got {name!r}"
    )


@dataclass(frozen=True)
class ProofKindConfig:
    """[proof_kinds.<name>]: one proof kind (a bundled one's defaults come from the registry)."""

    name: str
    r1cs: Path = setting(
        REQUIRED,
        "Circuit .r1cs (required for a kind that is not bundled).",
        path,
        example="circuits/my.r1cs",
    )
    wasm: Path = setting(
        REQUIRED,
        "The circom witness generator .wasm (required for a kind that is not bundled).",
        path,
        example="circuits/my_js/my.wasm",
    )
    enabled: bool = setting(True, "false drops the kind (for example a bundled one).", boolean)
    zkey: Path | None = setting(
        "", 'Proving key; "" = generated into keys_dir on first use (at start when '
        'deadline_admission is "reject").', optional_path
    )
    sample_input: Path | None = setting(
        "", "Example input for one partition (what `cuzk submit` sends without --input).",
        optional_path,
    )  # fmt: skip
    partitions: int = setting(1, "Partitions (independent proofs) per job.", positive_int)
    priority: str = setting(
        DEFAULT_PRIORITY, "Default priority: " + ", ".join(PRIORITIES) + ".", choice(PRIORITIES)
    )
    deadline: float | None = setting(
        "",
        'Relative deadline a submit without one gets, e.g. "20s" or "30m"; "" = none.',
        optional_duration,
    )
    on_deadline_miss: str = setting(
        "continue",
        'When a job\'s deadline passes: "cancel" drops its unstarted partitions and ends it '
        'deadline_exceeded; "continue" lets it finish (counted as a miss).',
        choice(DEADLINE_MISS_POLICIES),
    )
    deadline_admission: str = setting(
        "accept",
        'A submit whose deadline cannot be met even at the front of its priority class: '
        '"reject" refuses it (503, naming the predicted finish); "accept" takes it, at risk.',
        choice(DEADLINE_ADMISSIONS),
    )
    phase_seconds: tuple[tuple[str, float], ...] = setting(
        "",
        "Expected seconds per partition phase, predictions' starting point before any is "
        "measured (later runs start from the journal's figures), e.g. {synthesizing = 0.8, "
        'proving = 2.5, finalizing = 0.4}; "" = none.',
        phase_seconds,
    )
    bundled: bool = False


PROOF_KIND_SCHEMA: dict[str, Setting] = settings_of(ProofKindConfig)


def _engine_settings_class() -> type[EngineSettings]:
    # Imported when needed so that importing cuzk.config does not import the engine package.
    from cuzk.engine.settings import EngineSettings

    return EngineSettings


def _sections() -> dict[str, type]:
    """Section name -> the dataclass declaring its keys, in file order."""
    return {
        "server": ServerConfig,
        "engine": _engine_settings_class(),
        "telemetry": TelemetryConfig,
        "journal": JournalConfig,
        "prover": ProverConfig,
        "cluster": ClusterConfig,
    }


def schema() -> dict[str, dict[str, Setting]]:
    """Every fixed section's keys: ``{section: {key: Setting}}``."""
    return {name: settings_of(cls) for name, cls in _sections().items()}


def __getattr__(name: str) -> Any:
    # SCHEMA (and EngineConfig) name the engine's settings, imported on first use.
    if name == "SCHEMA":
        return schema()
    if name == "EngineConfig":
        return _engine_settings_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _default_engine() -> EngineSettings:
    return _engine_settings_class()()


@dataclass(frozen=True)
class Config:
    server: ServerConfig = field(default_factory=ServerConfig)
    engine: EngineSettings = field(default_factory=_default_engine)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    journal: JournalConfig = field(default_factory=JournalConfig)
    prover: ProverConfig = field(default_factory=ProverConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    proof_kinds: dict[str, ProofKindConfig] = field(default_factory=dict)
    source: Path | None = None  # the TOML file, if any

    def to_dict(self) -> dict[str, Any]:
        """JSON-able view of every key (paths as strings, secrets redacted), for logs and
        ``cuzk serve --print-config``."""
        out: dict[str, Any] = {}
        for name in _sections():
            out[name] = _plain(getattr(self, name))
        out["proof_kinds"] = {
            name: _plain(k) | {"name": k.name, "bundled": k.bundled}
            for name, k in self.proof_kinds.items()
        }
        out["source"] = str(self.source) if self.source is not None else None
        return out

    def engine_settings(self) -> EngineSettings:
        """The engine's own ``EngineSettings``, so the engine never depends on config parsing."""
        return engine_settings(self)


def _plain(obj: Any) -> dict[str, Any]:
    """The declared keys of a section object as JSON-able values; secrets redacted."""
    out: dict[str, Any] = {}
    for key, spec in settings_of(type(obj)).items():
        value = getattr(obj, key)
        if spec.secret:
            value = REDACTED if value else ""
        elif isinstance(value, Path):
            value = str(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[key] = value
    return out


def engine_settings(config: Config) -> EngineSettings:
    """The engine's settings: the [engine] section plus what the engine needs from the others."""
    from cuzk.engine.settings import ProofKindSettings

    return dataclasses.replace(
        config.engine,
        metrics_enabled=config.telemetry.metrics,
        tracing_enabled=config.telemetry.tracing,
        service_name=config.telemetry.service_name,
        journal_path=config.journal.path if config.journal.enabled else None,
        job_retention=config.journal.retention_jobs,
        job_retention_s=config.journal.retention_s,
        field_arith=config.prover.field_arith,
        msm_precompute=config.prover.msm_precompute,
        proof_kinds={
            name: ProofKindSettings(
                name=name,
                partitions=k.partitions,
                priority=k.priority,
                r1cs=k.r1cs,
                wasm=k.wasm,
                zkey=k.zkey,
                deadline_s=k.deadline,
                on_deadline_miss=k.on_deadline_miss,
                deadline_admission=k.deadline_admission,
                phase_seconds=k.phase_seconds,
            )
            for name, k in config.proof_kinds.items()
        },
    )


# --------------------------------------------------------------------------- loading


@dataclass
class _Raw:
    value: Any
    base: Path | None
    origin: str | None = None  # env variable name when the value came from the environment


def _unknown(where: str, name: str, known: Iterable[str], what: str = "key") -> str:
    """``engine.gpu_worker: unknown key; did you mean 'gpu_workers_per_device'? (known: ...)``."""
    known = list(known)
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{where}: unknown {what}{hint} (known: {', '.join(known)})"


def _env_kind_token(name: str) -> str:
    return re.sub(r"[-.]", "_", name).upper()


def _bundled_kinds() -> list[Any]:
    from cuzk.circuits.registry import bundled_circuits

    return list(bundled_circuits().values())


def _split_kind_variable(rest: str, tokens: Iterable[str]) -> tuple[str | None, str]:
    """``POREP_C2_SAMPLE_INPUT`` -> (``POREP_C2``, ``sample_input``): keys may hold ``_`` too."""
    for key in sorted(PROOF_KIND_SCHEMA, key=len, reverse=True):
        suffix = "_" + key.upper()
        if rest.endswith(suffix) and len(rest) > len(suffix):
            return rest[: -len(suffix)], key
    for token in sorted(tokens, key=len, reverse=True):
        if rest.startswith(token + "_"):
            return token, rest[len(token) + 1 :].lower()
    return None, rest.lower()


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
    sections = _sections()
    keys_of = {name: settings_of(cls) for name, cls in sections.items()}
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
    raw: dict[str, dict[str, _Raw]] = {s: {} for s in sections}
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
                        at = f"proof_kinds.{name}.{key}"
                        problems.append(_unknown(at, key, PROOF_KIND_SCHEMA))
                        continue
                    kind_raw.setdefault(name, {})[key] = _Raw(value, base)
                kind_raw.setdefault(name, {})
            continue
        if section not in sections:
            problems.append(
                _unknown(section, section, [*sections, "proof_kinds"], what="section")
            )
            continue
        if not isinstance(table, dict):
            problems.append(f"{section}: must be a table ([{section}])")
            continue
        for key, value in table.items():
            if key not in keys_of[section]:
                problems.append(_unknown(f"{section}.{key}", key, keys_of[section]))
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
            token, key = _split_kind_variable(var[len(kind_prefix) :], env_tokens)
            if token is None or token not in env_tokens:
                problems.append(
                    f"{var}: no proof kind matches {token or var[len(kind_prefix) :]!r}"
                    f" (configured: {', '.join(all_kind_names) or 'none'})"
                )
                continue
            name = env_tokens[token]
            if key not in PROOF_KIND_SCHEMA:
                problems.append(
                    _unknown(f"{var}: proof_kinds.{name}.{key}", key, PROOF_KIND_SCHEMA)
                )
                continue
            kind_raw.setdefault(name, {})[key] = _Raw(value, None, var)
            continue
        for section in sections:
            prefix = ENV_PREFIX + section.upper() + "_"
            if var.startswith(prefix):
                key = var[len(prefix) :].lower()
                if key not in keys_of[section]:
                    problems.append(_unknown(f"{var}: {section}.{key}", key, keys_of[section]))
                else:
                    raw[section][key] = _Raw(value, None, var)
                break
        # Any other CUZK_* variable (CUZK_CONFIG, CUZK_URL, ...) is not a config key.

    for dotted, value in (overrides or {}).items():
        section, _, key = dotted.partition(".")
        if section not in keys_of or key not in keys_of[section]:
            raise ValueError(f"override for unknown key {dotted!r}")
        if value is not None:
            raw[section][key] = _Raw(value, None, "command line")

    def where(section: str, key: str, r: _Raw | None) -> str:
        if r is not None and r.origin:
            return f"{section}.{key} (from {r.origin})"
        return f"{section}.{key}"

    # Parse the fixed sections.
    parsed: dict[str, dict[str, Any]] = {}
    for section, keys in keys_of.items():
        parsed[section] = {}
        for key, spec in keys.items():
            r = raw[section].get(key)
            if r is None and spec.env_fallback and env.get(spec.env_fallback):
                r = _Raw(env[spec.env_fallback], None, spec.env_fallback)
            value = r.value if r is not None else spec.default
            try:
                parsed[section][key] = spec.parse(value, ParseContext(r.base if r else None, env))
            except ValueError as e:
                problems.append(f"{where(section, key, r)}: {e}")

    # Parse the proof kinds.
    kinds: dict[str, ProofKindConfig] = {}
    for name in all_kind_names:
        b = bundled_by_name.get(name)
        layer = kind_raw.get(name, {})
        values: dict[str, Any] = {}
        for key, spec in PROOF_KIND_SCHEMA.items():
            if spec.default is not REQUIRED:
                values[key] = spec.parse(spec.default, ParseContext(None, env))
        if b is not None:
            values |= {
                "r1cs": Path(b.r1cs_path),
                "wasm": Path(b.wasm_path),
                "partitions": int(b.partitions),
                "priority": str(b.priority),
                "deadline": getattr(b, "deadline_s", None),
                "on_deadline_miss": str(getattr(b, "on_deadline_miss", "continue")),
                "deadline_admission": str(getattr(b, "deadline_admission", "accept")),
            }
            if getattr(b, "sample_input_path", None):
                values["sample_input"] = Path(b.sample_input_path)
        ok = True
        for key, r in layer.items():
            try:
                values[key] = PROOF_KIND_SCHEMA[key].parse(r.value, ParseContext(r.base, env))
            except ValueError as e:
                problems.append(f"{where('proof_kinds', f'{name}.{key}', r)}: {e}")
                ok = False
        if not ok or not values["enabled"]:
            continue
        for key, spec in PROOF_KIND_SCHEMA.items():
            if spec.default is REQUIRED and values.get(key) is None:
                problems.append(
                    f"proof_kinds.{name}.{key}: required for a proof kind that is not bundled"
                )
                ok = False
        if not ok:
            continue
        if check_files:
            for key in ("r1cs", "wasm", "zkey", "sample_input"):
                p = values[key]
                problem = None if p is None else not_a_file(p)
                if problem:
                    at = where("proof_kinds", f"{name}.{key}", layer.get(key))
                    problems.append(f"{at}: {problem}: {p}")
        kinds[name] = ProofKindConfig(name=name, bundled=b is not None, **values)

    if not kinds and not any(p.startswith("proof_kinds") for p in problems):
        problems.append("proof_kinds: no proof kind is enabled")
    if problems:
        raise ConfigError(problems)

    built: dict[str, Any] = {}
    for section, cls in sections.items():
        try:
            built[section] = cls(**parsed[section])
        except ValueError as e:  # a check across keys in the section's own __post_init__
            problems.append(f"{section}: {e}")
    horizon = getattr(built.get("engine"), "deadline_horizon", None)
    for name, k in kinds.items():
        if horizon is not None and k.deadline is not None and k.deadline > horizon:
            problems.append(f"proof_kinds.{name}.deadline: {k.deadline:g} s is beyond "
                            f"engine.deadline_horizon ({horizon:g} s)")
    if problems:
        raise ConfigError(problems)
    return Config(**built, proof_kinds=kinds, source=source)


# --------------------------------------------------------------------------- the documented file

_HEADER = """\
cuzk configuration: every key, with its default.

GENERATED by `python -m cuzk.config --dump-defaults` from the declarations in cuzk/config.py,
cuzk/engine/settings.py and cuzk/circuits/registry.py: change those, then regenerate this file
(a test checks that it is current).

`cuzk serve` runs on these defaults when given no file; `cuzk serve --config FILE` reads a file
shaped like this one (any key may be left out). Every key can also be set from the environment
as CUZK_<SECTION>_<KEY>, which wins over the file:

  CUZK_SERVER_LISTEN=0.0.0.0:9820  CUZK_ENGINE_BACKEND=cuda  CUZK_TELEMETRY_TRACING=false

Byte sizes are integers or strings such as "8GiB", "512MiB" or "2GB" (KiB/MiB/GiB/TiB and
bare K/M/G/T are powers of 1024; kB/MB/GB/TB powers of 1000). Booleans from the environment
are true/false, 1/0, yes/no or on/off. Relative paths are taken from this file's directory.
Unknown sections and keys are errors, and every error names its key."""

_PROOF_KINDS_INTRO = """\
Proof kinds. The defaults are the bundled circuits (Poseidon Merkle-inclusion circuits of
several sizes, structural stand-ins for Filecoin's proofs). A [proof_kinds.<name>] table
overrides fields of a bundled kind or adds a new one (r1cs and wasm are then required).
Environment: CUZK_PROOF_KINDS_<NAME>_<KEY> with the name upper-cased and '-' / '.' written as
'_', e.g. CUZK_PROOF_KINDS_POREP_C2_PARTITIONS=4."""


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML spelling for {value!r}")


def _comment(text: str, width: int = 98) -> list[str]:
    lines: list[str] = []
    for paragraph in text.split("\n"):
        if not paragraph.strip():
            lines.append("#")
            continue
        indent = paragraph[: len(paragraph) - len(paragraph.lstrip())]
        wrapped = textwrap.wrap(paragraph, width, subsequent_indent=indent, break_long_words=False)
        lines += [f"# {w}" for w in wrapped]
    return lines


def _duration_text(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"


def dump_defaults(bundled: Iterable[Any] | None = None) -> str:
    """The documented default config file (what ``cuzk/default_config.toml`` holds)."""
    out = _comment(_HEADER)
    for section, cls in _sections().items():
        out += ["", f"[{section}]"]
        for key, spec in settings_of(cls).items():
            out += _comment(spec.doc)
            line = f"{key} = {_toml_value(spec.default)}"
            # A key whose default comes from a standard variable is shown commented out, so
            # copying this file does not pin the value.
            out.append(f"# {line}" if spec.env_fallback else line)
    out += ["", *_comment(_PROOF_KINDS_INTRO)]
    kinds = _bundled_kinds() if bundled is None else list(bundled)
    out += ["#", "# The bundled kinds, with their defaults:"]
    for b in kinds:
        out += [
            "#",
            f"# [proof_kinds.{b.proof_kind}]",
            f"# partitions = {_toml_value(int(b.partitions))}",
            f"# priority = {_toml_value(str(b.priority))}",
            f"# deadline = {_toml_value(_duration_text(getattr(b, 'deadline_s', None)))}",
            f"# on_deadline_miss = {_toml_value(str(getattr(b, 'on_deadline_miss', 'continue')))}",
            "# deadline_admission = "
            f"{_toml_value(str(getattr(b, 'deadline_admission', 'accept')))}",
        ]
    out += [
        "#",
        "# Every key of a proof kind, shown for a kind of your own. `cuzk circuit add NAME",
        "# --r1cs F --wasm F [--zkey F]` checks the files and writes such a table;",
        "# docs/custom-circuits.md walks through it:",
        "#",
    ]
    out.append("# [proof_kinds.my-circuit]")
    for key, spec in PROOF_KIND_SCHEMA.items():
        shown = spec.example if spec.default is REQUIRED else spec.default
        out += [f"#   {line[2:]}" for line in _comment(spec.doc, width=94)]
        out.append(f"# {key} = {_toml_value(shown)}")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m cuzk.config", description="Print the documented default configuration."
    )
    parser.add_argument(
        "--dump-defaults", action="store_true", help="print the documented default config file"
    )
    parser.add_argument(
        "--write", type=Path, metavar="FILE", help="with --dump-defaults: write FILE instead"
    )
    args = parser.parse_args(argv)
    if not args.dump_defaults:
        parser.print_usage(sys.stderr)
        return 2
    text = dump_defaults()
    if args.write:
        args.write.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
