#!/usr/bin/env python3
"""Generate the cuzk Grafana dashboards; this file is their single source of truth.

    python deploy/grafana/build_dashboards.py          # rewrite deploy/grafana/dashboards/*.json
    python deploy/grafana/build_dashboards.py --check  # exit 1 if the committed JSON is stale

Standard library only. Every panel gets a unit and a description, reads the provisioned
Prometheus through the ``$datasource`` variable, filters on ``$instance``, and computes rates
over ``$__rate_interval``. Proof kinds are shown in full (legend ``{{proof_kind}}``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parent / "dashboards"
DS = {"type": "prometheus", "uid": "${datasource}"}
INST = 'instance=~"$instance"'
TAGS = ["cuzk"]
RI = "$__rate_interval"


# ---------------------------------------------------------------------------------------------
# Building blocks


def q(expr: str, legend: str = "", *, ref: str = "A", instant: bool = False,
      exemplar: bool = False, fmt: str = "time_series") -> dict:
    """One Prometheus query target."""
    return {
        "datasource": DS,
        "editorMode": "code",
        "expr": expr,
        "exemplar": exemplar,
        "format": fmt,
        "instant": instant,
        "legendFormat": legend or "__auto",
        "range": not instant,
        "refId": ref,
    }


def refs(*targets: dict) -> list[dict]:
    """Give targets distinct refIds A, B, C, ..."""
    out = []
    for i, t in enumerate(targets):
        out.append({**t, "refId": chr(ord("A") + i)})
    return out


def _defaults(unit: str, *, minimum=None, maximum=None, decimals=None, thresholds=None) -> dict:
    d: dict = {
        "unit": unit,
        "color": {"mode": "palette-classic"},
        "thresholds": {
            "mode": "absolute",
            "steps": thresholds or [{"color": "green", "value": None}],
        },
    }
    if minimum is not None:
        d["min"] = minimum
    if maximum is not None:
        d["max"] = maximum
    if decimals is not None:
        d["decimals"] = decimals
    return d


def timeseries(title: str, description: str, unit: str, targets: list[dict], *,
               stack: bool = False, minimum=0, maximum=None, overrides=None,
               w: int = 12, h: int = 8) -> dict:
    """A time series panel."""
    defaults = _defaults(unit, minimum=minimum, maximum=maximum)
    defaults["custom"] = {
        "drawStyle": "line",
        "lineWidth": 1,
        "fillOpacity": 20 if stack else 0,
        "showPoints": "never",
        "spanNulls": False,
        "stacking": {"mode": "normal" if stack else "none", "group": "A"},
    }
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": refs(*targets),
        "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
        "options": {
            "legend": {"displayMode": "table", "placement": "bottom", "showLegend": True,
                       "calcs": ["lastNotNull", "max"]},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "_size": (w, h),
    }


def stat(title: str, description: str, unit: str, target: dict, *, thresholds=None,
         decimals=None, w: int = 4, h: int = 4) -> dict:
    """A single-value stat panel."""
    return {
        "type": "stat",
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": refs(target),
        "fieldConfig": {
            "defaults": _defaults(unit, thresholds=thresholds, decimals=decimals),
            "overrides": [],
        },
        "options": {
            "colorMode": "value",
            "graphMode": "area",
            "justifyMode": "auto",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "textMode": "auto",
        },
        "_size": (w, h),
    }


def gauge(title: str, description: str, unit: str, target: dict, *, thresholds,
          maximum=1, w: int = 6, h: int = 8) -> dict:
    """A gauge panel."""
    return {
        "type": "gauge",
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": refs(target),
        "fieldConfig": {
            "defaults": _defaults(unit, minimum=0, maximum=maximum, thresholds=thresholds),
            "overrides": [],
        },
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "showThresholdLabels": False,
            "showThresholdMarkers": True,
        },
        "_size": (w, h),
    }


def table(title: str, description: str, unit: str, targets: list[dict], *,
          rename: dict[str, str] | None = None, units: dict[str, str] | None = None,
          w: int = 12, h: int = 8) -> dict:
    """An instant-query table; several targets are merged on their shared labels."""
    transformations: list[dict] = []
    if len(targets) > 1:
        transformations.append({"id": "merge", "options": {}})
    transformations.append({
        "id": "organize",
        "options": {"excludeByName": {"Time": True, "__name__": True, "job": True},
                    "renameByName": rename or {}},
    })
    overrides = [
        {"matcher": {"id": "byName", "options": name},
         "properties": [{"id": "unit", "value": u}]}
        for name, u in (units or {}).items()
    ]
    return {
        "type": "table",
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": refs(*targets),
        "fieldConfig": {"defaults": _defaults(unit), "overrides": overrides},
        "options": {"showHeader": True, "cellHeight": "sm",
                    "footer": {"show": False, "reducer": ["sum"], "fields": ""}},
        "transformations": transformations,
        "_size": (w, h),
    }


def heatmap(title: str, description: str, target: dict, *, w: int = 12, h: int = 8) -> dict:
    """A heatmap of histogram buckets (with exemplars)."""
    return {
        "type": "heatmap",
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": refs(target),
        "fieldConfig": {
            "defaults": {"unit": "s", "custom": {"scaleDistribution": {"type": "linear"}}},
            "overrides": [],
        },
        "options": {
            "calculate": False,
            "cellGap": 1,
            "color": {"mode": "scheme", "scheme": "Oranges", "steps": 64, "exponent": 0.5,
                      "fill": "dark-orange", "scale": "exponential", "reverse": False},
            "exemplars": {"color": "rgba(255,0,255,0.7)"},
            "filterValues": {"le": 1e-9},
            "rowsFrame": {"layout": "auto"},
            "tooltip": {"mode": "single", "yHistogram": False},
            "yAxis": {"axisPlacement": "left", "unit": "s"},
            "legend": {"show": True},
        },
        "_size": (w, h),
    }


def state_timeline(title: str, description: str, target: dict, mappings: list[dict], *,
                   w: int = 12, h: int = 8) -> dict:
    """A state timeline for 0/1 gauges."""
    return {
        "type": "state-timeline",
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": refs(target),
        "fieldConfig": {
            "defaults": {**_defaults("none"), "mappings": mappings,
                         "color": {"mode": "thresholds"}},
            "overrides": [],
        },
        "options": {"mergeValues": True, "showValue": "never", "rowHeight": 0.9,
                    "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                    "tooltip": {"mode": "single", "sort": "none"}},
        "_size": (w, h),
    }


def row(title: str) -> dict:
    """A row header."""
    return {"type": "row", "title": title, "collapsed": False, "panels": [], "_size": (24, 1)}


def layout(panels: list[dict]) -> list[dict]:
    """Place panels left to right, wrapping at 24 columns; assign ids 1, 2, 3, ..."""
    out, x, y, row_h = [], 0, 0, 0
    for pid, p in enumerate(panels, start=1):
        w, h = p.pop("_size")
        if x + w > 24 or p["type"] == "row":
            x, y, row_h = 0, y + row_h, 0
        p = {"id": pid, "gridPos": {"h": h, "w": w, "x": x, "y": y}, **p}
        out.append(p)
        x += w
        row_h = max(row_h, h)
        if p["type"] == "row":
            x, y, row_h = 0, y + h, 0
    return out


def datasource_var() -> dict:
    return {
        "type": "datasource",
        "name": "datasource",
        "label": "Data source",
        "query": "prometheus",
        "current": {"selected": False, "text": "Prometheus", "value": "prometheus"},
        "hide": 0,
        "refresh": 1,
        "regex": "",
        "skipUrlSync": False,
    }


def query_var(name: str, label: str, query: str, *, multi: bool) -> dict:
    var = {
        "type": "query",
        "name": name,
        "label": label,
        "datasource": DS,
        "definition": query,
        "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery",
                  "qryType": 1},
        "refresh": 2,
        "sort": 1,
        "hide": 0,
        "regex": "",
        "multi": multi,
        "includeAll": multi,
        "skipUrlSync": False,
        "current": {},
        "options": [],
    }
    if multi:
        var["allValue"] = ".*"
        var["current"] = {"selected": True, "text": ["All"], "value": ["$__all"]}
    return var


def instance_var(*, multi: bool) -> dict:
    return query_var("instance", "Engine", "label_values(cuzk_build_info, instance)", multi=multi)


def proof_kind_var() -> dict:
    return query_var("proof_kind", "Proof kind",
                     'label_values(cuzk_jobs_submitted_total{instance=~"$instance"}, proof_kind)',
                     multi=True)


def dashboard(uid: str, title: str, description: str, panels: list[dict],
              variables: list[dict]) -> dict:
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": TAGS,
        "editable": True,
        "graphTooltip": 1,
        "timezone": "",
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "schemaVersion": 39,
        "version": 1,
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "weekStart": "",
        "annotations": {"list": [{
            "builtIn": 1,
            "datasource": {"type": "grafana", "uid": "-- Grafana --"},
            "enable": True,
            "hide": True,
            "iconColor": "rgba(0, 211, 255, 1)",
            "name": "Annotations & Alerts",
            "type": "dashboard",
        }]},
        "links": [{
            "type": "dashboards",
            "title": "cuzk dashboards",
            "tags": TAGS,
            "asDropdown": True,
            "includeVars": True,
            "keepTime": True,
            "icon": "external link",
            "targetBlank": False,
            "tooltip": "",
            "url": "",
        }],
        "templating": {"list": [datasource_var(), *variables]},
        "panels": layout(panels),
    }


def hq(quantile: float, metric: str, by: str, sel: str) -> str:
    """histogram_quantile over the rate of a histogram's buckets."""
    return (f"histogram_quantile({quantile}, sum by ({by}, le) "
            f"(rate({metric}_bucket{{{sel}}}[{RI}])))")


PCT_THRESH = [{"color": "red", "value": None}, {"color": "orange", "value": 0.5},
              {"color": "green", "value": 0.8}]
MEM_THRESH = [{"color": "green", "value": None}, {"color": "orange", "value": 0.8},
              {"color": "red", "value": 0.9}]


# ---------------------------------------------------------------------------------------------
# Dashboards


def fleet() -> dict:
    panels = [
        row("Fleet"),
        stat("Engines up", "cuzk targets whose last scrape succeeded (`up`).", "none",
             q(f'sum(up{{job="cuzk", {INST}}})', "engines up")),
        stat("GPU workers", "GPU workers reported by the selected engines "
             "(recording rule instance:cuzk_gpu_workers:count).", "none",
             q(f"sum(instance:cuzk_gpu_workers:count{{{INST}}})", "workers")),
        stat("GPU busy", "Mean fraction of time the GPU workers held an open GPU lease over the "
             "last 5 minutes, from the busy-seconds counter "
             "(instance:cuzk_gpu_worker_busy:ratio_rate5m).", "percentunit",
             q(f"avg(instance:cuzk_gpu_worker_busy:ratio_rate5m{{{INST}}})", "busy"),
             thresholds=PCT_THRESH, decimals=1),
        stat("Jobs queued", "Jobs waiting in the scheduler, all proof kinds and priorities "
             "(cuzk_jobs_queued).", "none",
             q(f"sum(cuzk_jobs_queued{{{INST}}})", "queued")),
        stat("Partitions in flight", "Partitions in any non-terminal phase: waiting_memory, "
             "synthesizing, queued_gpu, proving, finalizing.", "none",
             q(f"sum(instance_proof_kind:cuzk_partitions_in_flight:sum{{{INST}}})", "in flight")),
        stat("Firing alerts", "cuzk alerts firing now for the selected engines (ALERTS). "
             "0 when none.", "none",
             q(f'count(ALERTS{{service="cuzk", alertstate="firing", {INST}}}) or vector(0)',
               "firing"),
             thresholds=[{"color": "green", "value": None}, {"color": "red", "value": 1}]),
        timeseries(
            "Jobs completed per second by proof kind and status",
            "Rate of finished jobs (cuzk_jobs_completed_total) split by full proof-kind name and "
            "terminal status (succeeded, failed, cancelled).", "ops",
            [q(f"sum by (proof_kind, status) (rate(cuzk_jobs_completed_total{{{INST}}}[{RI}]))",
               "{{proof_kind}} {{status}}")]),
        timeseries(
            "GPU busy fraction by engine",
            "Mean busy fraction of each engine's GPU workers: rate of "
            "cuzk_gpu_worker_busy_seconds_total, so bursts shorter than a scrape count.",
            "percentunit",
            [q(f"avg by (instance) (rate(cuzk_gpu_worker_busy_seconds_total{{{INST}}}[{RI}]))",
               "{{instance}}")], maximum=1),
        timeseries(
            "Job latency p95 by proof kind",
            "95th percentile of end-to-end job duration (submit to last partition finalized), "
            "from cuzk_job_duration_seconds. Exemplars link to the job's trace in Jaeger.", "s",
            [q(hq(0.95, "cuzk_job_duration_seconds", "proof_kind", INST), "{{proof_kind}}",
               exemplar=True)]),
        timeseries(
            "Memory budget reserved by engine",
            "Reserved bytes over the memory budget per engine "
            "(instance:cuzk_memory_reserved:ratio). Sustained values above 90% with waiters "
            "raise CuzkMemorySaturatedWithWaiters.", "percentunit",
            [q(f"instance:cuzk_memory_reserved:ratio{{{INST}}}", "{{instance}}")], maximum=1),
        row("Engines and proof kinds"),
        table(
            "Engines",
            "One row per engine: version and compute backend (cuzk_build_info), GPU workers, "
            "5-minute busy fraction and memory budget reserved.", "none",
            [q(f"cuzk_build_info{{{INST}}}", instant=True, fmt="table"),
             q(f"instance:cuzk_gpu_workers:count{{{INST}}}", instant=True, fmt="table"),
             q(f"instance:cuzk_gpu_worker_busy:ratio_rate5m{{{INST}}}", instant=True,
               fmt="table"),
             q(f"instance:cuzk_memory_reserved:ratio{{{INST}}}", instant=True, fmt="table")],
            rename={"Value #A": "build info", "Value #B": "GPU workers",
                    "Value #C": "GPU busy (5m)", "Value #D": "memory reserved"},
            units={"GPU busy (5m)": "percentunit", "memory reserved": "percentunit"}),
        table(
            "Proof kinds",
            "One row per engine and full proof-kind name: job latency p50 and p95, "
            "completions per second and failure ratio, from the recording rules.", "none",
            [q(f"instance_proof_kind:cuzk_job_duration_seconds:p50_rate5m{{{INST}}}",
               instant=True, fmt="table"),
             q(f"instance_proof_kind:cuzk_job_duration_seconds:p95_rate5m{{{INST}}}",
               instant=True, fmt="table"),
             q(f"sum by (instance, proof_kind) "
               f"(instance_proof_kind_status:cuzk_jobs_completed:rate5m{{{INST}}})",
               instant=True, fmt="table"),
             q(f"instance_proof_kind:cuzk_jobs_failed:ratio_rate15m{{{INST}}}",
               instant=True, fmt="table")],
            rename={"Value #A": "p50", "Value #B": "p95", "Value #C": "jobs/s (5m)",
                    "Value #D": "failed (15m)", "proof_kind": "proof kind"},
            units={"p50": "s", "p95": "s", "jobs/s (5m)": "ops", "failed (15m)": "percentunit"}),
    ]
    return dashboard("cuzk-fleet", "cuzk / Fleet overview",
                     "Health of every cuzk engine at a glance: throughput, GPU use, latency, "
                     "memory, alerts.", panels, [instance_var(multi=True)])


def gpu_workers() -> dict:
    busy = "cuzk_gpu_worker_busy_seconds_total"
    panels = [
        row("Workers"),
        timeseries(
            "Busy fraction per worker",
            "Fraction of time each GPU worker held an open GPU-phase lease: rate of "
            f"{busy}. Unlike the sampled 0/1 gauge, this counts work that starts and ends "
            "between two scrapes.", "percentunit",
            [q(f"rate({busy}{{{INST}}}[{RI}])", "{{worker}} ({{device}})")], maximum=1),
        state_timeline(
            "Worker state (sampled)",
            "cuzk_gpu_worker_busy as sampled at each scrape: proving (1) or idle (0). Short "
            "jobs between scrapes do not show here; use the busy fraction for utilisation.",
            q(f"cuzk_gpu_worker_busy{{{INST}}}", "{{worker}} ({{device}})"),
            [{"type": "value", "options": {
                "0": {"text": "idle", "color": "transparent", "index": 0},
                "1": {"text": "proving", "color": "green", "index": 1}}}]),
        timeseries(
            "Partitions proven per second by worker and proof kind",
            "Rate of GPU phases completed (cuzk_gpu_worker_partitions_total) per worker and full "
            "proof-kind name.", "ops",
            [q(f"sum by (worker, proof_kind) "
               f"(rate(cuzk_gpu_worker_partitions_total{{{INST}}}[{RI}]))",
               "{{worker}} {{proof_kind}}")]),
        table(
            "Partitions proven since start",
            "GPU phases completed per worker, device and full proof-kind name since the engine "
            "started (cuzk_gpu_worker_partitions_total).", "none",
            [q(f"sum by (worker, device, proof_kind) "
               f"(cuzk_gpu_worker_partitions_total{{{INST}}})", instant=True, fmt="table")],
            rename={"Value": "partitions", "proof_kind": "proof kind"}),
        row("Queue and phases"),
        timeseries(
            "Partitions by phase",
            "Partitions in each pipeline phase (cuzk_partitions): waiting_memory, synthesizing, "
            "queued_gpu, proving, finalizing.", "short",
            [q(f"sum by (phase) (cuzk_partitions{{{INST}}})", "{{phase}}")], stack=True),
        table(
            "Partitions by proof kind and phase",
            "Current partitions per full proof-kind name and phase (cuzk_partitions).", "none",
            [q(f"sum by (proof_kind, phase) (cuzk_partitions{{{INST}}})", instant=True,
               fmt="table")],
            rename={"Value": "partitions", "proof_kind": "proof kind"}),
        timeseries(
            "GPU queue depth by proof kind",
            "Partitions synthesized and waiting for a GPU worker (phase queued_gpu). Non-zero "
            "while workers are idle raises CuzkGpuWorkersIdleWithQueuedWork.", "short",
            [q(f'sum by (proof_kind) (cuzk_partitions{{{INST}, phase="queued_gpu"}})',
               "{{proof_kind}}")]),
        timeseries(
            "Jobs queued by proof kind and priority",
            "Jobs accepted but not yet started (cuzk_jobs_queued), by full proof-kind name and "
            "priority class.", "short",
            [q(f"sum by (proof_kind, priority) (cuzk_jobs_queued{{{INST}}})",
               "{{proof_kind}} ({{priority}})")]),
        row("Devices (NVML)"),
        timeseries(
            "Device memory used",
            "GPU memory in use per device as reported by NVML (cuzk_device_memory_used_bytes). "
            "Absent on the CPU backend or without NVML.", "bytes",
            [q(f"cuzk_device_memory_used_bytes{{{INST}}}", "{{device}}")]),
        timeseries(
            "Device utilization",
            "GPU utilization per device as reported by NVML (cuzk_device_utilization_ratio). "
            "Absent on the CPU backend or without NVML.", "percentunit",
            [q(f"cuzk_device_utilization_ratio{{{INST}}}", "{{device}}")], maximum=1),
    ]
    return dashboard("cuzk-gpu-workers", "cuzk / GPU workers",
                     "Per-worker GPU use, partitions by phase and the GPU queue of one engine.",
                     panels, [instance_var(multi=False)])


def pipeline() -> dict:
    job = "cuzk_job_duration_seconds"
    phase = "cuzk_partition_phase_duration_seconds"
    sel = f'{INST}, proof_kind=~"$proof_kind"'
    panels = [
        row("Jobs"),
        timeseries(
            "Job duration p50 / p95 / p99 by proof kind",
            "End-to-end job duration quantiles (cuzk_job_duration_seconds) per full proof-kind "
            "name. Exemplar dots carry the job's trace_id and open the trace in Jaeger.", "s",
            [q(hq(0.5, job, "proof_kind", sel), "p50 {{proof_kind}}", exemplar=True),
             q(hq(0.95, job, "proof_kind", sel), "p95 {{proof_kind}}", exemplar=True),
             q(hq(0.99, job, "proof_kind", sel), "p99 {{proof_kind}}", exemplar=True)]),
        heatmap(
            "Job duration distribution",
            "Histogram of job durations over time (cuzk_job_duration_seconds buckets) for the "
            "selected proof kinds, with trace exemplars.",
            q(f"sum by (le) (rate({job}_bucket{{{sel}}}[{RI}]))", "{{le}}", exemplar=True,
              fmt="heatmap")),
        timeseries(
            "Jobs submitted and succeeded per second",
            "Submissions (cuzk_jobs_submitted_total) against successful completions "
            "(cuzk_jobs_completed_total{status=\"succeeded\"}) per full proof-kind name.", "ops",
            [q(f"sum by (proof_kind) (rate(cuzk_jobs_submitted_total{{{sel}}}[{RI}]))",
               "submitted {{proof_kind}}"),
             q(f'sum by (proof_kind) (rate(cuzk_jobs_completed_total{{{sel}, '
               f'status="succeeded"}}[{RI}]))', "succeeded {{proof_kind}}")]),
        timeseries(
            "Job failure ratio (15m)",
            "Share of finished jobs that failed over 15 minutes, cancellations excluded "
            "(instance_proof_kind:cuzk_jobs_failed:ratio_rate15m). Above 10% with 3+ failures "
            "raises CuzkJobFailureRateHigh.", "percentunit",
            [q(f"instance_proof_kind:cuzk_jobs_failed:ratio_rate15m{{{sel}}}",
               "{{proof_kind}} ({{instance}})")], maximum=1),
        row("Partition phases"),
        timeseries(
            "Phase duration p95 by proof kind and phase",
            "95th percentile of each partition phase (cuzk_partition_phase_duration_seconds): "
            "memory wait, synthesis, GPU, finalize. Exemplars link to the partition's trace.",
            "s",
            [q(hq(0.95, phase, "proof_kind, phase", sel), "{{proof_kind}} {{phase}}",
               exemplar=True)]),
        timeseries(
            "Mean phase duration",
            "Mean time a partition spends in each phase: rate of the histogram's sum over its "
            "count.", "s",
            [q(f"sum by (phase) (rate({phase}_sum{{{sel}}}[{RI}])) / "
               f"sum by (phase) (rate({phase}_count{{{sel}}}[{RI}]))", "{{phase}}")]),
        heatmap(
            "Partition phase duration distribution",
            "Histogram of partition phase durations for all phases of the selected proof "
            "kinds, with trace exemplars.",
            q(f"sum by (le) (rate({phase}_bucket{{{sel}}}[{RI}]))", "{{le}}", exemplar=True,
              fmt="heatmap")),
        timeseries(
            "Memory acquire wait p95 by consumer",
            "95th percentile time a reservation waited for the memory budget "
            "(cuzk_memory_acquire_wait_seconds). Growth here means memory, not the GPU, "
            "limits throughput.", "s",
            [q(hq(0.95, "cuzk_memory_acquire_wait_seconds", "consumer", INST), "{{consumer}}")]),
        table(
            "Latency by proof kind",
            "Job latency p50 and p95 over 5 minutes per engine and full proof-kind name "
            "(recording rules).", "s",
            [q(f"instance_proof_kind:cuzk_job_duration_seconds:p50_rate5m{{{sel}}}",
               instant=True, fmt="table"),
             q(f"instance_proof_kind:cuzk_job_duration_seconds:p95_rate5m{{{sel}}}",
               instant=True, fmt="table")],
            rename={"Value #A": "p50", "Value #B": "p95", "proof_kind": "proof kind"},
            units={"p50": "s", "p95": "s"}, w=24),
    ]
    return dashboard("cuzk-pipeline", "cuzk / Pipeline latency",
                     "Where time goes: job and partition-phase latency with trace exemplars.",
                     panels, [instance_var(multi=False), proof_kind_var()])


def memory() -> dict:
    panels = [
        row("Budget"),
        timeseries(
            "Reserved by consumer against the budget",
            "Bytes reserved from the unified memory budget per consumer "
            "(cuzk_memory_reserved_bytes, stacked) and the budget itself "
            "(cuzk_memory_budget_bytes, dashed line).", "bytes",
            [q(f"sum by (consumer) (cuzk_memory_reserved_bytes{{{INST}}})", "{{consumer}}"),
             q(f"sum(cuzk_memory_budget_bytes{{{INST}}})", "budget")],
            stack=True,
            overrides=[{"matcher": {"id": "byName", "options": "budget"}, "properties": [
                {"id": "custom.stacking", "value": {"mode": "none", "group": "A"}},
                {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
                {"id": "custom.fillOpacity", "value": 0},
                {"id": "color", "value": {"mode": "fixed", "fixedColor": "red"}}]}],
            w=18),
        gauge("Budget reserved",
              "Reserved bytes over the budget (instance:cuzk_memory_reserved:ratio).",
              "percentunit", q(f"instance:cuzk_memory_reserved:ratio{{{INST}}}", "reserved"),
              thresholds=MEM_THRESH),
        timeseries(
            "Memory waiters",
            "Reservations blocked waiting for budget (cuzk_memory_waiters). Non-zero with the "
            "budget above 90% for 10 minutes raises CuzkMemorySaturatedWithWaiters.", "short",
            [q(f"sum(cuzk_memory_waiters{{{INST}}})", "waiters")]),
        timeseries(
            "Acquire wait p95 by consumer",
            "95th percentile time a reservation waited (cuzk_memory_acquire_wait_seconds).", "s",
            [q(hq(0.95, "cuzk_memory_acquire_wait_seconds", "consumer", INST),
               "{{consumer}}")]),
        row("Evictions and resident keys"),
        timeseries(
            "Evictions per second",
            "Proving keys evicted to make room (cuzk_memory_evictions_total).", "ops",
            [q(f"sum(rate(cuzk_memory_evictions_total{{{INST}}}[{RI}]))", "evictions")]),
        timeseries(
            "Evicted bytes per second",
            "Bytes freed by evicting idle proving keys (cuzk_memory_evicted_bytes_total).",
            "Bps",
            [q(f"sum(rate(cuzk_memory_evicted_bytes_total{{{INST}}}[{RI}]))", "evicted")]),
        timeseries(
            "Resident proving keys",
            "Bytes of proving keys held resident per full proof-kind name and location "
            "(host or device) (cuzk_proving_key_resident_bytes).", "bytes",
            [q(f"sum by (proof_kind, location) "
               f"(cuzk_proving_key_resident_bytes{{{INST}}})", "{{proof_kind}} ({{location}})")],
            stack=True),
        table(
            "Resident keys",
            "Proving keys resident now, per full proof-kind name and location.", "bytes",
            [q(f"sum by (proof_kind, location) "
               f"(cuzk_proving_key_resident_bytes{{{INST}}})", instant=True, fmt="table")],
            rename={"Value": "bytes", "proof_kind": "proof kind"}),
        row("Devices"),
        timeseries(
            "Device memory budget",
            "Bytes reserved from each GPU's own budget per consumer (resident proving keys, "
            "GPU-phase working sets; cuzk_device_memory_reserved_bytes) against that "
            "budget (cuzk_device_memory_budget_bytes). Absent on the CPU backend.", "bytes",
            [q(f"sum by (device, consumer) (cuzk_device_memory_reserved_bytes{{{INST}}})",
               "{{device}} {{consumer}}"),
             q(f"sum by (device) (cuzk_device_memory_budget_bytes{{{INST}}})",
               "{{device}} budget")],
            w=12),
        timeseries(
            "Device memory used",
            "GPU memory in use per device as reported by NVML (cuzk_device_memory_used_bytes). "
            "Absent on the CPU backend or without NVML.", "bytes",
            [q(f"cuzk_device_memory_used_bytes{{{INST}}}", "{{device}}")], w=12),
    ]
    return dashboard("cuzk-memory", "cuzk / Memory",
                     "The unified memory budget: reservations by consumer, waiters, evictions "
                     "and resident proving keys.", panels, [instance_var(multi=False)])


DASHBOARDS = {
    "cuzk-fleet.json": fleet,
    "cuzk-gpu-workers.json": gpu_workers,
    "cuzk-pipeline.json": pipeline,
    "cuzk-memory.json": memory,
}


def render() -> dict[str, str]:
    """File name -> JSON text for every dashboard."""
    return {name: json.dumps(build(), indent=2, sort_keys=True) + "\n"
            for name, build in DASHBOARDS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="fail if the committed JSON differs from what this script makes")
    args = parser.parse_args(argv)
    stale = []
    for name, text in render().items():
        path = OUT_DIR / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            OUT_DIR.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print("stale dashboards (run deploy/grafana/build_dashboards.py): " + ", ".join(stale),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
