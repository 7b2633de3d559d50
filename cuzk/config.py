"""cuzk configuration: one TOML file, every key overridable by a ``CUZK_<SECTION>_<KEY>`` variable.

Precedence, lowest first: built-in defaults, the TOML file, the environment, then command-line
values. Every key is declared once, with its type, its default as spelled in TOML and a one-line
description: the sections below are pydantic models whose fields parse with the project's own
parsers (``cuzk.settings_schema``), so errors keep the project's words; the ``[engine]`` keys are
declared on ``cuzk.engine.settings.EngineSettings`` (a plain dataclass: the engine does not import
pydantic) and wrapped here in a model built from those declarations; the bundled proof kinds'
defaults live in ``cuzk.circuits.registry``. ``cuzk/default_config.toml`` and the table in
docs/configuration.md are generated from the declarations (``cuzk.config_docs``).

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
import functools
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    ValidationInfo,
    create_model,
)

from cuzk.errors import CuzkError
from cuzk.files import not_a_file
from cuzk.protocol import DEADLINE_ADMISSIONS, DEADLINE_MISS_POLICIES, DEFAULT_PRIORITY, PRIORITIES
from cuzk.settings_schema import (
    FIELD_ARITH,
    MSM_PRECOMPUTE,
    MSM_PRECOMPUTE_BUDGET_SHARE,
    REQUIRED,
    ParseContext,
    Parser,
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
    settings_of,
    split_listen,
    xdg_path,
)

if TYPE_CHECKING:
    from cuzk.engine.settings import EngineSettings

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "DEFAULT_LISTEN",
    "FIELD_ARITH",
    "MSM_PRECOMPUTE",
    "MSM_PRECOMPUTE_BUDGET_SHARE",
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
    "keys_of",
    "load_config",
    "schema",
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


# --------------------------------------------------------------------------- declaring a key


@dataclass(frozen=True)
class _Parse:
    """A field's validator: the project's parser, given where relative paths start (the file
    the value came from) and the environment (``$XDG_*``) through the validation context."""

    parse: Parser

    def __call__(self, value: Any, info: ValidationInfo) -> Any:
        context = info.context or {}
        base = context.get("bases", {}).get(info.field_name)
        return self.parse(value, ParseContext(base, context.get("env")))


def parsed(parse: Parser, input_type: Any = Any) -> PlainValidator:
    """Annotated metadata: the field's value is ``parse(raw)``; ``input_type`` is what the JSON
    schema says a file may hold."""
    return PlainValidator(_Parse(parse), json_schema_input_type=input_type)


def key(default: Any, doc: str, *, env_fallback: str | None = None, example: Any = None) -> Any:
    """A declared key: ``default`` is its TOML spelling (parsed like a value from the file);
    ``env_fallback`` names a standard variable read when the key is not set; ``example`` is
    shown in the generated file for a key without a default."""
    return Field(
        ... if default is REQUIRED else default,
        description=doc,
        validate_default=True,
        examples=None if example is None else [example],
        json_schema_extra={"x-env-fallback": env_fallback} if env_fallback else None,
    )


class Section(BaseModel):
    """A config table: frozen; a key it does not declare is an error; errors never show the
    value (a secret's could be among them: the parsers show the others')."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)


def keys_of(model: type[BaseModel]) -> dict[str, Setting]:
    """The declared keys of a section model (fields with a description), in declaration order."""
    out: dict[str, Setting] = {}
    for name, f in model.model_fields.items():
        if f.description is None:  # not a key: a proof kind's name, whether it is bundled
            continue
        extra = f.json_schema_extra if isinstance(f.json_schema_extra, dict) else {}
        fallback = extra.get("x-env-fallback")
        out[name] = Setting(
            default=REQUIRED if f.is_required() else f.default,
            doc=f.description,
            parse=next(m.func.parse for m in f.metadata if isinstance(m, PlainValidator)),  # type: ignore[union-attr]
            secret=not f.repr,
            env_fallback=str(fallback) if fallback else None,
            example=f.examples[0] if f.examples else None,
        )
    return out


# A credential: left out of repr, and every dump (model_dump, to_dict) shows it redacted.
Secret = Annotated[
    str,
    parsed(secret_string, str),
    PlainSerializer(lambda v: REDACTED if v else ""),
    Field(repr=False),
]
Flag = Annotated[bool, parsed(boolean, bool | str)]
Count = Annotated[int, parsed(positive_int, int | str)]
Seconds = Annotated[float, parsed(positive_seconds, float | str)]
Bytes = Annotated[int, parsed(byte_size, int | str)]
OptionalPath = Annotated[Path | None, parsed(optional_path, str)]
OptionalText = Annotated[str | None, parsed(optional_string, str)]
FilePath = Annotated[Path, parsed(path, str)]
# Aliases at module level: a field named like its parser would hide it in the class body.
PhaseSeconds = Annotated[
    tuple[tuple[str, float], ...],
    parsed(phase_seconds, dict[str, float] | str),
    PlainSerializer(lambda v: [list(pair) for pair in v], when_used="json"),  # () warns else
]


def one_of(options: tuple[str, ...]) -> PlainValidator:
    return parsed(choice(options), str)


def state_file(name: str) -> PlainValidator:
    """A path; "" = ``$XDG_STATE_HOME/cuzk/<name>`` (``~/.local/state/cuzk/<name>``)."""
    return parsed(xdg_path("XDG_STATE_HOME", ".local/state", "cuzk", name), str)


# --------------------------------------------------------------------------- sections


class ServerConfig(Section):
    """[server]: the HTTP API."""

    listen: Annotated[str, parsed(parse_listen, str)] = key(
        DEFAULT_LISTEN, "HOST:PORT of the HTTP API (IPv6 as [::1]:9820)."
    )
    max_body_bytes: Bytes = key(
        "8MiB",
        "Largest request body accepted; a larger one is refused with 413 while it is being read."
        " A submit is bounded tighter by what the configured kinds' inputs can need.",
    )
    auth_token: Secret = key(
        "",
        "Bearer token: when set (here, in auth_token_file, or CUZK_SERVER_AUTH_TOKEN), every "
        "route but /healthz, /readyz (and /metrics unless metrics_require_auth) needs "
        '`Authorization: Bearer ...`. "" = authentication off, which `cuzk serve` allows on a '
        "loopback address only, unless allow_unauthenticated = true. Never printed.",
    )
    auth_token_file: OptionalPath = key(
        "", 'A file holding the bearer token (instead of auth_token); "" = none.'
    )
    allow_unauthenticated: Flag = key(False, "Allow a non-loopback listen address without a token.")
    metrics_require_auth: Flag = key(False, "/metrics needs the token too.")
    header_timeout_s: Seconds = key(
        5.0,
        "A request's headers must arrive within this many seconds of the connection (or of "
        "its first byte, on a kept-alive connection); 408 / close after.",
    )
    body_timeout_s: Seconds = key(
        30.0, "A request's body must arrive within this many seconds of its headers (408 after)."
    )
    write_timeout_s: Seconds = key(
        30.0,
        "Once a response fills the connection's send buffer, the client must read enough of it"
        " to let writing resume within this many seconds, or it is disconnected.",
    )
    keepalive_timeout_s: Seconds = key(
        5.0, "An idle kept-alive connection is closed after this many seconds."
    )
    max_connections: Count = key(1024, "Open connections beyond this are answered 503 and closed.")
    max_requests_in_flight: Count = key(
        256,
        "Requests being handled at once (health checks and long-polls excepted); more get 503"
        " with Retry-After, and /readyz says not ready while it is reached.",
    )
    max_long_polls: Count = key(
        64,
        "Long-polls (GET /v1/proofs/{id}?wait=N) waiting at once, on their own threads and apart"
        " from max_requests_in_flight, so they never hold up submits; more get 429.",
    )
    max_long_polls_per_client: Count = key(
        16,
        "Long-polls waiting at once from one client address (all clients behind one proxy share"
        " it); more get 429 with Retry-After.",
    )
    drain_timeout_s: Seconds = key(
        30.0, "On SIGTERM, seconds to finish in-flight requests and running jobs before exiting."
    )

    @property
    def host(self) -> str:
        return split_listen(self.listen)[0]

    @property
    def port(self) -> int:
        return split_listen(self.listen)[1]


class TelemetryConfig(Section):
    """[telemetry]: Prometheus metrics and OpenTelemetry traces."""

    service_name: Annotated[str, parsed(non_empty_string, str)] = key(
        "cuzk",
        'OpenTelemetry service.name. Default: $OTEL_SERVICE_NAME when set, else "cuzk".',
        env_fallback="OTEL_SERVICE_NAME",
    )
    metrics: Flag = key(
        True,
        "Serve Prometheus metrics on /metrics (OpenMetrics with exemplars when the scraper asks).",
    )
    tracing: Flag = key(
        True,
        "Record OpenTelemetry spans (cuzk.job > cuzk.partition > ...). They leave the process "
        "when OTEL_TRACES_EXPORTER asks, or over OTLP when an endpoint is set here or through "
        "the standard OTEL_EXPORTER_OTLP_* variables (docs/telemetry.md lists them all).",
    )
    otlp_endpoint: OptionalText = key(
        "",
        'OTLP endpoint such as "http://localhost:4318", used when OTEL_EXPORTER_OTLP_ENDPOINT '
        "is not set; the protocol is OTEL_EXPORTER_OTLP_PROTOCOL's (default http/protobuf). "
        '"" = the standard OTEL_* variables only.',
    )
    nvml_replay: OptionalPath = key(
        "",
        "A recording of NVML samples (JSON, docs/operations.md) exported as the device gauges "
        "(cuzk_device_utilization_ratio, cuzk_device_memory_used_bytes) of the devices it "
        "names, instead of reading the driver: rehearses the device dashboards and alerts on "
        'a host without a GPU. "" = the driver, when pynvml and a GPU are present.',
    )


class ProverConfig(Section):
    """[prover]: the CPU prover (the backend without a GPU, and a GPU host's fallback)."""

    field_arith: Annotated[str, one_of(FIELD_ARITH)] = key(
        "auto",
        'Field multiply of the CPU MSMs: "auto" = mulx/adcx/adox where the CPU has BMI2 and ADX '
        '(checked at start), "portable" = plain 64-bit C everywhere.',
    )
    msm_precompute: Annotated[str, one_of(MSM_PRECOMPUTE)] = key(
        "auto",
        "Precomputed window tables for the proving keys' MSM points, built once at key load "
        "(the key's host bytes and the memory budget count them; about 7x the key's point "
        'sections for porep-c2): "on", "off", or "auto" = on for a kind whose tables take at '
        f"most 1/{MSM_PRECOMPUTE_BUDGET_SHARE} of the host memory budget "
        "(engine.memory_budget_bytes). `cuzk prove`, one "
        'proof per process, builds them only when "on": the build costs more than one proof '
        "saves. On a CUDA device the tables are device memory instead, built at key upload "
        "(the key's device bytes count them): "
        f'"on" = at most 1/{MSM_PRECOMPUTE_BUDGET_SHARE} of the device\'s memory per key; '
        '"auto" = none on a device until a device run shows they pay (the build holds the '
        "device at upload).",
    )


class JournalConfig(Section):
    """[journal]: the on-disk record of accepted jobs, so a restart loses none."""

    enabled: Flag = key(True, "Record accepted jobs on disk and recover them at start.")
    path: Annotated[Path, state_file("journal.sqlite3")] = key(
        "",
        'The journal file (SQLite); "" = $XDG_STATE_HOME/cuzk/journal.sqlite3 '
        "(~/.local/state/cuzk/journal.sqlite3).",
    )
    retention_jobs: Count = key(
        10000, "Finished jobs kept in the journal; the oldest are deleted first."
    )
    retention_s: Seconds = key(
        604800, "Seconds a finished job is kept in the journal (604800 = 7 days)."
    )


class ClusterConfig(Section):
    """[cluster]: run the engine's steps on a Ray cluster (docs/cluster.md)."""

    address: OptionalText = key(
        "",
        'Ray cluster to drive, as "host:port" of `ray start --head`; "" = one process '
        "(Ray is never imported). Needs the cluster extra (docs/cluster.md, Install).",
    )
    gpu_slots: Annotated[int | None, parsed(int_or_auto(lambda: None), int | str)] = key(
        "auto",
        "GPU workers the head can drive at once (its threads are fixed at start); "
        '"auto" = the GPUs Ray reports at start.',
    )
    connect_timeout_s: Seconds = key(
        30,
        "Seconds the head waits to reach Ray at the address (a TCP connect, then joining as "
        'the driver) before it exits with "cannot reach Ray at ADDRESS".',
    )
    sd_file: Annotated[Path, state_file("cuzk_sd.json")] = key(
        "",
        "Prometheus file_sd file the head keeps listing every live cuzk endpoint of the cluster "
        '(labels node, role); "" = $XDG_STATE_HOME/cuzk/cuzk_sd.json.',
    )


PROOF_KIND_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def _proof_kind_name(name: str) -> str | None:
    """Proof kind names are labels and URL path parts: keep them plain."""
    if PROOF_KIND_NAME.fullmatch(name):
        return None
    return (
        "proof kind names must be 1-64 characters of lower-case letters, digits, '.', '_' or '-',"
        f" starting with a letter or digit; got {name!r}"
    )


class ProofKindConfig(Section):
    """[proof_kinds.<name>]: one proof kind (a bundled one's defaults come from the registry)."""

    name: str
    r1cs: FilePath = key(
        REQUIRED,
        "Circuit .r1cs (required for a kind that is not bundled).",
        example="circuits/my.r1cs",
    )
    wasm: FilePath = key(
        REQUIRED,
        "The circom witness generator .wasm (required for a kind that is not bundled).",
        example="circuits/my_js/my.wasm",
    )
    enabled: Flag = key(True, "false drops the kind (for example a bundled one).")
    zkey: OptionalPath = key(
        "",
        'Proving key; "" = generated into keys_dir on first use (at start when '
        'deadline_admission is "reject").',
    )
    sample_input: OptionalPath = key(
        "", "Example input for one partition (what `cuzk submit` sends without --input)."
    )
    partitions: Count = key(1, "Partitions (independent proofs) per job.")
    priority: Annotated[str, one_of(PRIORITIES)] = key(
        DEFAULT_PRIORITY, "Default priority: " + ", ".join(PRIORITIES) + "."
    )
    deadline: Annotated[float | None, parsed(optional_duration, float | str)] = key(
        "", 'Relative deadline a submit without one gets, e.g. "20s" or "30m"; "" = none.'
    )
    on_deadline_miss: Annotated[str, one_of(DEADLINE_MISS_POLICIES)] = key(
        "continue",
        'When a job\'s deadline passes: "cancel" drops its unstarted partitions and ends it '
        'deadline_exceeded; "continue" lets it finish (counted as a miss).',
    )
    deadline_admission: Annotated[str, one_of(DEADLINE_ADMISSIONS)] = key(
        "accept",
        "A submit whose deadline cannot be met even at the front of its priority class: "
        '"reject" refuses it (503, naming the predicted finish); "accept" takes it, at risk.',
    )
    phase_seconds: PhaseSeconds = key(
        "",
        "Expected seconds per partition phase, predictions' starting point before any is "
        "measured (later runs start from the journal's figures), e.g. {synthesizing = 0.8, "
        'proving = 2.5, finalizing = 0.4}; "" = none.',
    )
    bundled: bool = False


PROOF_KIND_SCHEMA: dict[str, Setting] = keys_of(ProofKindConfig)


@functools.cache
def engine_model() -> type[Section]:
    """[engine] as a model, built from the keys ``EngineSettings`` declares (imported here on
    first use, so that importing cuzk.config does not import the engine package)."""
    from cuzk.engine.settings import EngineSettings

    fields: dict[str, Any] = {
        name: (Annotated[Any, parsed(spec.parse)], key(spec.default, spec.doc))
        for name, spec in settings_of(EngineSettings).items()
    }
    return create_model("EngineSection", __base__=Section, __doc__="[engine]", **fields)


def _sections() -> dict[str, type[Section]]:
    """Section name -> the model declaring its keys, in file order."""
    return {
        "server": ServerConfig,
        "engine": engine_model(),
        "telemetry": TelemetryConfig,
        "journal": JournalConfig,
        "prover": ProverConfig,
        "cluster": ClusterConfig,
    }


def schema() -> dict[str, dict[str, Setting]]:
    """Every fixed section's keys: ``{section: {key: Setting}}``."""
    return {name: keys_of(model) for name, model in _sections().items()}


def __getattr__(name: str) -> Any:
    # SCHEMA (and EngineConfig) name the engine's settings, imported on first use.
    if name == "SCHEMA":
        return schema()
    if name == "EngineConfig":
        from cuzk.engine.settings import EngineSettings

        return EngineSettings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _default_engine() -> EngineSettings:
    from cuzk.engine.settings import EngineSettings

    return EngineSettings()


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
        engine = engine_model().model_construct(  # the engine's values, already checked
            **{name: getattr(self.engine, name) for name in engine_model().model_fields}
        )
        out: dict[str, Any] = {
            name: (engine if name == "engine" else getattr(self, name)).model_dump(mode="json")
            for name in _sections()
        }
        out["proof_kinds"] = {
            name: k.model_dump(mode="json", exclude={"name", "bundled"})
            | {"name": k.name, "bundled": k.bundled}
            for name, k in self.proof_kinds.items()
        }
        out["source"] = str(self.source) if self.source is not None else None
        return out

    def engine_settings(self) -> EngineSettings:
        """The engine's own ``EngineSettings``, so the engine never depends on config parsing."""
        return engine_settings(self)


# What a proof kind's settings take from its section under the same name (deadline: deadline_s).
_KIND_FIELDS = ("partitions", "priority", "r1cs", "wasm", "zkey", "on_deadline_miss",
                "deadline_admission", "phase_seconds")


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
                name=name, deadline_s=k.deadline, **{f: getattr(k, f) for f in _KIND_FIELDS}
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


_REQUIRED_FOR_A_NEW_KIND = "required for a proof kind that is not bundled"


def _bundled_values(b: Any) -> dict[str, Any]:
    """A bundled kind's values from the circuit registry (where they are declared)."""
    if b is None:
        return {}
    return {
        "r1cs": Path(b.r1cs_path),
        "wasm": Path(b.wasm_path),
        "partitions": int(b.partitions),
        "priority": str(b.priority),
        "deadline": getattr(b, "deadline_s", None),
        "on_deadline_miss": str(getattr(b, "on_deadline_miss", "continue")),
        "deadline_admission": str(getattr(b, "deadline_admission", "accept")),
        "sample_input": getattr(b, "sample_input_path", None) or None,
    }


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


def _validate(
    model: type[Section], raw: Mapping[str, _Raw], env: Mapping[str, str]
) -> tuple[Any, list[tuple[str, str]], list[str]]:
    """``model`` from raw values (defaults for the rest): (the section, [], []), or (None,
    [(key, problem)], [missing required keys]); each problem in the parser's words, never
    pydantic's (which would show the value, a secret's too)."""
    context = {"env": env, "bases": {k: r.base for k, r in raw.items()}}
    try:
        return model.model_validate({k: r.value for k, r in raw.items()}, context=context), [], []
    except ValidationError as e:
        errors = e.errors(include_url=False, include_input=False)
    missing = [str(err["loc"][0]) for err in errors if err["type"] == "missing"]
    problems = [
        (str(err["loc"][0]), str(err.get("ctx", {}).get("error") or err["msg"]))
        for err in errors
        if err["type"] != "missing"
    ]
    return None, problems, missing


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
    keys_of_section = {name: model.model_fields for name, model in sections.items()}
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
                for key_, value in ktable.items():
                    if key_ not in PROOF_KIND_SCHEMA:
                        at = f"proof_kinds.{name}.{key_}"
                        problems.append(_unknown(at, key_, PROOF_KIND_SCHEMA))
                        continue
                    kind_raw.setdefault(name, {})[key_] = _Raw(value, base)
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
        for key_, value in table.items():
            if key_ not in keys_of_section[section]:
                problems.append(_unknown(f"{section}.{key_}", key_, keys_of_section[section]))
                continue
            raw[section][key_] = _Raw(value, base)

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
            token, key_ = _split_kind_variable(var[len(kind_prefix) :], env_tokens)
            if token is None or token not in env_tokens:
                problems.append(
                    f"{var}: no proof kind matches {token or var[len(kind_prefix) :]!r}"
                    f" (configured: {', '.join(all_kind_names) or 'none'})"
                )
                continue
            name = env_tokens[token]
            if key_ not in PROOF_KIND_SCHEMA:
                problems.append(
                    _unknown(f"{var}: proof_kinds.{name}.{key_}", key_, PROOF_KIND_SCHEMA)
                )
                continue
            kind_raw.setdefault(name, {})[key_] = _Raw(value, None, var)
            continue
        for section, keys in keys_of_section.items():
            prefix = ENV_PREFIX + section.upper() + "_"
            if var.startswith(prefix):
                key_ = var[len(prefix) :].lower()
                if key_ not in keys:
                    problems.append(_unknown(f"{var}: {section}.{key_}", key_, keys))
                else:
                    raw[section][key_] = _Raw(value, None, var)
                break
        # Any other CUZK_* variable (CUZK_CONFIG, CUZK_URL, ...) is not a config key.

    for dotted, value in (overrides or {}).items():
        section, _, key_ = dotted.partition(".")
        if section not in keys_of_section or key_ not in keys_of_section[section]:
            raise ValueError(f"override for unknown key {dotted!r}")
        if value is not None:
            raw[section][key_] = _Raw(value, None, "command line")

    def where(section: str, key: str, r: _Raw | None) -> str:
        if r is not None and r.origin:
            return f"{section}.{key} (from {r.origin})"
        return f"{section}.{key}"

    # Validate the fixed sections.
    built: dict[str, Any] = {}
    for section, model in sections.items():
        for name, spec in keys_of(model).items():
            fallback = spec.env_fallback
            if name not in raw[section] and fallback and env.get(fallback):
                raw[section][name] = _Raw(env[fallback], None, fallback)
        built[section], errors, _ = _validate(model, raw[section], env)
        for name, msg in errors:
            problems.append(f"{where(section, name, raw[section].get(name))}: {msg}")
    # Validate the proof kinds: the registry's values for a bundled one, then its table.
    kinds: dict[str, ProofKindConfig] = {}
    for name in all_kind_names:
        b = bundled_by_name.get(name)
        layer = kind_raw.get(name, {})
        given = {"name": _Raw(name, None), "bundled": _Raw(b is not None, None)}
        given |= {k: _Raw(v, None) for k, v in _bundled_values(b).items()} | layer
        kind, errors, missing = _validate(ProofKindConfig, given, env)
        for k, msg in errors:
            problems.append(f"{where('proof_kinds', f'{name}.{k}', layer.get(k))}: {msg}")
        if errors or not boolean(given["enabled"].value if "enabled" in given else True):
            continue
        problems += [f"proof_kinds.{name}.{k}: {_REQUIRED_FOR_A_NEW_KIND}" for k in missing]
        if missing:
            continue
        if check_files:
            for k in ("r1cs", "wasm", "zkey", "sample_input"):
                p = getattr(kind, k)
                problem = None if p is None else not_a_file(p)
                if problem:
                    at = where("proof_kinds", f"{name}.{k}", layer.get(k))
                    problems.append(f"{at}: {problem}: {p}")
        kinds[name] = kind

    if not kinds and not any(p.startswith("proof_kinds") for p in problems):
        problems.append("proof_kinds: no proof kind is enabled")
    if problems:
        raise ConfigError(problems)

    from cuzk.engine.settings import EngineSettings

    try:  # the engine's checks across its keys (its own __post_init__)
        built["engine"] = EngineSettings(**dict(built["engine"]))
    except ValueError as e:
        problems.append(f"engine: {e}")
    horizon = getattr(built.get("engine"), "deadline_horizon", None)
    for name, kind in kinds.items():
        if horizon is not None and kind.deadline is not None and kind.deadline > horizon:
            problems.append(f"proof_kinds.{name}.deadline: {kind.deadline:g} s is beyond "
                            f"engine.deadline_horizon ({horizon:g} s)")
    if problems:
        raise ConfigError(problems)
    return Config(**built, proof_kinds=kinds, source=source)


def dump_defaults(bundled: Iterable[Any] | None = None) -> str:
    """The documented default config file (what ``cuzk/default_config.toml`` holds)."""
    from cuzk.config_docs import default_file

    return default_file(bundled)


if __name__ == "__main__":
    from cuzk.config_docs import main

    raise SystemExit(main())
