#!/usr/bin/env python3
"""Generate the cuzk Prometheus rule files; this file is their single source of truth.

    python deploy/prometheus/build_rules.py          # rewrite deploy/prometheus/rules/*.yml
    python deploy/prometheus/build_rules.py --check  # exit 1 if the committed files are stale
    python deploy/prometheus/build_rules.py --grafana-url https://grafana.example.com

Every alert links its runbook and its dashboard with absolute URLs built from ONE base, the
Grafana root URL (default ``DEFAULT_GRAFANA_URL``, or ``$CUZK_GRAFANA_URL``): the runbooks are
the sections of docs/operations.md, served by the generated "cuzk / Runbook" dashboard, so the
links work in the shipped stack and in a pager. Set the same URL as Grafana's root_url
(docker-compose.yml does, from the same variable).

Standard library only. Rules are kept to PromQL that both the Prometheus the tests run here
(Debian's 2.42) and the one docker-compose.yml deploys (3.x) evaluate the same way: no
native-histogram functions, no `limitk`, no experimental functions, and classic-histogram `le`
matched with a regex because 3.x writes `le="10"` where 2.x kept the exposition's `le="10.0"`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
RULES_DIR = HERE / "rules"
sys.path.insert(0, str(HERE.parent / "grafana"))
import build_dashboards as dashboards  # noqa: E402

DEFAULT_GRAFANA_URL = "http://localhost:3000"
J = 'job="cuzk"'
BY = "job, instance"
IN_FLIGHT = 'phase!~"done|failed|cancelled"'

# Latency objectives for the deadline-bound proof kinds: this share of succeeded jobs finish
# within the bound (a bucket boundary of cuzk_job_duration_seconds). Filecoin gives a winning
# PoSt about 25 s to reach the network and a WindowPoSt a 30-minute deadline window.
SLO_OBJECTIVE = 0.99
SLO_BOUNDS = {"winning-post": 10, "window-post": 120}
# Multi-window burn rates (Google SRE workbook, 30-day budget): fast pages, slow tickets.
BURN_FAST = (14.4, "1h", "5m")
BURN_SLOW = (6, "6h", "30m")
SLO_WINDOWS = ("5m", "30m", "1h", "6h")

# A GPU lease is stuck when it is this many times longer than the p99 GPU phase of its own proof
# kind (6-hour baseline), and never before MIN; a kind with no baseline yet counts as DEFAULT
# seconds.
STUCK_FACTOR = 10
STUCK_MIN_S = 120
STUCK_DEFAULT_GPU_S = 180
MONITORING_JOBS = "prometheus|alertmanager|otel-collector"
# A cluster (cuzk serve --cluster): the head's file_sd file labels each worker actor's target
# with node, role (gpu, cpu) and worker; the head itself is role="head". Engine-wide rules
# skip the actors' targets (no role label outside a cluster, so ENGINE matches every engine).
ACTORS = 'role=~"gpu|cpu"'
# The workers of any class. A reserved worker (cpu-rN, gpu-rN: engine.
# reserved_gpu_workers_per_device) takes only critical and high work and idles by design
# otherwise, so it is left out of capacity figures and of the idle alert.
REGULAR = 'worker!~".+-r[0-9]+"'
ENGINE = f'{J}, role!~"gpu|cpu"'
CLUSTER_BY = "job, node, worker"
LOST_WINDOW = "1h"


@dataclass
class Rule:
    """One recording or alerting rule; ``why`` becomes the comment above it."""

    expr: str
    why: str
    record: str = ""
    alert: str = ""
    for_: str = ""
    severity: str = ""
    summary: str = ""
    description: str = ""
    dashboard: str = ""
    labels: dict[str, str] = field(default_factory=dict)


def rec(name: str, expr: str, why: str) -> Rule:
    return Rule(expr=expr, why=why, record=name)


def alert(name: str, expr: str, why: str, *, for_: str, severity: str, summary: str,
          description: str, dashboard: str) -> Rule:
    return Rule(expr=expr, why=why, alert=name, for_=for_, severity=severity, summary=summary,
                description=description, dashboard=dashboard)


# ---------------------------------------------------------------------------------------------
# Recording rules


def _le(seconds: int) -> str:
    return f'le=~"{seconds}(\\\\.0)?"'


def memory_pressure_recording() -> list[Rule]:
    """What CuzkMemoryPressure reads: how many reservations wait for memory on average, and
    how busy the GPU workers are over the same 10 minutes."""
    wait = "cuzk_memory_acquire_wait_seconds_sum"
    busy = f"cuzk_gpu_worker_busy_seconds_total{{{J}, {REGULAR}}}"
    return [
        rec("instance:cuzk_memory_waiting:avg_rate10m",
            f"sum by ({BY}) (rate({wait}{{{J}}}[10m]))",
            "Reservations waiting for memory, on average over 10 minutes: wait seconds per "
            "second (1.9 = about two synthesis threads waiting all the time). A time integral, "
            "so one sample without waiters does not reset it (the waiters gauge would), and "
            "no share of partition time: a deep backlog adds queued time, not wait time, so it "
            "cannot dilute this figure."),
        rec("instance:cuzk_gpu_worker_busy:ratio_rate10m",
            f"avg by ({BY}) (rate({busy}[10m]))",
            "Per engine: mean busy fraction of its GPU workers over 10 minutes (the window of "
            "the memory wait figure); reserved workers left out."),
    ]


def eviction_recording() -> list[Rule]:
    """What CuzkProvingKeyEvictionThrash reads: evictions by the running process only."""
    ev = f"sum by ({BY}) (cuzk_memory_evictions_total{{{J}}})"
    return [
        rec("instance:cuzk_memory_evictions:increase15m",
            f"sum by ({BY}) (increase(cuzk_memory_evictions_total{{{J}}}[15m]))\n"
            f"<= on ({BY})\n{ev}\nor on ({BY})\n{ev}",
            "Proving keys the running process evicted in 15 minutes: the smaller of the "
            "counter's 15-minute increase and its value. After a restart the counter starts "
            "at 0 and increase() would still count the old process's evictions for 15 "
            "minutes; the value counts only the new process's, all of them recent. An engine "
            "that cannot be scraped has no value, so nothing."),
    ]


def host_bound_recording() -> list[Rule]:
    """What CuzkGpuStarvedByHost reads: per device, how much of the time its GPU workers hold
    leases and how much of the time the device itself runs kernels (NVML), over 10 minutes."""
    busy = f"cuzk_gpu_worker_busy_seconds_total{{{J}, {REGULAR}}}"
    return [
        rec("instance_device:cuzk_gpu_worker_busy:ratio_rate10m",
            f"avg by ({BY}, device) (rate({busy}[10m]))",
            "Per device: mean share of the last 10 minutes its GPU workers held a GPU lease "
            "(the lease covers uploads and host steps of the GPU phase, not only kernels; "
            "reserved workers left out)."),
        rec("instance_device:cuzk_device_utilization:ratio_avg10m",
            f"avg_over_time(cuzk_device_utilization_ratio{{{J}}}[10m])",
            "Per device: mean NVML utilisation over 10 minutes, the share of time a kernel ran "
            "(each sample covers NVML's last sample period, under a second; 40 scrapes at "
            "15 s make an unbiased mean). Absent without NVML."),
    ]


def recording() -> dict[str, list[Rule]]:
    busy = f"cuzk_gpu_worker_busy_seconds_total{{{J}}}"
    phase_s = "cuzk_partition_phase_duration_seconds"
    workers = [
        rec("instance_worker:cuzk_gpu_worker_busy:ratio_rate5m", f"rate({busy}[5m])",
            "Per worker: the fraction of wall time it held an open GPU lease, from the "
            "busy-seconds counter, so a worker busy in bursts shorter than a scrape still counts "
            "(the sampled 0/1 gauge would read idle)."),
        rec("instance:cuzk_gpu_worker_busy:ratio_rate5m",
            f"avg by ({BY}) (rate(cuzk_gpu_worker_busy_seconds_total{{{J}, {REGULAR}}}[5m]))",
            "Per engine: mean busy fraction of its workers of any class (reserved ones, idle "
            "by design, left out)."),
        rec("instance:cuzk_gpu_workers:count",
            f"count by ({BY}) (cuzk_gpu_worker_busy{{{J}}})", "GPU workers per engine."),
        rec("instance:cuzk_gpu_queue_nonempty:bool",
            f'sum by ({BY}) (cuzk_partitions{{{J}, phase="queued_gpu"}}) > bool 0\n'
            f"or on ({BY})\n0 * group by ({BY}) (cuzk_build_info{{{J}}})\n"
            f"or on ({BY})\n0 * group by ({BY}) (up{{{J}}})",
            "1 while partitions wait for a GPU (phase queued_gpu), else 0; an engine that "
            "exports no queued_gpu series, or cannot be scraped, counts as an empty queue. An "
            "outage is CuzkTargetDown's business: without the 0s its last samples before it "
            "went down would fill the whole window (a queue that held work all along, beside "
            "workers that took none), and the idle alert would go pending on a stopped engine."),
        rec("instance:cuzk_gpu_queue_nonempty:ratio5m",
            "avg_over_time(instance:cuzk_gpu_queue_nonempty:bool[5m])",
            "Share of the last 5 minutes in which the GPU queue held work. While the queue "
            "holds work every working worker is busy, so a worker busy far less than this share "
            "is not taking work; a queue that empties between bursts does not reset it."),
        rec("instance:cuzk_gpu_workers_paused:sum",
            f"sum by ({BY}) (cuzk_gpu_workers_paused{{{J}}})",
            "GPU workers paused by an operator (POST /v1/workers/pause), per engine."),
        rec("instance_proof_kind:cuzk_partition_proving_seconds:p99_rate6h",
            f"histogram_quantile(0.99, sum by ({BY}, proof_kind, le) "
            f'(rate({phase_s}_bucket{{{J}, phase="proving"}}[6h])))',
            "The normal GPU phase of each proof kind: p99 over 6 hours."),
        rec("instance_proof_kind:cuzk_gpu_lease_stuck_threshold:seconds",
            f"clamp_min(\n  {STUCK_FACTOR} * (\n"
            f"    instance_proof_kind:cuzk_partition_proving_seconds:p99_rate6h >= 0\n"
            f"    or on ({BY}, proof_kind)\n"
            f"    0 * group by ({BY}, proof_kind) (cuzk_gpu_worker_lease_proof_kind{{{J}}})"
            f" + {STUCK_DEFAULT_GPU_S}\n"
            f"  ),\n  {STUCK_MIN_S}\n)",
            f"How long a GPU lease of each proof kind may stay open before it counts as stuck: "
            f"{STUCK_FACTOR}x the kind's own normal GPU phase, at least {STUCK_MIN_S} s. A kind "
            f"with no GPU phase in the last 6 hours counts as {STUCK_DEFAULT_GPU_S} s, whether "
            "it never had one or its history went stale: its p99 is then NaN (no rate in any "
            "bucket), which the >= 0 filter drops so that the fallback applies (NaN would "
            "compare false with every lease age and the alert could never fire). Per kind, "
            "never the maximum over kinds: a kind never proven must not raise another kind's "
            "threshold to 30 minutes (issue 27)."),
        rec("instance_worker:cuzk_gpu_lease_stuck_threshold:seconds",
            f"instance_proof_kind:cuzk_gpu_lease_stuck_threshold:seconds\n"
            f"* on ({BY}, proof_kind) group_right ()\n"
            f"max by ({BY}, worker, device, proof_kind) "
            f"(cuzk_gpu_worker_lease_proof_kind{{{J}}} == 1)",
            "The stuck threshold of each open GPU lease: its own proof kind's "
            "(cuzk_gpu_worker_lease_proof_kind names the kind of a worker's open lease)."),
    ]
    pipeline = [
        rec("instance_phase:cuzk_partitions:sum",
            f"sum by ({BY}, phase) (cuzk_partitions{{{J}}})", "Partitions per phase."),
        rec("instance_proof_kind:cuzk_partitions_in_flight:sum",
            f"sum by ({BY}, proof_kind) (cuzk_partitions{{{J}, {IN_FLIGHT}}})",
            "Partitions in flight (any non-terminal phase) per proof kind."),
        rec("instance:cuzk_partitions_in_flight:sum",
            f"sum by ({BY}) (cuzk_partitions{{{J}, {IN_FLIGHT}}})",
            "Partitions in flight per engine."),
        rec("instance:cuzk_partition_phases_closed:increase15m",
            f"sum by ({BY}) (increase({phase_s}_count{{{J}}}[15m]))",
            "Partition phases that ended in 15 minutes: any progress anywhere in the pipeline."),
        rec("instance:cuzk_jobs_queued:sum", f"sum by ({BY}) (cuzk_jobs_queued{{{J}}})",
            "Jobs accepted and not yet started (the backlog)."),
        rec("instance:cuzk_jobs_completed:rate15m",
            f"sum by ({BY}) (rate(cuzk_jobs_completed_total{{{J}}}[15m]))",
            "Jobs leaving the engine per second (any outcome)."),
        rec("instance:cuzk_jobs_backlog_growth:rate30m",
            f"sum by ({BY}) (rate(cuzk_jobs_submitted_total{{{J}}}[30m]))\n"
            f"- on ({BY})\n(sum by ({BY}) (rate(cuzk_jobs_completed_total{{{J}}}[30m]))"
            f" or on ({BY}) 0 * group by ({BY}) (cuzk_build_info{{{J}}}))",
            "Jobs per second the backlog grew by over 30 minutes (submitted minus finished)."),
        rec("instance:cuzk_jobs_backlog_drain:seconds",
            "instance:cuzk_jobs_queued:sum\n/ on (job, instance)\n"
            "instance:cuzk_jobs_completed:rate15m",
            "Seconds the backlog would take to drain at the last 15 minutes' pace: how long the "
            "newest queued job can expect to wait (+Inf with a backlog and no completions)."),
        rec("instance_proof_kind_status:cuzk_jobs_completed:rate5m",
            f"sum by ({BY}, proof_kind, status) (rate(cuzk_jobs_completed_total{{{J}}}[5m]))",
            "Completed jobs per second by proof kind and outcome."),
        rec("instance_proof_kind:cuzk_jobs_failed:increase15m",
            f"sum by ({BY}, proof_kind) "
            f'(increase(cuzk_jobs_completed_total{{{J}, status="failed"}}[15m]))',
            "Failed jobs in 15 minutes per proof kind."),
        rec("instance_proof_kind:cuzk_jobs_failed:ratio_rate15m",
            f"(\n  sum by ({BY}, proof_kind) "
            f'(rate(cuzk_jobs_completed_total{{{J}, status="failed"}}[15m]))\n'
            f"  or\n  0 * sum by ({BY}, proof_kind) "
            f"(rate(cuzk_jobs_completed_total{{{J}}}[15m]))\n)\n"
            f"/ on ({BY}, proof_kind)\n"
            f"sum by ({BY}, proof_kind) "
            f'(rate(cuzk_jobs_completed_total{{{J}, status=~"succeeded|failed"}}[15m]))',
            "Share of finished jobs that failed (cancellations are the client's doing); a kind "
            "that never failed reads 0, not no data."),
        rec("instance_proof_kind:cuzk_job_duration_seconds:p50_rate5m",
            f"histogram_quantile(0.5, sum by ({BY}, proof_kind, le) "
            f'(rate(cuzk_job_duration_seconds_bucket{{{J}, status="succeeded"}}[5m])))',
            "Median latency of succeeded jobs (a fast failure is not good latency)."),
        rec("instance_proof_kind:cuzk_job_duration_seconds:p95_rate5m",
            f"histogram_quantile(0.95, sum by ({BY}, proof_kind, le) "
            f'(rate(cuzk_job_duration_seconds_bucket{{{J}, status="succeeded"}}[5m])))',
            "p95 latency of succeeded jobs."),
        rec("instance:cuzk_engine_restarts:changes1h",
            f"max by ({BY}) (changes(process_start_time_seconds{{{J}}}[1h]))\n"
            f"or\nmax by ({BY}) (resets(cuzk_gpu_worker_busy_seconds_total{{{J}}}[1h]))",
            "Engine restarts in the last hour: changes of the process start time where the "
            "engine exports it, else resets of its busy-seconds counters (a restart that finds "
            "them all at 0 is not seen)."),
    ]
    memory = [
        rec("instance:cuzk_memory_reserved_bytes:sum",
            f"sum by ({BY}) (cuzk_memory_reserved_bytes{{{J}}})", "Reserved host bytes."),
        rec("instance:cuzk_memory_reserved:ratio",
            f"sum by ({BY}) (cuzk_memory_reserved_bytes{{{J}}})\n/ on ({BY})\n"
            f"sum by ({BY}) (cuzk_memory_budget_bytes{{{J}}})",
            "Reserved share of the memory budget."),
        *memory_pressure_recording(),
        *eviction_recording(),
        rec("instance_device:cuzk_device_memory_used:ratio",
            f"cuzk_device_memory_used_bytes{{{J}}}\n/ on ({BY}, device)\n"
            f"cuzk_device_memory_budget_bytes{{{J}}}",
            "Device memory in use (NVML, all processes) over cuzk's budget for that device; "
            "above 1 the safety margin is being eaten."),
    ]
    slo = []
    for w in SLO_WINDOWS:
        good = " or\n".join(
            f"  sum by ({BY}, proof_kind) (rate(cuzk_job_duration_seconds_bucket"
            f'{{{J}, status="succeeded", proof_kind="{k}", {_le(b)}}}[{w}]))'
            for k, b in SLO_BOUNDS.items())
        total = (f"sum by ({BY}, proof_kind) (rate(cuzk_job_duration_seconds_count"
                 f'{{{J}, status="succeeded", proof_kind=~"{"|".join(SLO_BOUNDS)}"}}[{w}]))')
        slo.append(rec(
            f"instance_proof_kind:cuzk_job_latency_slo_errors:ratio_rate{w}",
            f"1 - (\n{good}\n)\n/ on ({BY}, proof_kind)\n{total}",
            f"Share of succeeded deadline-bound jobs slower than their bound over {w} "
            "(winning-post " + f"{SLO_BOUNDS['winning-post']} s, window-post "
            f"{SLO_BOUNDS['window-post']} s)."))
    slo.append(rec(
        "instance_proof_kind:cuzk_job_latency_slo_slow:increase1h",
        " or\n".join(
            f"sum by ({BY}, proof_kind) (increase(cuzk_job_duration_seconds_count"
            f'{{{J}, status="succeeded", proof_kind="{k}"}}[1h]))\n- on ({BY}, proof_kind)\n'
            f"sum by ({BY}, proof_kind) (increase(cuzk_job_duration_seconds_bucket"
            f'{{{J}, status="succeeded", proof_kind="{k}", {_le(b)}}}[1h]))'
            for k, b in SLO_BOUNDS.items()),
        "Slow succeeded jobs in the last hour: a page needs at least a few, so one slow job "
        "on a quiet engine (a cold start loading its keys) cannot page."))
    return {"cuzk-recording": workers + host_bound_recording() + pipeline + memory,
            "cuzk-slo-recording": slo}


# ---------------------------------------------------------------------------------------------
# Alerting rules


# How much spare GPU capacity, and how many reservations waiting on average, make memory the
# limit on throughput (CuzkMemoryPressure).
MEMORY_WAITING_MIN = 0.5
MEMORY_BUSY_MAX = 0.8
# Keys evicted by the running process in 15 minutes above which the working set does not fit.
EVICTIONS_MAX = 6
# Minutes a pause must have lasted, with work queued half of that time, before it is a warning.
PAUSED_MIN = 15
# GPU starved by the host (CuzkGpuStarvedByHost): workers hold leases more than this share of
# the time while the device runs kernels less than that share, with the GPU queue holding work
# at least half of the window, for the duration below.
STARVED_BUSY_MIN = dashboards.STARVED_BUSY  # one number, in the panels' descriptions too
STARVED_DEVICE_MAX = dashboards.STARVED_DEVICE
STARVED_QUEUE_MIN = 0.5
STARVED_FOR = "10m"


def memory_pressure_alert(dashboard: str) -> Rule:
    return alert(
        "CuzkMemoryPressure",
        f"instance:cuzk_memory_waiting:avg_rate10m >= {MEMORY_WAITING_MIN}\n"
        f"and on ({BY})\ninstance:cuzk_gpu_worker_busy:ratio_rate10m < {MEMORY_BUSY_MAX}\n"
        f"unless on ({BY})\nmax_over_time(instance:cuzk_gpu_workers_paused:sum[10m]) > 0\n"
        f"and on ({BY})\nup{{{J}}} == 1",
        "Memory is what limits throughput: reservations wait for memory (at least half a "
        "waiter on average over 10 minutes, from the wait histogram's rate) while the GPU "
        f"workers have capacity to spare (busy under {MEMORY_BUSY_MAX:.0%}). Waiters beside "
        "saturated workers are back-pressure, not pressure; a pause idles the workers on "
        "purpose. Nothing here is a share of partition time, so a deep backlog cannot "
        "dilute it. Only while the engine is scraped: after it stops, its last 10 minutes "
        "of samples still give rates, and a stopped engine is CuzkTargetDown's business.",
        for_="10m", severity="warning", dashboard=dashboard,
        summary="{{ $value | printf \"%.2f\" }} reservations on {{ $labels.instance }} wait for "
        "memory while its GPU workers idle",
        description="Over the last 10 minutes {{ $value | printf \"%.2f\" }} reservations on "
        "{{ $labels.instance }} were waiting for memory on average (threshold "
        f"{MEMORY_WAITING_MIN}) while its GPU workers were busy less than "
        f"{MEMORY_BUSY_MAX:.0%} of the time: the memory budget, not the GPUs, bounds "
        "throughput.")


def eviction_thrash_alert(dashboard: str) -> Rule:
    return alert(
        "CuzkProvingKeyEvictionThrash",
        f"instance:cuzk_memory_evictions:increase15m > {EVICTIONS_MAX}\n"
        f"and on ({BY})\nup{{{J}}} == 1",
        "Keys evicted and reloaded over and over: the working set does not fit. Counts the "
        "running process's evictions only (a restart starts again from 0) and only while the "
        "engine is scraped: an outage is CuzkTargetDown's business, and without the up "
        "condition the last samples before it could fire this alert for 2 minutes before "
        "the target-down inhibition starts.",
        for_="10m", severity="warning", dashboard=dashboard,
        summary="{{ $value }} proving keys evicted on {{ $labels.instance }} in 15 minutes",
        description="{{ $labels.instance }} evicted {{ $value }} proving keys in the last 15 "
        f"minutes (threshold {EVICTIONS_MAX}). Every eviction of a key still in use is a "
        "reload from disk: the resident keys and the partitions in flight do not fit the "
        "budget.")


def paused_with_work_alert(dashboard: str) -> Rule:
    paused = "instance:cuzk_gpu_workers_paused:sum"
    w = f"{PAUSED_MIN}m"
    return alert(
        "CuzkGpuWorkersPausedWithQueuedWork",
        f"{paused} > 0\nand on ({BY})\nmin_over_time({paused}[{w}]) > 0\n"
        f"and on ({BY})\n{paused} offset {w} > 0\n"
        f"and on ({BY})\navg_over_time(instance:cuzk_gpu_queue_nonempty:bool[{w}]) >= 0.5",
        "A maintenance pause is an operator's choice, so it does not page; a pause left on "
        f"with work waiting is worth a warning after {PAUSED_MIN} minutes exactly: paused in "
        f"every sample of the last {PAUSED_MIN} minutes and {PAUSED_MIN} minutes ago, with the "
        "GPU queue holding work for at least half of that time. The windows carry the "
        "duration (no for:), so it does not add a queue window to the pause.",
        for_="0m", severity="warning", dashboard=dashboard,
        summary="{{ $value }} GPU worker(s) on {{ $labels.instance }} are paused while "
        "partitions wait for a GPU",
        description="{{ $value }} GPU worker(s) on {{ $labels.instance }} have been "
        f"paused (POST /v1/workers/pause) for {PAUSED_MIN} minutes while the GPU queue held "
        "work. Resume them with POST /v1/workers/resume when the maintenance is over.")


def gpu_starved_alert(dashboard: str) -> Rule:
    busy = "instance_device:cuzk_gpu_worker_busy:ratio_rate10m"
    util = "instance_device:cuzk_device_utilization:ratio_avg10m"
    return alert(
        "CuzkGpuStarvedByHost",
        f"{util} < {STARVED_DEVICE_MAX}\nand on ({BY}, device)\n{busy} > {STARVED_BUSY_MIN}\n"
        f"and on ({BY})\navg_over_time(instance:cuzk_gpu_queue_nonempty:bool[10m]) >= "
        f"{STARVED_QUEUE_MIN}\n"
        f"and on ({BY}, device)\ncuzk_device_utilization_ratio{{{J}}}\n"
        f"and on ({BY})\nup{{{J}}} == 1",
        "The engine is host-bound and the GPU starves: the device's workers hold their GPU "
        f"leases more than {STARVED_BUSY_MIN:.0%} of 10 minutes, with partitions waiting for "
        f"them at least {STARVED_QUEUE_MIN:.0%} of that time, yet NVML says the device ran "
        f"kernels less than {STARVED_DEVICE_MAX:.0%} of it. The lease time goes to host work "
        "inside the GPU phase (uploads, host-side steps, waits), so more GPUs would not add "
        "throughput. Idle workers or an empty queue cannot fire it (nothing is waiting on the "
        "device), and neither can an engine without NVML: no utilisation series, no alert. "
        "Only while the device answers NVML and the engine is scraped: a lost device "
        "(CuzkDeviceLost) or an outage (CuzkTargetDown) ends it at once, not after 10 "
        "minutes of old samples.",
        for_=STARVED_FOR, severity="warning", dashboard=dashboard,
        summary="Device {{ $labels.device }} on {{ $labels.instance }} runs kernels "
        "{{ $value | humanizePercentage }} of the time while its GPU workers are busy",
        description="Over the last 10 minutes NVML saw {{ $labels.device }} on "
        "{{ $labels.instance }} run kernels {{ $value | humanizePercentage }} of the time "
        f"(threshold {STARVED_DEVICE_MAX:.0%}) while its GPU workers held leases "
        "{{ with printf `" + busy + "{job=%q, instance=%q, device=%q}` $labels.job "
        "$labels.instance $labels.device | query }}{{ . | first | value | humanizePercentage }}"
        "{{ end }} of it (threshold " + f"{STARVED_BUSY_MIN:.0%}) and partitions waited for "
        "them: the engine is host-bound (uploads, host steps of the GPU phase), the GPU is "
        "starved.")


def alerts() -> dict[str, list[Rule]]:
    fleet, gpu, pipe, mem, mon = ("cuzk-fleet", "cuzk-gpu-workers", "cuzk-pipeline",
                                  "cuzk-memory", "cuzk-monitoring")
    old = f"group by ({BY}) (cuzk_build_info{{{J}}} offset 15m)"
    availability = [
        alert("CuzkTargetDown", f"up{{{J}}} == 0",
              "The scrape itself fails: the engine is down, hung, or unreachable.",
              for_="2m", severity="critical", dashboard=fleet,
              summary="cuzk engine {{ $labels.instance }} cannot be scraped",
              description="Prometheus has failed to scrape the cuzk engine at "
              "{{ $labels.instance }} for 2 minutes. Its other alerts cannot evaluate until "
              "the scrape works again."),
        alert("CuzkTargetVanished",
              f"group by ({BY}) (max_over_time(up{{{ENGINE}}}[6h]))\nunless on ({BY})\n"
              f"up{{{ENGINE}}}",
              "One engine disappeared from service discovery while others remain (absent() "
              "only sees the loss of every target). Fires for 6 hours after the loss; silence "
              "it when an engine is retired on purpose. A cluster's worker actors are not "
              "engines (a restarted actor serves a new port): CuzkClusterGpuWorkerLost "
              "watches them.",
              for_="5m", severity="critical", dashboard=fleet,
              summary="cuzk engine {{ $labels.instance }} is gone from service discovery",
              description="Prometheus scraped {{ $labels.instance }} within the last 6 hours "
              "but no longer has it as a target. Nothing watches that engine now."),
        alert("CuzkTargetAbsent", f"absent(up{{{J}}})",
              "No cuzk target exists at all: without this every cuzk alert would resolve.",
              for_="5m", severity="critical", dashboard=fleet,
              summary="No cuzk scrape target is known to Prometheus",
              description="Prometheus has had no up{job=\"cuzk\"} series for 5 minutes: the "
              "scrape job or service discovery lost every engine."),
        alert("CuzkMetricsMissing",
              f"(up{{{ENGINE}}} == 1)\nunless on ({BY}) (\n"
              f"  group by ({BY}) (cuzk_gpu_worker_busy_seconds_total{{{J}}})\n"
              f"  and on ({BY}) group by ({BY}) (cuzk_memory_budget_bytes{{{J}}})\n"
              f"  and on ({BY}) group by ({BY}) (cuzk_build_info{{{J}}})\n)",
              "The target answers but the series the other alerts need are missing (an engine: "
              "a cluster's worker actors export only their own busy series).",
              for_="10m", severity="warning", dashboard=fleet,
              summary="cuzk target {{ $labels.instance }} is up but its core metrics are "
              "absent",
              description="{{ $labels.instance }} answers scrapes, but "
              "cuzk_gpu_worker_busy_seconds_total, cuzk_memory_budget_bytes or cuzk_build_info "
              "has been missing for 10 minutes. Alerts and dashboards that use them cannot be "
              "trusted."),
        alert("CuzkEngineRestarting", "instance:cuzk_engine_restarts:changes1h >= 2",
              "A crash loop: one restart is a deploy, two in an hour is not.",
              for_="0m", severity="warning", dashboard=fleet,
              summary="cuzk engine {{ $labels.instance }} restarted {{ $value }} times in an "
              "hour",
              description="{{ $labels.instance }} restarted {{ $value }} times in the last "
              "hour. Each restart drops resident keys and resumes journaled jobs from the "
              "start of their unfinished partitions."),
    ]
    pipeline = [
        alert("CuzkGpuWorkerIdleWithQueuedWork",
              f'instance_worker:cuzk_gpu_worker_busy:ratio_rate5m{{role!="head", {REGULAR}}}'
              " < 0.05\n"
              "and on (job, instance)\ninstance:cuzk_gpu_queue_nonempty:ratio5m >= 0.5\n"
              f"unless on (job, instance, device)\n"
              f"max_over_time(cuzk_gpu_workers_paused{{{J}}}[5m]) > 0",
              "Per worker, from the busy-seconds counter: one wedged worker among busy ones "
              "still fires. The queue must have held work for half of the same 5 minutes, so "
              "a queue that empties between bursts neither hides a dead worker nor blames a "
              "healthy one. A device paused at any time in the window is the paused alert's "
              "business (its busy share is low because of the pause, and one missed scrape "
              "must not lift the suppression). A cluster head's GPU slots (role=\"head\") are "
              "dispatch threads, not GPUs: CuzkClusterGpuWorkerIdleWithQueuedWork watches the "
              "GPU worker actors themselves. A reserved worker (cpu-rN, gpu-rN) idles by design "
              "while only lower classes queue: left out.",
              for_="5m", severity="critical", dashboard=gpu,
              summary="GPU worker {{ $labels.worker }} on {{ $labels.instance }} is idle while "
              "partitions wait for a GPU",
              description="Worker {{ $labels.worker }} ({{ $labels.device }}) on "
              "{{ $labels.instance }} was busy {{ $value | humanizePercentage }} of the last 5 "
              "minutes (threshold 5%) while partitions waited in the GPU queue for at least "
              "half of that time. It is not taking work: wedged, or its device is lost."),
        paused_with_work_alert(gpu),
        gpu_starved_alert(gpu),
        alert("CuzkGpuWorkerStuck",
              f"max by ({BY}, worker, device) (cuzk_gpu_worker_lease_age_seconds{{{J}}})\n"
              f"> on ({BY}, worker, device) group_left (proof_kind)\n"
              "instance_worker:cuzk_gpu_lease_stuck_threshold:seconds",
              "One GPU lease open far longer than the normal GPU phase of its own proof kind: "
              "a kernel that does not return.",
              for_="2m", severity="critical", dashboard=gpu,
              summary="GPU worker {{ $labels.worker }} on {{ $labels.instance }} has held one "
              "{{ $labels.proof_kind }} lease for {{ $value | humanizeDuration }}",
              description="Worker {{ $labels.worker }} ({{ $labels.device }}) on "
              "{{ $labels.instance }} has been inside one {{ $labels.proof_kind }} GPU phase for "
              "{{ $value | humanizeDuration }}, more than "
              f"{STUCK_FACTOR}x that kind's normal GPU phase. Its partition makes no progress."),
        alert("CuzkJobsStuck",
              "min_over_time(instance:cuzk_partitions_in_flight:sum[15m]) > 0\n"
              "unless on (job, instance)\n"
              "instance:cuzk_partition_phases_closed:increase15m > 0\n"
              "unless on (job, instance)\n"
              "max_over_time(instance:cuzk_gpu_workers_paused:sum[15m]) > 0\n"
              f"and on ({BY})\n{old}",
              "Work in flight for all of the last 15 minutes but no partition phase ended in "
              "them (work that just arrived on an idle engine is not stuck). Only for an "
              "engine seen 15 minutes ago: a cold start's first job loads its keys first. A "
              "counter never created yet counts as no progress (unless removes nothing).",
              for_="5m", severity="critical", dashboard=pipe,
              summary="cuzk on {{ $labels.instance }} has made no progress for 15 minutes",
              description="{{ $value }} partition(s) are in flight on {{ $labels.instance }}, "
              "yet no partition phase ended in the last 15 minutes and workers are not paused. "
              "Jobs are stuck in the pipeline."),
        alert("CuzkJobFailureRateHigh",
              "instance_proof_kind:cuzk_jobs_failed:ratio_rate15m > 0.1\n"
              "and on (job, instance, proof_kind)\n"
              "instance_proof_kind:cuzk_jobs_failed:increase15m >= 3",
              "At least 3 failures, so that one bad input on a quiet engine does not page.",
              for_="5m", severity="warning", dashboard=pipe,
              summary="{{ $labels.proof_kind }} jobs on {{ $labels.instance }} are failing "
              "({{ $value | humanizePercentage }})",
              description="{{ $value | humanizePercentage }} of {{ $labels.proof_kind }} jobs "
              "that finished on {{ $labels.instance }} in the last 15 minutes failed "
              "(threshold 10%, at least 3 failures)."),
        alert("CuzkBacklogGrowing",
              "instance:cuzk_jobs_backlog_growth:rate30m * 1800 >= 10\n"
              "and on (job, instance)\ninstance:cuzk_jobs_queued:sum >= 10",
              "More jobs arrive than leave, for long enough that it is not a burst.",
              for_="15m", severity="warning", dashboard=pipe,
              summary="The backlog on {{ $labels.instance }} grew by {{ $value }} jobs in 30 "
              "minutes",
              description="{{ $labels.instance }} accepted {{ $value }} more jobs than it "
              "finished over the last 30 minutes and has 10 or more waiting: it is short of "
              "capacity for the load it is given."),
        alert("CuzkBacklogSlowToDrain",
              f"instance:cuzk_jobs_backlog_drain:seconds > 3600\nand on ({BY})\n{old}",
              "The age a new job will reach before it starts: backlog over throughput. +Inf "
              "(a backlog and no completions) counts; a fresh engine does not.",
              for_="15m", severity="warning", dashboard=pipe,
              summary="The backlog on {{ $labels.instance }} needs "
              "{{ $value | humanizeDuration }} to drain",
              description="At the last 15 minutes' completion rate the jobs queued on "
              "{{ $labels.instance }} take {{ $value | humanizeDuration }} to drain (threshold "
              "1 hour): the newest job waits that long before it starts."),
    ]
    slo = []
    for name, (factor, long, short), sev, for_ in (
            ("CuzkLatencySLOBurnFast", BURN_FAST, "critical", "2m"),
            ("CuzkLatencySLOBurnSlow", BURN_SLOW, "warning", "15m")):
        budget = round(1 - SLO_OBJECTIVE, 6)
        expr = (f"instance_proof_kind:cuzk_job_latency_slo_errors:ratio_rate{long} > "
                f"({factor} * {budget})\n"
                f"and on ({BY}, proof_kind)\n"
                f"instance_proof_kind:cuzk_job_latency_slo_errors:ratio_rate{short} > "
                f"({factor} * {budget})")
        if sev == "critical":
            expr += ("\nand on (job, instance, proof_kind)\n"
                     "instance_proof_kind:cuzk_job_latency_slo_slow:increase1h >= 3")
        slo.append(alert(
            name, expr,
            f"Multi-window burn rate on the latency objective ({SLO_OBJECTIVE:.0%} of "
            f"succeeded jobs within the bound): {factor}x the budget over {long} and over "
            f"{short}, so it starts fast and stops soon after the cause is gone.",
            for_=for_, severity=sev, dashboard=pipe,
            summary="{{ $labels.proof_kind }} on {{ $labels.instance }} is burning its latency "
            f"budget {factor}x too fast",
            description="{{ $value | humanizePercentage }} of succeeded "
            "{{ $labels.proof_kind }} jobs on {{ $labels.instance }} over the last "
            f"{long} were slower than their bound (winning-post {SLO_BOUNDS['winning-post']} s, "
            f"window-post {SLO_BOUNDS['window-post']} s); the objective allows "
            f"{budget:.0%}. At this rate a 30-day budget lasts {30 / factor:.1f} days."))
    memory = [
        memory_pressure_alert(mem),
        eviction_thrash_alert(mem),
        alert("CuzkDeviceMemorySaturated", "instance_device:cuzk_device_memory_used:ratio > 1",
              "NVML sees more memory in use on the device than cuzk's budget for it: the "
              "safety margin is gone (another process, or a leak).",
              for_="10m", severity="warning", dashboard=mem,
              summary="Device {{ $labels.device }} on {{ $labels.instance }} uses "
              "{{ $value | humanizePercentage }} of cuzk's device budget",
              description="NVML reports {{ $value | humanizePercentage }} of cuzk's memory "
              "budget for {{ $labels.device }} on {{ $labels.instance }} in use for 10 minutes. "
              "The next allocation can fail with out-of-memory."),
        alert("CuzkDeviceLost",
              f"group by ({BY}, device) (max_over_time(cuzk_device_memory_used_bytes{{{J}}}"
              f"[1h]))\nunless on ({BY}, device)\ncuzk_device_memory_used_bytes{{{J}}}\n"
              f"and on ({BY})\nup{{{J}}} == 1",
              "A device stopped answering NVML (its series drops out of the scrape) while the "
              "engine still answers: an Xid error, a fallen-off-the-bus GPU.",
              for_="2m", severity="critical", dashboard=gpu,
              summary="Device {{ $labels.device }} on {{ $labels.instance }} stopped answering "
              "NVML",
              description="{{ $labels.instance }} reported NVML metrics for "
              "{{ $labels.device }} within the last hour but no longer does, while the engine "
              "itself answers scrapes. Work on that device fails or hangs."),
    ]
    monitoring = [
        alert("CuzkMonitoringTargetDown",
              f'up{{job=~"{MONITORING_JOBS}"}} == 0\nor\n'
              f'group by ({BY}) (max_over_time(up{{job=~"{MONITORING_JOBS}"}}[6h]))\n'
              f'unless on ({BY})\nup{{job=~"{MONITORING_JOBS}"}}',
              "Alertmanager, the collector or Prometheus's own target down or gone: alerts "
              "or traces are being lost without this.",
              for_="5m", severity="warning", dashboard=mon,
              summary="{{ $labels.job }} target {{ $labels.instance }} is down",
              description="Prometheus cannot scrape {{ $labels.job }} at "
              "{{ $labels.instance }} (or lost it from discovery) for 5 minutes. While "
              "Alertmanager is down no alert reaches anyone; while the collector is down "
              "traces are lost."),
        alert("CuzkRuleEvaluationFailures",
              "sum by (job, instance, rule_group) "
              "(increase(prometheus_rule_evaluation_failures_total[10m])) > 0",
              "A rule that fails to evaluate is an alert that cannot fire.",
              for_="5m", severity="warning", dashboard=mon,
              summary="Rule group {{ $labels.rule_group }} fails to evaluate on "
              "{{ $labels.instance }}",
              description="{{ $value }} evaluations of rule group {{ $labels.rule_group }} "
              "failed on {{ $labels.instance }} in 10 minutes; its alerts cannot fire."),
        alert("CuzkAlertNotificationsFailing",
              "sum by (job, instance) (increase(prometheus_notifications_errors_total[10m])) > 0"
              "\nor\nsum by (job, instance) "
              "(increase(prometheus_notifications_dropped_total[10m])) > 0\nor\n"
              "sum by (job, instance, integration) "
              "(increase(alertmanager_notifications_failed_total[10m])) > 0\nor\n"
              'prometheus_notifications_alertmanagers_discovered{job="prometheus"} < 1',
              "Prometheus cannot hand alerts to Alertmanager, or Alertmanager cannot deliver "
              "them: paging is broken.",
              for_="5m", severity="warning", dashboard=mon,
              summary="Alert notifications are failing at {{ $labels.job }} "
              "{{ $labels.instance }}",
              description="{{ $labels.job }} at {{ $labels.instance }} failed or dropped "
              "{{ $value }} notification(s) in 10 minutes (or Prometheus knows no "
              "Alertmanager). Alerts are not reaching anyone."),
        alert("CuzkCollectorDroppingSpans",
              "sum by (job, instance) (rate({__name__=~\"otelcol_(exporter_send_failed|"
              "exporter_enqueue_failed|receiver_refused|processor_refused|processor_dropped)"
              "_spans(_total)?\"}[10m])) > 0",
              "The OpenTelemetry Collector refuses, drops or fails to export spans (from its "
              "own metrics): traces and exemplar links go missing.",
              for_="10m", severity="warning", dashboard=mon,
              summary="The collector at {{ $labels.instance }} is losing spans",
              description="The collector at {{ $labels.instance }} refused, dropped or failed "
              "to export {{ $value | humanize }} spans per second over 10 minutes."),
    ]
    return {
        "cuzk-availability": availability,
        "cuzk-pipeline": pipeline,
        "cuzk-latency-slo": slo,
        "cuzk-memory-devices": memory,
        "cuzk-monitoring": monitoring,
        "cuzk-deadlines": deadline_alerts(),
        "cuzk-cluster": cluster_alerts(),
    }


def cluster_alerts() -> list[Rule]:
    """A Ray cluster (docs/cluster.md): the GPU worker actors serve their own /metrics, listed
    by the head's file_sd file with labels node, role and worker. Both alerts name the node
    and the worker; a single-process engine has no such targets, so neither can fire for it.
    The GPU queue is the head's (role="head"): a cluster is one scrape job."""
    gpu = f'{J}, role="gpu"'
    head_queue = (f"max by (job) (\n  instance:cuzk_gpu_queue_nonempty:ratio5m\n"
                  f'  and on ({BY}) up{{{J}, role="head"}}\n)')
    return [
        alert("CuzkClusterGpuWorkerLost",
              f"group by ({CLUSTER_BY}) (max_over_time(up{{{gpu}}}[{LOST_WINDOW}]))\n"
              f"unless on ({CLUSTER_BY})\n(up{{{gpu}}} == 1)\n"
              f'and on (job)\n(up{{{J}, role="head"}} == 1)',
              "Partial loss: a GPU worker actor that answered within the last hour is gone "
              "(its target left the file_sd file, or it does not answer) while the head still "
              "runs, so the cluster proves with fewer GPUs. Keyed by node and worker, not "
              "address: a GPU worker restarted by Ray keeps its name and serves a new port, "
              "and is back within seconds. A head that is down is CuzkTargetDown's business.",
              for_="2m", severity="critical", dashboard="cuzk-gpu-workers",
              summary="GPU worker {{ $labels.worker }} on node {{ $labels.node }} is lost",
              description="GPU worker {{ $labels.worker }} on cluster node {{ $labels.node }} "
              "answered within the last hour but has not been a live target for 2 minutes: "
              "its node left the Ray cluster or its process cannot be restarted. Its work "
              "runs again on the other GPU workers (cuzk_partition_retries_total)."),
        alert("CuzkClusterGpuWorkerIdleWithQueuedWork",
              f"max by ({CLUSTER_BY}, device) (rate(cuzk_gpu_worker_busy_seconds_total"
              f"{{{gpu}}}[5m])) < 0.05\nand on (job)\n{head_queue} >= 0.5",
              "CuzkGpuWorkerIdleWithQueuedWork for a cluster: the busy seconds come from the GPU "
              "worker actor's own endpoint (its leases), the queue from the head. One idle "
              "actor among busy ones still fires.",
              for_="5m", severity="critical", dashboard="cuzk-gpu-workers",
              summary="GPU worker {{ $labels.worker }} on node {{ $labels.node }} is idle while "
              "partitions wait for a GPU",
              description="GPU worker {{ $labels.worker }} on cluster node {{ $labels.node }} "
              "was busy {{ $value | humanizePercentage }} of the last 5 minutes (threshold 5%) "
              "while partitions waited in the head's GPU queue for at least half of that "
              "time. It is not taking work: its calls fail or queue elsewhere (cuzk status "
              "shows it unreachable?), or the head has no slot bound to it "
              "(cluster.gpu_slots)."),
    ]


def deadline_alerts() -> list[Rule]:
    """Deadline-aware scheduling (issue 18). Every expression reads series that exist only
    while work with a deadline is unfinished (the slack and next-deadline gauges are absent
    otherwise) or a miss counter that moves only on a miss, so an empty queue or an idle
    engine never fires them."""
    pipe = "cuzk-pipeline"
    return [
        alert("CuzkDeadlineAtRisk",
              f"min by ({BY}, priority) (cuzk_queue_min_slack_seconds{{{J}}}) < 0",
              "The engine predicts that an unfinished job will finish after its deadline: the "
              "least slack of its priority class is negative. A kind never proven here is "
              "predicted from its prior (key sizes at the calibrated rates), so the first "
              "jobs of a kind are covered too.",
              for_="1m", severity="warning", dashboard=pipe,
              summary="A {{ $labels.priority }} job on {{ $labels.instance }} is predicted to "
              "miss its deadline",
              description="The least slack among unfinished {{ $labels.priority }} jobs with a "
              "deadline on {{ $labels.instance }} has been below zero for 1 minute "
              "({{ $value | humanizeDuration }}): at the predicted pace a deadline will be "
              "missed."),
        alert("CuzkDeadlineMissed",
              f"sum by ({BY}, proof_kind) "
              f"(increase(cuzk_job_deadline_missed_total{{{J}}}[10m])) > 0",
              "A job finished after its deadline, or was cut at it: a lost block reward "
              "(winning-post) or faulted sectors (window-post).",
              for_="0m", severity="critical", dashboard=pipe,
              summary="{{ $labels.proof_kind }} missed a deadline on {{ $labels.instance }}",
              description="{{ $value | humanize }} {{ $labels.proof_kind }} job(s) on "
              "{{ $labels.instance }} missed their deadline in the last 10 minutes."),
        alert("CuzkBacklogWillNotDrainBeforeDeadline",
              f"(sum by ({BY}) (cuzk_backlog_gpu_seconds{{{J}}}) > 0)\n"
              f"  / on ({BY}) instance:cuzk_gpu_workers:count{{{J}}}\n"
              f"> on ({BY})\n(min by ({BY}) (cuzk_queue_next_deadline_seconds{{{J}}}) > 0)",
              "The predicted GPU work queued and running, spread over every worker, takes "
              "longer than the time left to the nearest deadline: add GPUs or shed work. "
              "Only a backlog above zero against a deadline still ahead: a deadline already "
              "passed (a continue-on-miss job still finishing; CuzkDeadlineMissed's business) "
              "left any backlog, even none, greater than its negative time left.",
              for_="5m", severity="warning", dashboard=pipe,
              summary="cuzk {{ $labels.instance }} cannot drain its backlog before the "
              "nearest deadline",
              description="On {{ $labels.instance }} the backlog needs "
              "{{ $value | humanizeDuration }} of GPU time per worker, more than the time left "
              "to the nearest deadline, for 5 minutes."),
    ]


# ---------------------------------------------------------------------------------------------
# Links and rendering


def runbook_url(base: str, name: str) -> str:
    """The alert's runbook: its panel on the generated runbook dashboard."""
    return f"{base}/d/{dashboards.RUNBOOK_UID}/cuzk-runbook?viewPanel=panel-" \
           f"{dashboards.runbook_panel_ids()[name]}"


def dashboard_url(base: str, uid: str) -> str:
    return (f"{base}/d/{uid}/{uid}?var-job={{{{ $labels.job }}}}"
            f"&var-instance={{{{ $labels.instance }}}}")


def _scalar(value: str) -> str:
    return json.dumps(value)


def _render_rule(rule: Rule, base: str) -> list[str]:
    out = [f"      # {line}" for line in _wrap(rule.why, 92)]
    if rule.record:
        out.append(f"      - record: {rule.record}")
    else:
        out.append(f"      - alert: {rule.alert}")
    out.append("        expr: |-")
    out.extend(f"          {line}" for line in rule.expr.splitlines())
    if rule.alert:
        out.append(f"        for: {rule.for_}")
        out.append("        labels:")
        out.append(f"          severity: {rule.severity}")
        out.append("          service: cuzk")
        out.append("        annotations:")
        out.append(f"          summary: {_scalar(rule.summary)}")
        out.append(f"          description: {_scalar(rule.description)}")
        out.append(f"          runbook_url: {_scalar(runbook_url(base, rule.alert))}")
        out.append(f"          dashboard_url: {_scalar(dashboard_url(base, rule.dashboard))}")
    return out


def _wrap(text: str, width: int) -> Iterable[str]:
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            yield line
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        yield line


def _render_file(header: str, groups: dict[str, list[Rule]], base: str) -> str:
    lines = [f"# {line}" for line in header.splitlines()]
    lines.append("groups:")
    for name, rules in groups.items():
        lines.append(f"  - name: {name}")
        lines.append("    rules:")
        for rule in rules:
            lines.extend(_render_rule(rule, base))
    return "\n".join(lines) + "\n"


GENERATED = "GENERATED by deploy/prometheus/build_rules.py; edit that file, then run it."


def render(grafana_url: str = DEFAULT_GRAFANA_URL) -> dict[str, str]:
    """File name -> YAML text for every rule file."""
    base = grafana_url.rstrip("/")
    return {
        "cuzk-recording.yml": _render_file(
            f"Recording rules for the cuzk proving engine. {GENERATED}\n"
            "Alerts and dashboards read these series instead of repeating the expressions.",
            recording(), base),
        "cuzk-alerts.yml": _render_file(
            f"Alerting rules for the cuzk proving engine and its monitoring stack. {GENERATED}\n"
            "Runbooks: docs/operations.md, served by the cuzk / Runbook dashboard; unit tests: "
            "deploy/prometheus/tests/.", alerts(), base),
    }


def alert_names() -> list[str]:
    return [r.alert for rules in alerts().values() for r in rules]


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--grafana-url", default=os.environ.get("CUZK_GRAFANA_URL",
                                                                DEFAULT_GRAFANA_URL),
                        help="Grafana root URL the runbook and dashboard links start with")


def main(argv: list[str] | None = None) -> int:
    return dashboards.generator_main(
        argv, doc=__doc__, what="rule files", script="deploy/prometheus/build_rules.py",
        out_dir=RULES_DIR, render_files=lambda args: render(args.grafana_url),
        add_options=_options)


if __name__ == "__main__":
    sys.exit(main())
