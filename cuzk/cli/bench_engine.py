"""``cuzk bench engine``'s report: the runs side by side as a text table, then the summary lines
(what each figure means: ``cuzk.bench.engine``)."""

from __future__ import annotations

from collections.abc import Sequence

from cuzk.bench.engine import EngineBench, RunResult, pct

NO_NVML = "n/a (no NVML)"


def report(bench: EngineBench) -> list[str]:
    """The table (split+telemetry, no split, telemetry off) and the summary lines."""
    on = bench.on
    return [
        table([on, bench.nosplit, bench.off], bench.kinds),
        f"split proving: {bench.split_speedup:.2f}x the throughput of waiting for finalize",
        f"telemetry overhead: {bench.telemetry_overhead * 100:+.2f}% throughput "
        f"(median of {len(bench.on_runs)} on/off pairs; target < 2%)",
        f"min worker busy fraction while the GPU queue held work: {bench.min_busy_fraction:.4f} "
        f"(target >= 0.99)",
        device_utilization_line(on.device_utilization),
    ]


def table(results: Sequence[RunResult], kinds: Sequence[str]) -> str:
    cols = [r.name for r in results]
    rows: list[tuple[str, list[str]]] = [
        ("wall s", [f"{r.wall_s:.3f}" for r in results]),
        ("jobs/s", [f"{r.jobs_per_s:.2f}" for r in results]),
        ("partitions/s", [f"{r.partitions_per_s:.2f}" for r in results]),
        ("failed jobs", [str(r.failed) for r in results]),
    ]
    for kind in kinds:
        rows.append((f"{kind} p50 s", [f"{pct(r.latency_s.get(kind, []), 50):.3f}"
                                       for r in results]))
        rows.append((f"{kind} p95 s", [f"{pct(r.latency_s.get(kind, []), 95):.3f}"
                                       for r in results]))
    workers = sorted({w for r in results for w in r.busy_fraction})
    for w in workers:
        rows.append((f"{w} busy frac", [f"{r.busy_fraction.get(w, float('nan')):.4f}"
                                        for r in results]))
    # Beside the busy fractions: how much of the backlog each device ran kernels (NVML).
    devices = sorted({d for r in results for d in (r.device_utilization or {})})
    for d in devices:
        rows.append((f"{d} device util", [_util(r.device_utilization, d) for r in results]))
    if not devices:
        rows.append(("device util", [_util(r.device_utilization, None) for r in results]))
    width0 = max(len(r[0]) for r in rows)
    widths = [max(len(c), *(len(r[1][i]) for r in rows)) for i, c in enumerate(cols)]
    lines = ["  ".join([" " * width0, *(c.rjust(w) for c, w in zip(cols, widths, strict=True))])]
    for label, vals in rows:
        lines.append("  ".join([label.ljust(width0),
                                *(v.rjust(w) for v, w in zip(vals, widths, strict=True))]))
    return "\n".join(lines)


def _util(means: dict[str, float] | None, device: str | None) -> str:
    if means is None:
        return NO_NVML
    return f"{means[device]:.4f}" if device in means else "n/a"


def device_utilization_line(means: dict[str, float] | None) -> str:
    """The summary line: each device's mean utilisation over the backlog, or n/a."""
    if not means:
        return f"device utilisation (NVML, mean over the backlog): {NO_NVML}"
    return "device utilisation (NVML, mean over the backlog): " + ", ".join(
        f"{d} {v:.4f}" for d, v in sorted(means.items()))
