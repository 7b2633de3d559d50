"""Engine settings: a plain dataclass so the engine does not depend on how config is parsed.

``cuzk.config`` builds an :class:`EngineSettings` from TOML and ``CUZK_*`` variables; tests and
the benchmark build one directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cuzk.protocol import DEFAULT_PRIORITY, PRIORITIES, PRIORITY_RANK

BACKENDS: tuple[str, ...] = ("auto", "cpu", "cuda")

GiB = 1 << 30
DEFAULT_RETENTION_JOBS = 10_000
"""Finished jobs kept (in memory and in the journal) before the oldest are dropped."""
DEFAULT_RETENTION_S = 604_800.0
"""Seconds a finished job is kept (7 days)."""
DEFAULT_DRAIN_TIMEOUT_S = 30.0
"""How long a SIGTERM drain lets partitions in flight finish."""


@dataclass(frozen=True)
class ProofKindSettings:
    """One proof kind: which circuit it proves, how many partitions a job has, its priority.

    ``r1cs``/``wasm`` None mean the bundled circuit of that name; ``zkey`` None means the
    cached development key in ``EngineSettings.keys_dir`` (generated once on first use).
    """

    name: str
    partitions: int
    priority: str = DEFAULT_PRIORITY
    r1cs: Path | None = None
    wasm: Path | None = None
    zkey: Path | None = None

    def __post_init__(self) -> None:
        if self.partitions < 1:
            raise ValueError(f"proof kind {self.name!r}: partitions must be >= 1")
        if self.priority not in PRIORITY_RANK:
            raise ValueError(f"proof kind {self.name!r}: priority must be one of {PRIORITIES}")


@dataclass
class EngineSettings:
    """Everything the engine needs; every field has a working default.

    backend: "auto" (CUDA when usable, else CPU), "cpu" or "cuda".
    cuda_devices: device indices to use on the CUDA backend (None: all visible).
    gpu_workers_per_device: GPU workers per device (a device overlaps two partitions by default).
    synthesis_threads / finalizer_threads: CPU pool sizes.
    memory_budget_bytes: host budget; None means MemTotal minus memory_safety_margin_bytes.
    device_memory_budget_bytes: per-device budget; None means device total minus the margin.
    proof_kinds: name -> ProofKindSettings.
    keys_dir: cache of development zkeys for kinds that name none (None: ~/.cache/cuzk/keys).
    self_verify: verify every proof before returning it (the real prover's finalize step).
    metrics_enabled / tracing_enabled: off only to measure telemetry overhead.
    split_proving: False makes a GPU worker wait for finalization (benchmark comparison only).
    job_retention / job_retention_s: finished jobs are kept for get/status/idempotency until
        they are beyond the newest ``job_retention`` or older than ``job_retention_s``; the
        journal follows the same rule.
    journal_path: the SQLite job journal (None: jobs live in memory only and are lost on exit).
    record_intervals: keep busy/queue intervals (the benchmark's utilisation figure).
    """

    backend: str = "auto"
    cuda_devices: list[int] | None = None
    gpu_workers_per_device: int = 2
    synthesis_threads: int = 2
    finalizer_threads: int = 2
    memory_budget_bytes: int | None = None
    memory_safety_margin_bytes: int = 2 * GiB
    device_memory_budget_bytes: int | None = None
    device_memory_safety_margin_bytes: int = 1 * GiB
    proof_kinds: dict[str, ProofKindSettings] = field(default_factory=dict)
    keys_dir: Path | None = None
    self_verify: bool = True
    metrics_enabled: bool = True
    tracing_enabled: bool = True
    service_name: str = "cuzk"
    split_proving: bool = True
    job_retention: int = DEFAULT_RETENTION_JOBS
    job_retention_s: float = DEFAULT_RETENTION_S
    journal_path: Path | None = None
    record_intervals: bool = False

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, not {self.backend!r}")
        for name in ("gpu_workers_per_device", "synthesis_threads", "finalizer_threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.memory_budget_bytes is not None and self.memory_budget_bytes <= 0:
            raise ValueError("memory_budget_bytes must be positive")
        for key, kind in self.proof_kinds.items():
            if key != kind.name:
                raise ValueError(f"proof kind key {key!r} differs from its name {kind.name!r}")


# Proof kinds shaped like Filecoin's (design.md section 1); circuits are structural stand-ins.
DEFAULT_KINDS: tuple[tuple[str, int, str], ...] = (
    ("winning-post", 1, "critical"),
    ("window-post", 1, "high"),
    ("snap-update", 16, "normal"),
    ("porep-c2", 10, "normal"),
)


def default_proof_kinds(data_dir: Path | None = None) -> dict[str, ProofKindSettings]:
    """The four bundled kinds, with circuit files under ``cuzk/circuits/data/<kind>/``.

    Their zkeys are the cached development keys (``cuzk.prover.keystore``) unless a kind
    names one.
    """
    if data_dir is None:
        data_dir = Path(__file__).resolve().parent.parent / "circuits" / "data"
    return {
        name: ProofKindSettings(
            name=name,
            partitions=parts,
            priority=prio,
            r1cs=data_dir / name / "circuit.r1cs",
            wasm=data_dir / name / "circuit.wasm",
        )
        for name, parts, prio in DEFAULT_KINDS
    }
