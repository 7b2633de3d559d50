"""Engine settings: a plain dataclass so the engine does not depend on how config is parsed.

The fields declared with ``setting(...)`` are the ``[engine]`` section of the config file: their
defaults and descriptions are written here and nowhere else (``cuzk.config`` loads TOML and
``CUZK_ENGINE_*`` variables onto them and generates ``cuzk/default_config.toml`` from them).
The other fields are filled in by the application (telemetry switches, proof kinds) or by tests
and the benchmark, which build an :class:`EngineSettings` directly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from cuzk.engine.scheduling import ORDERS, Order
from cuzk.protocol import (
    DEADLINE_ADMISSIONS,
    DEADLINE_MISS_POLICIES,
    DEFAULT_PRIORITY,
    PRIORITIES,
    PRIORITY_RANK,
)
from cuzk.settings_schema import (
    MSM_PRECOMPUTE,
    boolean,
    byte_size,
    byte_size_or_auto,
    choice,
    devices,
    duration,
    int_or_auto,
    non_negative_int,
    positive_byte_size,
    positive_int,
    setting,
    xdg_path,
)

BACKENDS: tuple[str, ...] = ("auto", "cpu", "cuda")

GiB = 1 << 30


def default_threads(kind: str, cpus: int | None = None) -> int:
    """Pool sizes for ``"auto"``: synthesis gets half the CPUs, finalization a quarter (min 2).

    Synthesis (witness + a/b/c) is the heaviest CPU step; finalization (one G2 MSM and a
    verify per partition) is lighter, and the GPU phase on the CPU backend needs cores too.
    """
    cpus = cpus or os.cpu_count() or 2
    return max(2, cpus // 2) if kind == "synthesis" else max(2, cpus // 4)


@dataclass(frozen=True)
class ProofKindSettings:
    """One proof kind: which circuit it proves, how many partitions a job has, its priority.

    ``r1cs``/``wasm`` None mean the bundled circuit of that name; ``zkey`` None means the
    cached development key in ``EngineSettings.keys_dir`` (generated once on first use).
    ``deadline_s``: the relative deadline a submit without one gets (None: none);
    ``on_deadline_miss`` / ``deadline_admission``: see ``cuzk.protocol``; ``phase_seconds``:
    configured phase durations (phase -> seconds) the predictions start from before any is
    measured (cuzk.engine.predict).
    """

    name: str
    partitions: int
    priority: str = DEFAULT_PRIORITY
    r1cs: Path | None = None
    wasm: Path | None = None
    zkey: Path | None = None
    deadline_s: float | None = None
    on_deadline_miss: str = "continue"
    deadline_admission: str = "accept"
    phase_seconds: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if self.partitions < 1:
            raise ValueError(f"proof kind {self.name!r}: partitions must be >= 1")
        if self.priority not in PRIORITY_RANK:
            raise ValueError(f"proof kind {self.name!r}: priority must be one of {PRIORITIES}")
        if self.deadline_s is not None and not self.deadline_s > 0:
            raise ValueError(f"proof kind {self.name!r}: deadline must be positive")
        if self.on_deadline_miss not in DEADLINE_MISS_POLICIES:
            raise ValueError(f"proof kind {self.name!r}: on_deadline_miss must be one of "
                             f"{DEADLINE_MISS_POLICIES}")
        if self.deadline_admission not in DEADLINE_ADMISSIONS:
            raise ValueError(f"proof kind {self.name!r}: deadline_admission must be one of "
                             f"{DEADLINE_ADMISSIONS}")
        for phase, seconds in self.phase_seconds:
            if not seconds >= 0:
                raise ValueError(f"proof kind {self.name!r}: phase_seconds[{phase}] must be "
                                 ">= 0")


@dataclass
class EngineSettings:
    """Everything the engine needs; every field has a working default.

    Not config keys: proof_kinds (name -> ProofKindSettings); metrics_enabled / tracing_enabled
    (off only to measure telemetry overhead) and service_name, from the [telemetry] section;
    split_proving (False makes a GPU worker wait for finalization, a benchmark comparison);
    job_retention / job_retention_s (finished jobs are kept for get/status/idempotency until
    they are beyond the newest ``job_retention`` or older than ``job_retention_s``; the journal
    follows the same rule; ``cuzk serve`` takes both from [journal]); journal_path (the SQLite
    job journal; None: jobs live in memory only and are lost on exit); record_intervals (keep
    busy/queue intervals for the benchmark's utilisation figure); scheduler ("deadline", or
    "arrival": the order before deadlines, which ignores them entirely, for the benchmark);
    preempt_synthesis (a synthesis thread waiting for memory for a partition gives way to a
    partition of a higher class queued for a thread; off only to measure what that buys);
    field_arith and msm_precompute (the CPU MSMs' multiply and window tables, from [prover];
    an engine built in code without a config builds no tables unless asked).
    """

    backend: str = setting(
        "auto",
        '"auto" uses CUDA when a usable GPU is present and the CPU backend otherwise; "cpu"; '
        '"cuda".',
        choice(BACKENDS),
    )
    gpu_workers_per_device: int = setting(
        2,
        "GPU workers per device. Each worker has a lane of its own on the device (CUDA "
        "streams, pinned staging buffers) over the device's shared resident keys, so with 2 "
        "two partitions' GPU phases run on the device at once; each reserves its own device "
        "working memory.",
        positive_int,
    )
    reserved_gpu_workers_per_device: int = setting(
        1,
        "GPU workers per device, besides gpu_workers_per_device, that take only critical and "
        "high partitions (a winning-post never waits for a GPU phase a porep-c2 partition "
        "holds: a phase is never interrupted). Each has a lane of its own and reserves its "
        "own device working memory while it proves; idle otherwise. 0: none.",
        non_negative_int,
    )
    synthesis_threads: int = setting(
        "auto",
        'CPU threads for witness + a/b/c synthesis; "auto" = half the CPUs (at least 2).',
        int_or_auto(lambda: default_threads("synthesis")),
    )
    finalizer_threads: int = setting(
        "auto",
        'CPU threads for finalization (G2 MSM, self-check); "auto" = a quarter of the CPUs '
        "(at least 2).",
        int_or_auto(lambda: default_threads("finalizer")),
    )
    memory_budget_bytes: int | None = setting(
        "auto",
        'The unified host memory budget. "auto" = MemTotal (/proc/meminfo) minus '
        "memory_safety_margin_bytes.",
        byte_size_or_auto,
    )
    memory_safety_margin_bytes: int = setting(
        "2GiB", "Left out of an auto-detected host budget.", byte_size
    )
    request_parse_reserve_bytes: int = setting(
        "64MiB",
        "Host memory kept apart for parsing and checking submit bodies (a bound per body "
        "byte, held while it is parsed), so a submit is parsed and answered even while "
        "proving holds the whole memory budget. Not part of memory_budget_bytes (an auto-detected "
        "budget leaves it out); a body whose parsing needs more than all of it is refused "
        "with 413.",
        positive_byte_size,
    )
    device_memory_budget_bytes: int | None = setting(
        "auto",
        'Per-GPU memory budget, where the CUDA backend is active. "auto" = device total minus '
        "device_memory_safety_margin_bytes.",
        byte_size_or_auto,
    )
    device_memory_safety_margin_bytes: int = setting(
        "1GiB", "Left out of an auto-detected device budget.", byte_size
    )
    cuda_devices: tuple[int, ...] | None = setting(
        "all",
        'CUDA devices to run workers on: "all" visible devices, or a list such as [0, 1].',
        devices,
    )
    keys_dir: Path = setting(
        "",
        "Where proving keys generated on first use (for proof kinds without a zkey) are cached, "
        "and the server's compiled witness generators (in witness/); "
        '"" = $XDG_CACHE_HOME/cuzk/keys (~/.cache/cuzk/keys), where `cuzk keygen` puts them.',
        xdg_path("XDG_CACHE_HOME", ".cache", "cuzk", "keys"),
    )
    self_verify: bool = setting(
        True,
        "Verify every proof before returning it (a failing proof fails its job and never "
        "reaches a client).",
        boolean,
    )
    deadline_horizon: float = setting(
        "7d",
        "The furthest ahead a job's deadline may be: a submit whose deadline is later is "
        "refused (400, naming this horizon), since any deadline goes before the work without "
        "one of its priority. A proof kind's own deadline must lie within it.",
        duration,
    )

    proof_kinds: dict[str, ProofKindSettings] = field(default_factory=dict)
    metrics_enabled: bool = True
    tracing_enabled: bool = True
    service_name: str = "cuzk"
    split_proving: bool = True
    job_retention: int = 1000
    job_retention_s: float = 604_800.0
    journal_path: Path | None = None
    record_intervals: bool = False
    scheduler: Order = "deadline"
    preempt_synthesis: bool = True
    field_arith: str = "auto"
    msm_precompute: str = "off"

    def host_budget_bytes(self) -> int:
        """The host memory budget: the configured one, else MemTotal less the safety margin
        and the request parse reserve (which is held apart from it).
        The engine's ledger and the prover's window-table decision both read it here."""
        from cuzk.engine.memory import auto_budget

        return self.memory_budget_bytes or auto_budget(
            self.memory_safety_margin_bytes + self.request_parse_reserve_bytes)
    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, not {self.backend!r}")
        for name in ("gpu_workers_per_device", "synthesis_threads", "finalizer_threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.reserved_gpu_workers_per_device < 0:
            raise ValueError("reserved_gpu_workers_per_device must be >= 0")
        if self.scheduler not in ORDERS:
            raise ValueError(f"scheduler must be one of {ORDERS}, not {self.scheduler!r}")
        if self.msm_precompute not in MSM_PRECOMPUTE:
            raise ValueError(f"msm_precompute must be auto, off or on, not {self.msm_precompute!r}")
        if self.memory_budget_bytes is not None and self.memory_budget_bytes <= 0:
            raise ValueError("memory_budget_bytes must be positive")
        if self.request_parse_reserve_bytes <= 0:
            raise ValueError("request_parse_reserve_bytes must be positive")
        if not 0 < self.deadline_horizon < float("inf"):
            raise ValueError("deadline_horizon must be a positive duration")
        for key, kind in self.proof_kinds.items():
            if key != kind.name:
                raise ValueError(f"proof kind key {key!r} differs from its name {kind.name!r}")
            if kind.deadline_s is not None and kind.deadline_s > self.deadline_horizon:
                raise ValueError(
                    f"proof kind {key!r}: deadline {kind.deadline_s:g} s is beyond "
                    f"deadline_horizon ({self.deadline_horizon:g} s)")


def default_proof_kinds(data_dir: Path | None = None) -> dict[str, ProofKindSettings]:
    """The bundled kinds (``cuzk.circuits.registry``, where their defaults are written).

    ``data_dir`` replaces ``cuzk/circuits/data``. Their zkeys are the cached development keys
    (``cuzk.prover.keystore``) unless a kind names one.
    """
    from cuzk.circuits.registry import bundled_circuits

    out = {}
    for name, c in bundled_circuits(data_dir).items():
        out[name] = ProofKindSettings(
            name=name, partitions=c.partitions, priority=c.priority, r1cs=c.r1cs_path,
            wasm=c.wasm_path, deadline_s=c.deadline_s, on_deadline_miss=c.on_deadline_miss,
            deadline_admission=c.deadline_admission,
        )  # fmt: skip
    return out
