#!/usr/bin/env python3
"""Generate the cuzk Grafana dashboards; this file is their single source of truth.

    python deploy/grafana/build_dashboards.py          # rewrite deploy/grafana/dashboards/*.json
    python deploy/grafana/build_dashboards.py --check  # exit 1 if the committed JSON is stale

Standard library only. Every Prometheus panel has a unit and a description, reads the
provisioned Prometheus through ``$datasource``, and filters every selector on ``$job`` and
``$instance`` (both multi-select, "All" = ``.+``). Rates use ``$__rate_interval``; counters
shown as totals use ``increase(...[$__range])``; one series per panel carries exemplars.
Latency panels count succeeded jobs only. Proof kinds are shown in full (``{{proof_kind}}``).
Firing cuzk alerts are annotations on every engine dashboard. The runbook dashboard serves the
runbook sections of docs/operations.md, which the alerts' ``runbook_url`` open.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT_DIR = HERE / "dashboards"
OPERATIONS_DOC = HERE.parents[1] / "docs" / "operations.md"
DS = {"type": "prometheus", "uid": "${datasource}"}
JAEGER = {"type": "jaeger", "uid": "jaeger"}
SEL = 'job=~"$job", instance=~"$instance"'
TAGS = ["cuzk"]
RI = "$__rate_interval"
RANGE = "$__range"
SCHEMA_VERSION = 41  # Grafana 12.1, the version docker-compose.yml deploys
RUNBOOK_UID = "cuzk-runbook"
ALL = ".+"
UTIL = "cuzk_device_utilization_ratio"
# CuzkGpuStarvedByHost's thresholds (deploy/prometheus/build_rules.py), for panel descriptions.
STARVED_BUSY = 0.8
STARVED_DEVICE = 0.5


# ---------------------------------------------------------------------------------------------
# Building blocks


def q(expr: str, legend: str = "", *, instant: bool = False, exemplar: bool = False,
      fmt: str = "time_series") -> dict:
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
        "refId": "A",
    }


def refs(*targets: dict) -> list[dict]:
    """Give targets distinct refIds A, B, C, ..."""
    return [{**t, "refId": chr(ord("A") + i)} for i, t in enumerate(targets)]


def _defaults(unit: str, *, minimum=None, maximum=None, decimals=None, thresholds=None,
              links=None) -> dict:
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
    if links:
        d["links"] = links
    return d


def _panel(kind: str, title: str, description: str, targets: list[dict], defaults: dict,
           options: dict, size: tuple[int, int], *, overrides=None, datasource=DS,
           **extra) -> dict:
    """What every query panel has: type, title, description, data source, targets, field
    config, options and its size on the grid (``_size``, laid out by ``dashboard``)."""
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": datasource,
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
        "options": options,
        "_size": size,
        **extra,
    }


def timeseries(title: str, description: str, unit: str, targets: list[dict], *,
               stack: bool = False, minimum=0, maximum=None, overrides=None, links=None,
               w: int = 12, h: int = 8) -> dict:
    """A time series panel."""
    defaults = _defaults(unit, minimum=minimum, maximum=maximum, links=links)
    defaults["custom"] = {
        "drawStyle": "line",
        "lineWidth": 1,
        "fillOpacity": 20 if stack else 0,
        "showPoints": "never",
        "spanNulls": False,
        "stacking": {"mode": "normal" if stack else "none", "group": "A"},
    }
    options = {
        "legend": {"displayMode": "table", "placement": "bottom", "showLegend": True,
                   "calcs": ["lastNotNull", "max"]},
        "tooltip": {"mode": "multi", "sort": "desc"},
    }
    return _panel("timeseries", title, description, refs(*targets), defaults, options, (w, h),
                  overrides=overrides)


def stat(title: str, description: str, unit: str, target: dict | list[dict], *,
         thresholds=None, decimals=None, w: int = 4, h: int = 4) -> dict:
    """A stat panel: one value per target (several are shown side by side)."""
    options = {
        "colorMode": "value",
        "graphMode": "area",
        "justifyMode": "auto",
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        "textMode": "auto",
    }
    targets = target if isinstance(target, list) else [target]
    return _panel("stat", title, description, refs(*targets),
                  _defaults(unit, thresholds=thresholds, decimals=decimals), options, (w, h))


def table(title: str, description: str, unit: str, targets: list[dict], *,
          rename: dict[str, str] | None = None, units: dict[str, str] | None = None,
          links=None, w: int = 12, h: int = 8) -> dict:
    """An instant-query table; several targets are merged on their shared labels."""
    transformations: list[dict] = []
    if len(targets) > 1:
        transformations.append({"id": "merge", "options": {}})
    transformations.append({
        "id": "organize",
        "options": {"excludeByName": {"Time": True, "__name__": True},
                    "renameByName": rename or {}},
    })
    overrides = [
        {"matcher": {"id": "byName", "options": name},
         "properties": [{"id": "unit", "value": u}]}
        for name, u in (units or {}).items()
    ]
    options = {"showHeader": True, "cellHeight": "sm",
               "footer": {"show": False, "reducer": ["sum"], "fields": ""}}
    return _panel("table", title, description, refs(*targets), _defaults(unit, links=links),
                  options, (w, h), overrides=overrides, transformations=transformations)


def heatmap(title: str, description: str, histogram: str, selector: str, *, w: int = 12,
            h: int = 8) -> dict:
    """A heatmap of a histogram's bucket rates under ``selector`` (with exemplars)."""
    target = q(f"sum by (le) (rate({histogram}_bucket{{{selector}}}[{RI}]))", "{{le}}",
               exemplar=True, fmt="heatmap")
    options = {
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
    }
    return _panel("heatmap", title, description, refs(target),
                  {"unit": "s", "custom": {"scaleDistribution": {"type": "linear"}}}, options,
                  (w, h))


def status_history(title: str, description: str, target: dict, *, links=None,
                   w: int = 24, h: int = 22) -> dict:
    """One row per series, one coloured cell per time step: readable for 64 workers."""
    steps = [{"color": "red", "value": None}, {"color": "orange", "value": 0.05},
             {"color": "green", "value": 0.5}]
    defaults = {**_defaults("percentunit", minimum=0, maximum=1, thresholds=steps, links=links),
                "color": {"mode": "thresholds"}}
    options = {"showValue": "never", "rowHeight": 0.85, "colWidth": 0.95,
               "legend": {"displayMode": "list", "placement": "bottom", "showLegend": False},
               "tooltip": {"mode": "single", "sort": "none"}}
    return _panel("status-history", title, description, refs(target), defaults, options,
                  (w, h), maxDataPoints=60)


def traces(title: str, description: str, operation: str, *, w: int = 24, h: int = 9) -> dict:
    """Recent traces from Jaeger: a search for one operation slower than $slow."""
    search = {"datasource": JAEGER, "queryType": "search", "service": "cuzk",
              "operation": operation, "minDuration": "$slow", "limit": 20, "refId": "A"}
    options = {"showHeader": True, "cellHeight": "sm",
               "sortBy": [{"displayName": "Duration", "desc": True}]}
    return _panel("table", title, description, [search], {"unit": "ms"}, options, (w, h),
                  datasource=JAEGER)


def text(title: str, content: str, *, w: int = 24, h: int = 10) -> dict:
    return {"type": "text", "title": title, "description": f"Runbook for {title}.",
            "options": {"mode": "markdown", "content": content}, "_size": (w, h)}


def row(title: str) -> dict:
    """A row header."""
    return {"type": "row", "title": title, "collapsed": False, "panels": [], "_size": (24, 1)}


def trace_link(title: str, operation: str, tag: str, label: str) -> dict:
    """A data link that opens Grafana Explore on Jaeger, searching spans tagged with a label."""
    pane = {"a": {"datasource": "jaeger", "queries": [{
        "refId": "A", "datasource": JAEGER, "queryType": "search", "service": "cuzk",
        "operation": operation, "tags": f"{tag}=${{__field.labels.{label}}}"}],
        "range": {"from": "${__from}", "to": "${__to}"}}}
    return {"title": title, "targetBlank": True,
            "url": "/explore?schemaVersion=1&panes="
                   + json.dumps(pane, separators=(",", ":"), sort_keys=True)}


JOB_TRACES = [trace_link("Traces of ${__field.labels.proof_kind} jobs", "cuzk.job",
                         "cuzk.proof_kind", "proof_kind")]
WORKER_TRACES = [trace_link("GPU spans of ${__field.labels.worker}", "cuzk.gpu",
                            "cuzk.worker.id", "worker")]


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


def query_var(name: str, label: str, query: str, all_value: str | None = ALL) -> dict:
    """A multi-select query variable. ``all_value`` is what "All" stands for: the regex .+
    (never the empty match), or None for the values the query lists, which Grafana joins into
    one regex; engine dashboards use that so "All" cannot reach beyond the engines."""
    return {
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
        "multi": True,
        "includeAll": True,
        "allValue": all_value,
        "skipUrlSync": False,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "options": [],
    }


def engine_vars(metric: str = "cuzk_build_info") -> list[dict]:
    """Job and instance of the targets that export ``metric``: cuzk engines only. "All" is the
    list itself, not .+, which would take in every scrape job (Prometheus, Alertmanager, the
    collector) wherever a panel reads a series they export too: up, process_*."""
    return [query_var("job", "Job", f"label_values({metric}, job)", all_value=None),
            query_var("instance", "Instance",
                      f'label_values({metric}{{job=~"$job"}}, instance)', all_value=None)]


def proof_kind_var() -> dict:
    return query_var("proof_kind", "Proof kind",
                     f"label_values(cuzk_jobs_submitted_total{{{SEL}}}, proof_kind)")


def slow_var() -> dict:
    options = ["1s", "5s", "10s", "30s", "1m", "5m"]
    return {
        "type": "custom", "name": "slow", "label": "Slow job (traces)",
        "query": ",".join(options), "multi": False, "includeAll": False, "hide": 0,
        "skipUrlSync": False,
        "current": {"selected": True, "text": "5s", "value": "5s"},
        "options": [{"selected": o == "5s", "text": o, "value": o} for o in options],
    }


def alert_annotation() -> dict:
    return {
        "datasource": DS,
        "enable": True,
        "hide": False,
        "iconColor": "red",
        "name": "Firing cuzk alerts",
        "expr": f'ALERTS{{alertstate="firing", service="cuzk", {SEL}}}',
        "step": "30s",
        "titleFormat": "{{alertname}}",
        "textFormat": "{{severity}} on {{instance}}",
        "useValueForTime": False,
    }


def dashboard(uid: str, title: str, description: str, panels: list[dict],
              variables: list[dict], *, alerts: bool = True) -> dict:
    annotations = [{
        "builtIn": 1,
        "datasource": {"type": "grafana", "uid": "-- Grafana --"},
        "enable": True,
        "hide": True,
        "iconColor": "rgba(0, 211, 255, 1)",
        "name": "Annotations & Alerts",
        "type": "dashboard",
    }]
    if alerts:
        annotations.append(alert_annotation())
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": TAGS,
        "editable": False,
        "graphTooltip": 1,
        "timezone": "",
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "weekStart": "",
        "annotations": {"list": annotations},
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
        "templating": {"list": [datasource_var(), *variables]} if variables else {"list": []},
        "panels": layout(panels),
    }


def hq(quantile: float, metric: str, by: str, sel: str) -> str:
    """histogram_quantile over the rate of a histogram's buckets."""
    return (f"histogram_quantile({quantile}, sum by ({by}, le) "
            f"(rate({metric}_bucket{{{sel}}}[{RI}])))")


def outcomes(*parts: tuple[str, str]) -> str:
    """Several counters in one query, each labelled outcome="<name>" (one legend, one panel)."""
    return "\nor\n".join(f'label_replace({expr}, "outcome", "{name}", "", "")'
                         for name, expr in parts)


PCT_THRESH = [{"color": "red", "value": None}, {"color": "orange", "value": 0.5},
              {"color": "green", "value": 0.8}]
MEM_THRESH = [{"color": "green", "value": None}, {"color": "orange", "value": 0.8},
              {"color": "red", "value": 0.9}]
OK_SUCCEEDED = 'status="succeeded"'


# ---------------------------------------------------------------------------------------------
# Dashboards


def fleet() -> dict:
    busy = "cuzk_gpu_worker_busy_seconds_total"
    panels = [
        row("Fleet"),
        stat("Engines up", "cuzk targets whose last scrape succeeded (`up`).", "none",
             q(f"sum(up{{{SEL}}})", "engines up")),
        stat("GPU workers", "GPU workers reported by the selected engines "
             "(recording rule instance:cuzk_gpu_workers:count).", "none",
             q(f"sum(instance:cuzk_gpu_workers:count{{{SEL}}})", "workers")),
        stat("GPU busy: lease, device",
             "lease: mean fraction of time the GPU workers held an open GPU lease over the "
             "last 5 minutes, from the busy-seconds counter "
             "(instance:cuzk_gpu_worker_busy:ratio_rate5m). device: mean fraction of the same "
             "5 minutes the devices ran kernels, as NVML reports it "
             f"({UTIL}); absent without NVML. A lease share far above the device "
             "share means the GPU phase spends its time on the host (uploads, host steps): "
             "the engine is host-bound and the GPU starves (CuzkGpuStarvedByHost).",
             "percentunit",
             [q(f"avg(instance:cuzk_gpu_worker_busy:ratio_rate5m{{{SEL}}})", "lease"),
              q(f"avg(avg_over_time({UTIL}{{{SEL}}}[5m]))", "device")],
             thresholds=PCT_THRESH, decimals=1),
        stat("Jobs queued", "Jobs waiting in the scheduler, all proof kinds and priorities "
             "(instance:cuzk_jobs_queued:sum).", "none",
             q(f"sum(instance:cuzk_jobs_queued:sum{{{SEL}}})", "queued")),
        stat("Jobs completed", "Jobs that finished in the selected time range, any outcome: "
             "increase of cuzk_jobs_completed_total over the range.", "none",
             q(f"sum(increase(cuzk_jobs_completed_total{{{SEL}}}[{RANGE}]))", "completed")),
        stat("Engine restarts", "Engine restarts in the selected range: changes of "
             "process_start_time_seconds where exported, else resets of the busy-seconds "
             "counters.", "none",
             q(f"sum(changes(process_start_time_seconds{{{SEL}}}[{RANGE}])) or "
               f"sum(max by (job, instance) (resets({busy}{{{SEL}}}[{RANGE}])))", "restarts"),
             thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}]),
        timeseries(
            "Jobs completed per second by proof kind and status",
            "Rate of finished jobs (cuzk_jobs_completed_total) split by full proof-kind name and "
            "terminal status (succeeded, failed, cancelled).", "ops",
            [q(f"sum by (proof_kind, status) (rate(cuzk_jobs_completed_total{{{SEL}}}[{RI}]))",
               "{{proof_kind}} {{status}}")], links=JOB_TRACES),
        timeseries(
            "GPU busy fraction by engine",
            "lease: mean busy fraction of each engine's GPU workers, the rate of "
            "cuzk_gpu_worker_busy_seconds_total, so bursts shorter than a scrape count. "
            f"device: mean NVML utilisation of its devices ({UTIL}), the share of time "
            "kernels ran; absent without NVML. Lease far above device: host-bound.",
            "percentunit",
            [q(f"avg by (instance) (rate({busy}{{{SEL}}}[{RI}]))", "lease {{instance}}"),
             q(f"avg by (instance) (avg_over_time({UTIL}{{{SEL}}}[{RI}]))",
               "device {{instance}}")],
            maximum=1),
        timeseries(
            "Job latency p95 by proof kind (succeeded)",
            "95th percentile of end-to-end duration of succeeded jobs (submit to last partition "
            "finalized), from cuzk_job_duration_seconds. Exemplars link to the job's trace.",
            "s",
            [q(hq(0.95, "cuzk_job_duration_seconds", "proof_kind", f"{SEL}, {OK_SUCCEEDED}"),
               "{{proof_kind}}", exemplar=True)], links=JOB_TRACES),
        timeseries(
            "Process memory against the budget",
            "Resident set size of each engine process (process_resident_memory_bytes) against "
            "its memory budget (cuzk_memory_budget_bytes) and what is reserved from it. RSS "
            "above the budget means memory the budget does not account for.", "bytes",
            [q(f"process_resident_memory_bytes{{{SEL}}}", "RSS {{instance}}"),
             q(f"cuzk_memory_budget_bytes{{{SEL}}}", "budget {{instance}}"),
             q(f"instance:cuzk_memory_reserved_bytes:sum{{{SEL}}}", "reserved {{instance}}")]),
        row("Engines and proof kinds"),
        table(
            "Engines",
            "One row per engine: version and compute backend (cuzk_build_info), GPU workers, "
            "5-minute busy fraction (lease held) beside the devices' 5-minute NVML "
            "utilisation (kernels running; empty without NVML), memory budget reserved and "
            "restarts in the last hour.",
            "none",
            [q(f"cuzk_build_info{{{SEL}}}", instant=True, fmt="table"),
             q(f"instance:cuzk_gpu_workers:count{{{SEL}}}", instant=True, fmt="table"),
             q(f"instance:cuzk_gpu_worker_busy:ratio_rate5m{{{SEL}}}", instant=True,
               fmt="table"),
             q(f"instance:cuzk_memory_reserved:ratio{{{SEL}}}", instant=True, fmt="table"),
             q(f"instance:cuzk_engine_restarts:changes1h{{{SEL}}}", instant=True,
               fmt="table"),
             q(f"avg by (job, instance) (avg_over_time({UTIL}{{{SEL}}}[5m]))", instant=True,
               fmt="table")],
            rename={"Value #A": "build info", "Value #B": "GPU workers",
                    "Value #C": "GPU busy (5m)", "Value #D": "memory reserved",
                    "Value #E": "restarts (1h)", "Value #F": "device util (5m)"},
            units={"GPU busy (5m)": "percentunit", "memory reserved": "percentunit",
                   "device util (5m)": "percentunit"}),
        table(
            "Proof kinds",
            "One row per engine and full proof-kind name: latency p50 and p95 of succeeded "
            "jobs, completions per second and failure ratio, from the recording rules.", "none",
            [q(f"instance_proof_kind:cuzk_job_duration_seconds:p50_rate5m{{{SEL}}}",
               instant=True, fmt="table"),
             q(f"instance_proof_kind:cuzk_job_duration_seconds:p95_rate5m{{{SEL}}}",
               instant=True, fmt="table"),
             q(f"sum by (job, instance, proof_kind) "
               f"(instance_proof_kind_status:cuzk_jobs_completed:rate5m{{{SEL}}})",
               instant=True, fmt="table"),
             q(f"instance_proof_kind:cuzk_jobs_failed:ratio_rate15m{{{SEL}}}",
               instant=True, fmt="table")],
            rename={"Value #A": "p50", "Value #B": "p95", "Value #C": "jobs/s (5m)",
                    "Value #D": "failed (15m)", "proof_kind": "proof kind"},
            units={"p50": "s", "p95": "s", "jobs/s (5m)": "ops", "failed (15m)": "percentunit"},
            links=JOB_TRACES),
    ]
    return dashboard("cuzk-fleet", "cuzk / Fleet overview",
                     "Health of every cuzk engine at a glance: throughput, GPU use, latency, "
                     "memory, restarts, alerts.", panels, engine_vars())


def gpu_workers() -> dict:
    busy = "cuzk_gpu_worker_busy_seconds_total"
    panels = [
        row("Workers"),
        status_history(
            "Worker busy fraction (history)",
            "One row per GPU worker (instance, worker), one cell per time step, coloured by "
            "the share of the step the worker held a GPU lease (rate of "
            f"{busy}): red under 5% (idle), orange under 50%, green above. Work shorter than a "
            "scrape still counts. Stays readable for 64 workers; click a row for its GPU "
            "spans in Jaeger.",
            q(f"rate({busy}{{{SEL}}}[{RI}])", "{{instance}} {{worker}}"),
            links=WORKER_TRACES),
        timeseries(
            "Lease busy against device utilization",
            "Per device, two lines: lease, the mean share of time its GPU workers held a GPU "
            f"lease (rate of {busy}); device, the share of time the device ran kernels as "
            f"NVML reports it ({UTIL}, averaged over the same window; absent without NVML). "
            "A lease share high above the device share is time the GPU phase spends on the "
            "host (uploads, host steps, waits): the engine is host-bound and the GPU starves. "
            f"Lease above {STARVED_BUSY:.0%} with device under {STARVED_DEVICE:.0%} for 10 "
            "minutes, with work queued, raises CuzkGpuStarvedByHost.",
            "percentunit",
            [q(f"avg by (instance, device) (rate({busy}{{{SEL}}}[{RI}]))",
               "lease {{instance}} {{device}}"),
             q(f"avg_over_time({UTIL}{{{SEL}}}[{RI}])", "device {{instance}} {{device}}")],
            maximum=1, w=24),
        table(
            "Least busy workers (5m)",
            "The ten workers with the lowest busy fraction over 5 minutes "
            "(instance_worker:cuzk_gpu_worker_busy:ratio_rate5m): where an idle or wedged "
            "worker shows first in a large fleet.", "percentunit",
            [q(f"bottomk(10, instance_worker:cuzk_gpu_worker_busy:ratio_rate5m{{{SEL}}})",
               instant=True, fmt="table")],
            rename={"Value": "busy (5m)"}, links=WORKER_TRACES, w=8),
        timeseries(
            "Longest open GPU leases",
            "Age of the ten oldest open GPU leases (cuzk_gpu_worker_lease_age_seconds, 0 when "
            "idle) against each open lease's stuck threshold, its own proof kind's "
            "(instance_worker:cuzk_gpu_lease_stuck_threshold:seconds), that "
            "CuzkGpuWorkerStuck uses.", "s",
            [q(f"topk(10, cuzk_gpu_worker_lease_age_seconds{{{SEL}}})",
               "{{instance}} {{worker}}"),
             q(f"instance_worker:cuzk_gpu_lease_stuck_threshold:seconds{{{SEL}}}",
               "stuck threshold {{instance}} {{worker}} {{proof_kind}}")],
            links=WORKER_TRACES, w=8),
        timeseries(
            "Paused GPU workers",
            "Workers paused by an operator (cuzk_gpu_workers_paused, POST /v1/workers/pause). "
            "While paused, CuzkGpuWorkerIdleWithQueuedWork is suppressed for that device and "
            "CuzkGpuWorkersPausedWithQueuedWork warns after 15 minutes.", "short",
            [q(f"sum by (instance, device) (cuzk_gpu_workers_paused{{{SEL}}})",
               "{{instance}} {{device}}")], w=8),
        timeseries(
            "Partitions proven per second by proof kind",
            "Rate of GPU phases completed (cuzk_gpu_worker_partitions_total) per full "
            "proof-kind name, all selected workers.", "ops",
            [q(f"sum by (proof_kind) "
               f"(rate(cuzk_gpu_worker_partitions_total{{{SEL}}}[{RI}]))",
               "{{proof_kind}}")], links=JOB_TRACES),
        table(
            "Partitions proven in range",
            "GPU phases completed per worker, device and full proof-kind name in the selected "
            "time range (increase of cuzk_gpu_worker_partitions_total).", "none",
            [q(f"sum by (instance, worker, device, proof_kind) "
               f"(increase(cuzk_gpu_worker_partitions_total{{{SEL}}}[{RANGE}]))",
               instant=True, fmt="table")],
            rename={"Value": "partitions", "proof_kind": "proof kind"}, links=WORKER_TRACES),
        row("Queue and phases"),
        timeseries(
            "Partitions by phase",
            "Partitions in each pipeline phase (instance_phase:cuzk_partitions:sum): "
            "queued_synthesis, waiting_memory, loading_key, synthesizing, queued_gpu, proving, "
            "finalizing.",
            "short",
            [q(f"sum by (phase) (instance_phase:cuzk_partitions:sum{{{SEL}}})", "{{phase}}")],
            stack=True),
        timeseries(
            "GPU queue depth by proof kind",
            "Partitions synthesized and waiting for a GPU worker (phase queued_gpu). A worker "
            "idle while this holds work for half of 5 minutes raises "
            "CuzkGpuWorkerIdleWithQueuedWork.", "short",
            [q(f'sum by (proof_kind) (cuzk_partitions{{{SEL}, phase="queued_gpu"}})',
               "{{proof_kind}}")]),
        timeseries(
            "Jobs queued by proof kind and priority",
            "Jobs accepted but not yet started (cuzk_jobs_queued), by full proof-kind name and "
            "priority class.", "short",
            [q(f"sum by (proof_kind, priority) (cuzk_jobs_queued{{{SEL}}})",
               "{{proof_kind}} ({{priority}})")]),
        row("Devices (NVML)"),
        timeseries(
            "Device memory used",
            "GPU memory in use per device as reported by NVML (cuzk_device_memory_used_bytes). "
            "Absent on the CPU backend or without NVML.", "bytes",
            [q(f"cuzk_device_memory_used_bytes{{{SEL}}}", "{{instance}} {{device}}")]),
        timeseries(
            "Device utilization",
            "GPU utilization per device as reported by NVML (cuzk_device_utilization_ratio). "
            "Absent on the CPU backend or without NVML.", "percentunit",
            [q(f"cuzk_device_utilization_ratio{{{SEL}}}", "{{instance}} {{device}}")],
            maximum=1),
        *cluster_node_panels(),
    ]
    return dashboard("cuzk-gpu-workers", "cuzk / GPU workers",
                     "Per-worker GPU use, stuck and paused workers, partitions by phase and the "
                     "GPU queue.", panels, engine_vars())


CLUSTER_SEL = 'job=~"$job", role=~"gpu|cpu"'
"""A Ray cluster's worker actors (docs/cluster.md): targets from the head's file_sd file, labelled
node, role and worker. They are not engines (no cuzk_build_info), so no Instance filter: the
Job variable selects the cluster."""
CLUSTER_GPU = 'job=~"$job", role="gpu"'
CLUSTER_CPU = 'job=~"$job", role="cpu"'


def cluster_node_panels() -> list[dict]:
    """The "Cluster nodes" row: every node of a cluster, from its worker actors' own
    endpoints (busy state lives where the work runs; the head never reports it). Empty
    without a cluster."""
    busy = "cuzk_gpu_worker_busy_seconds_total"
    return [
        row("Cluster nodes"),
        table(
            "Cluster nodes",
            "One row per node of a Ray cluster (`cuzk serve --cluster`): worker actors "
            "answering their scrape (a dead or unreachable actor leaves the head's file_sd "
            "file, so it is not counted, never counted idle), GPU workers inside a lease now "
            "(cuzk_gpu_worker_busy) and their mean busy fraction (rate of "
            f"{busy}), all read from the actors' own endpoints.", "none",
            [q(f"count by (node) (up{{{CLUSTER_GPU}}} == 1)", instant=True, fmt="table"),
             q(f"count by (node) (up{{{CLUSTER_CPU}}} == 1)", instant=True, fmt="table"),
             q(f"sum by (node) (cuzk_gpu_worker_busy{{{CLUSTER_GPU}}})", instant=True,
               fmt="table"),
             q(f"avg by (node) (rate({busy}{{{CLUSTER_GPU}}}[{RI}]))", instant=True,
               fmt="table")],
            rename={"Value #A": "GPU workers up", "Value #B": "CPU workers up",
                    "Value #C": "GPU workers proving", "Value #D": "GPU busy"},
            units={"GPU busy": "percentunit"}, w=24),
        timeseries(
            "GPU busy fraction by node and worker",
            "Each GPU worker actor's share of time inside a lease (rate of "
            f"{busy} from its own endpoint). A line that ends is an actor that died or left "
            "with its node (CuzkClusterGpuWorkerLost); a line near 0 while the head's GPU "
            "queue holds work raises CuzkClusterGpuWorkerIdleWithQueuedWork.", "percentunit",
            [q(f"max by (node, worker) (rate({busy}{{{CLUSTER_GPU}}}[{RI}]))",
               "{{node}} {{worker}}")], maximum=1, links=WORKER_TRACES),
        timeseries(
            "Worker actors answering by node",
            "Worker actor targets per node and role whose last scrape succeeded (`up`). A "
            "node whose count drops lost actors (Ray restarts GPU workers; the head replaces "
            "CPU workers); a node that vanishes left the cluster.", "short",
            [q(f"sum by (node, role) (up{{{CLUSTER_SEL}}})", "{{node}} {{role}}")]),
    ]


def deadline_panels(sel: str) -> list[dict]:
    """Deadlines (issue 18): the least slack by priority and the misses by proof kind."""
    return [
        row("Deadlines"),
        timeseries(
            "Least slack by priority, and deadline misses by proof kind",
            "Least slack (deadline minus predicted finish) among unfinished jobs with a "
            "deadline, per priority (cuzk_queue_min_slack_seconds: no line while none is "
            "queued; below 0 raises CuzkDeadlineAtRisk), and the rate of deadline misses per "
            "full proof-kind name (cuzk_job_deadline_missed_total, right axis).",
            "s",
            [q(f"min by (priority) (cuzk_queue_min_slack_seconds{{{SEL}}})",
               "slack {{priority}}"),
             q(f"sum by (proof_kind) (rate(cuzk_job_deadline_missed_total{{{sel}}}"
               f"[{RI}]))", "missed {{proof_kind}} /s")],
            minimum=None,
            overrides=[{"matcher": {"id": "byRegexp", "options": "missed .*"},
                        "properties": [{"id": "custom.axisPlacement", "value": "right"},
                                       {"id": "unit", "value": "short"}]}]),
        timeseries(
            "GPU backlog by priority",
            "Predicted GPU-seconds of queued and running work (cuzk_backlog_gpu_seconds), "
            "the autoscaling signal, against the time to the nearest deadline.", "s",
            [q(f"sum by (priority) (cuzk_backlog_gpu_seconds{{{SEL}}})", "{{priority}}"),
             q(f"min(cuzk_queue_next_deadline_seconds{{{SEL}}})", "nearest deadline")]),
    ]


def pipeline() -> dict:
    job = "cuzk_job_duration_seconds"
    phase = "cuzk_partition_phase_duration_seconds"
    sel = f'{SEL}, proof_kind=~"$proof_kind"'
    ok = f"{sel}, {OK_SUCCEEDED}"
    panels = [
        row("Jobs"),
        timeseries(
            "Job duration p50 / p95 / p99 by proof kind (succeeded)",
            "End-to-end duration quantiles of succeeded jobs (cuzk_job_duration_seconds, "
            "status=\"succeeded\") per full proof-kind name. Exemplar dots (on p95) carry the "
            "job's trace_id and open the trace in Jaeger.", "s",
            [q(hq(0.5, job, "proof_kind", ok), "p50 {{proof_kind}}"),
             q(hq(0.95, job, "proof_kind", ok), "p95 {{proof_kind}}", exemplar=True),
             q(hq(0.99, job, "proof_kind", ok), "p99 {{proof_kind}}")], links=JOB_TRACES),
        heatmap(
            "Job duration distribution (succeeded)",
            "Histogram of succeeded jobs' durations over time (cuzk_job_duration_seconds "
            "buckets) for the selected proof kinds, with trace exemplars.", job, ok),
        timeseries(
            "Jobs submitted and finished per second",
            "Submissions (cuzk_jobs_submitted_total) against finished jobs by outcome "
            "(cuzk_jobs_completed_total) per full proof-kind name.", "ops",
            [q(f"sum by (proof_kind) (rate(cuzk_jobs_submitted_total{{{sel}}}[{RI}]))",
               "submitted {{proof_kind}}"),
             q(f"sum by (proof_kind, status) (rate(cuzk_jobs_completed_total{{{sel}}}[{RI}]))",
               "{{status}} {{proof_kind}}")], links=JOB_TRACES),
        timeseries(
            "Job failure ratio (15m)",
            "Share of finished jobs that failed over 15 minutes, cancellations excluded "
            "(instance_proof_kind:cuzk_jobs_failed:ratio_rate15m). Above 10% with 3+ failures "
            "raises CuzkJobFailureRateHigh.", "percentunit",
            [q(f"instance_proof_kind:cuzk_jobs_failed:ratio_rate15m{{{sel}}}",
               "{{proof_kind}} ({{instance}})")], maximum=1, links=JOB_TRACES),
        row("Latency objective (winning-post, window-post)"),
        timeseries(
            "Succeeded jobs within the latency bound (1h)",
            "Share of succeeded winning-post (bound 10 s) and window-post (bound 120 s) jobs "
            "that finished within their bound over the last hour: 1 minus "
            "instance_proof_kind:cuzk_job_latency_slo_errors:ratio_rate1h. The objective is "
            "99%; the burn-rate alerts fire when the shortfall eats the 30-day budget 6x or "
            "14.4x too fast.", "percentunit",
            [q(f"1 - instance_proof_kind:cuzk_job_latency_slo_errors:ratio_rate1h{{{sel}}}",
               "{{proof_kind}} ({{instance}})")], maximum=1, links=JOB_TRACES),
        timeseries(
            "Latency budget burn rate",
            "Error-budget burn rate per window: the share of slow succeeded jobs over the 1% "
            "the objective allows (1 = spending the 30-day budget exactly in 30 days). The "
            "fast alert needs 14.4 on 1h and 5m, the slow one 6 on 6h and 30m.", "none",
            [q(f"instance_proof_kind:cuzk_job_latency_slo_errors:ratio_rate1h{{{sel}}} / 0.01",
               "1h {{proof_kind}} ({{instance}})"),
             q(f"instance_proof_kind:cuzk_job_latency_slo_errors:ratio_rate6h{{{sel}}} / 0.01",
               "6h {{proof_kind}} ({{instance}})")]),
        row("Partition phases"),
        timeseries(
            "Phase duration p95 by proof kind and phase",
            "95th percentile of each partition phase (cuzk_partition_phase_duration_seconds): "
            "memory wait, synthesis queue, synthesis, GPU queue, GPU, finalize. Exemplars link "
            "to the partition's trace.", "s",
            [q(hq(0.95, phase, "proof_kind, phase", sel), "{{proof_kind}} {{phase}}",
               exemplar=True)], links=JOB_TRACES),
        timeseries(
            "Mean phase duration",
            "Mean time a partition spends in each phase: rate of the histogram's sum over its "
            "count.", "s",
            [q(f"sum by (phase) (rate({phase}_sum{{{sel}}}[{RI}])) / "
               f"sum by (phase) (rate({phase}_count{{{sel}}}[{RI}]))", "{{phase}}")]),
        heatmap(
            "Partition phase duration distribution",
            "Histogram of partition phase durations for all phases of the selected proof "
            "kinds, with trace exemplars.", phase, sel),
        timeseries(
            "Backlog and drain time",
            "Jobs queued (instance:cuzk_jobs_queued:sum) and the seconds they would take to "
            "drain at the last 15 minutes' pace (instance:cuzk_jobs_backlog_drain:seconds; "
            "above 1 hour raises CuzkBacklogSlowToDrain).", "short",
            [q(f"instance:cuzk_jobs_queued:sum{{{SEL}}}", "queued {{instance}}"),
             q(f"instance:cuzk_jobs_backlog_drain:seconds{{{SEL}}}",
               "drain seconds {{instance}}")],
            overrides=[{"matcher": {"id": "byRegexp", "options": "drain.*"},
                        "properties": [{"id": "unit", "value": "s"},
                                       {"id": "custom.axisPlacement", "value": "right"}]}]),
        timeseries(
            "Jobs recovered after a restart",
            "Journaled jobs the engine resumed or settled when it started, by outcome "
            "(increase of cuzk_jobs_recovered_total over the range).", "none",
            [q(f"sum by (proof_kind, outcome) "
               f"(increase(cuzk_jobs_recovered_total{{{sel}}}[{RANGE}]))",
               "{{proof_kind}} {{outcome}}")]),
        timeseries(
            "Journal write p99",
            "99th percentile time to write an accepted job to the journal "
            "(cuzk_journal_write_seconds): every submit waits for it.", "s",
            [q(hq(0.99, "cuzk_journal_write_seconds", "instance", SEL), "{{instance}}")]),
        *deadline_panels(sel),
        row("Traces"),
        traces("Recent slow jobs",
               "The slowest recent cuzk.job traces in Jaeger, longer than the 'Slow job' "
               "variable. Click a trace id to open it.", "cuzk.job"),
    ]
    return dashboard("cuzk-pipeline", "cuzk / Pipeline latency",
                     "Where time goes: job and partition-phase latency of succeeded jobs with "
                     "trace exemplars, the latency objective, backlog, and slow traces.",
                     panels, [*engine_vars(), proof_kind_var(), slow_var()])


def memory() -> dict:
    panels = [
        row("Budget"),
        timeseries(
            "Reserved by consumer against the budget",
            "Bytes reserved from the unified memory budget per consumer "
            "(cuzk_memory_reserved_bytes, stacked) and the budget itself "
            "(cuzk_memory_budget_bytes, dashed line).", "bytes",
            [q(f"sum by (consumer) (cuzk_memory_reserved_bytes{{{SEL}}})", "{{consumer}}"),
             q(f"sum(cuzk_memory_budget_bytes{{{SEL}}})", "budget")],
            stack=True,
            overrides=[{"matcher": {"id": "byName", "options": "budget"}, "properties": [
                {"id": "custom.stacking", "value": {"mode": "none", "group": "A"}},
                {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
                {"id": "custom.fillOpacity", "value": 0},
                {"id": "color", "value": {"mode": "fixed", "fixedColor": "red"}}]}],
            w=18),
        stat("Budget reserved",
             "Reserved bytes over the budget (instance:cuzk_memory_reserved:ratio), the "
             "largest of the selected engines.", "percentunit",
             q(f"max(instance:cuzk_memory_reserved:ratio{{{SEL}}})", "reserved"),
             thresholds=MEM_THRESH, w=6, h=8),
        timeseries(
            "Reservations waiting for memory against GPU busy",
            "Reservations waiting for memory on average over 10 minutes (wait seconds per "
            "second, instance:cuzk_memory_waiting:avg_rate10m, from the rate of "
            "cuzk_memory_acquire_wait_seconds) beside the GPU workers' busy share over the same "
            "window (instance:cuzk_gpu_worker_busy:ratio_rate10m). Half a waiter or more while "
            "workers are busy under 80%, for 10 minutes, raises CuzkMemoryPressure: memory, "
            "not the GPUs, bounds throughput.", "none",
            [q(f"instance:cuzk_memory_waiting:avg_rate10m{{{SEL}}}", "waiting {{instance}}"),
             q(f"instance:cuzk_gpu_worker_busy:ratio_rate10m{{{SEL}}}",
               "GPU busy {{instance}}")]),
        timeseries(
            "Acquire wait p95 and waiters",
            "95th percentile time a reservation waited (cuzk_memory_acquire_wait_seconds) and "
            "the reservations waiting at each scrape (cuzk_memory_waiters).", "s",
            [q(hq(0.95, "cuzk_memory_acquire_wait_seconds", "consumer", SEL),
               "p95 {{consumer}}"),
             q(f"sum(cuzk_memory_waiters{{{SEL}}})", "waiters")],
            overrides=[{"matcher": {"id": "byName", "options": "waiters"},
                        "properties": [{"id": "unit", "value": "short"},
                                       {"id": "custom.axisPlacement", "value": "right"}]}]),
        row("Evictions and resident keys"),
        timeseries(
            "Evictions",
            "Proving keys evicted to make room per second (cuzk_memory_evictions_total) and "
            "bytes freed per second (cuzk_memory_evicted_bytes_total). More than 6 in 15 "
            "minutes raises CuzkProvingKeyEvictionThrash.", "ops",
            [q(f"sum(rate(cuzk_memory_evictions_total{{{SEL}}}[{RI}]))", "evictions"),
             q(f"sum(rate(cuzk_memory_evicted_bytes_total{{{SEL}}}[{RI}]))", "bytes")],
            overrides=[{"matcher": {"id": "byName", "options": "bytes"},
                        "properties": [{"id": "unit", "value": "Bps"},
                                       {"id": "custom.axisPlacement", "value": "right"}]}]),
        stat("Evictions in range",
             "Proving keys evicted in the selected range (increase of "
             "cuzk_memory_evictions_total).", "none",
             q(f"sum(increase(cuzk_memory_evictions_total{{{SEL}}}[{RANGE}]))", "evictions"),
             w=4, h=8),
        timeseries(
            "Resident proving keys",
            "Bytes of proving keys held resident per full proof-kind name and location "
            "(host or device) (cuzk_proving_key_resident_bytes).", "bytes",
            [q(f"sum by (proof_kind, location) "
               f"(cuzk_proving_key_resident_bytes{{{SEL}}})", "{{proof_kind}} ({{location}})")],
            stack=True, w=8),
        row("Devices"),
        timeseries(
            "Device memory budget",
            "Bytes reserved from each GPU's own budget per consumer (resident proving keys, "
            "GPU-phase working sets; cuzk_device_memory_reserved_bytes) against that "
            "budget (cuzk_device_memory_budget_bytes). Absent on the CPU backend.", "bytes",
            [q(f"sum by (device, consumer) (cuzk_device_memory_reserved_bytes{{{SEL}}})",
               "{{device}} {{consumer}}"),
             q(f"sum by (device) (cuzk_device_memory_budget_bytes{{{SEL}}})",
               "{{device}} budget")]),
        timeseries(
            "Device memory used against the budget",
            "GPU memory in use per device as reported by NVML, all processes, over cuzk's "
            "budget for that device (instance_device:cuzk_device_memory_used:ratio); above "
            "100% for 10 minutes raises CuzkDeviceMemorySaturated. Absent on the CPU backend "
            "or without NVML.", "percentunit",
            [q(f"instance_device:cuzk_device_memory_used:ratio{{{SEL}}}",
               "{{instance}} {{device}}")]),
    ]
    return dashboard("cuzk-memory", "cuzk / Memory",
                     "The unified memory budget: reservations by consumer, time spent waiting, "
                     "evictions, resident proving keys and device memory.", panels,
                     engine_vars())


def monitoring() -> dict:
    panels = [
        row("Targets"),
        table(
            "Scrape targets",
            "Every target of the selected jobs and whether its last scrape worked (`up`): the "
            "engines, Prometheus, Alertmanager and the OpenTelemetry Collector.", "none",
            [q(f"up{{{SEL}}}", instant=True, fmt="table")],
            rename={"Value": "up"}, w=8),
        timeseries(
            "Targets up by job",
            "Targets answering scrapes per job (sum of `up`).", "short",
            [q(f"sum by (job) (up{{{SEL}}})", "{{job}}")], w=16),
        row("Rules and notifications"),
        timeseries(
            "Rule evaluations",
            "Rule group evaluations and failed evaluations in the range (increase of "
            "prometheus_rule_evaluations_total and prometheus_rule_evaluation_failures_total). "
            "Any failure raises CuzkRuleEvaluationFailures.", "none",
            [q(outcomes(
                ("evaluated", f"sum by (job, instance) "
                              f"(increase(prometheus_rule_evaluations_total{{{SEL}}}[{RANGE}]))"),
                ("failed", f"sum by (job, instance) (increase("
                           f"prometheus_rule_evaluation_failures_total{{{SEL}}}[{RANGE}]))")),
               "{{outcome}} {{instance}}")]),
        timeseries(
            "Notifications from Prometheus to Alertmanager",
            "Alert notifications Prometheus sent, failed to send and dropped in the range "
            "(prometheus_notifications_*_total), and the Alertmanagers it knows.", "none",
            [q(outcomes(
                ("sent", f"sum by (job, instance) "
                         f"(increase(prometheus_notifications_sent_total{{{SEL}}}[{RANGE}]))"),
                ("failed", f"sum by (job, instance) "
                           f"(increase(prometheus_notifications_errors_total{{{SEL}}}"
                           f"[{RANGE}]))"),
                ("dropped", f"sum by (job, instance) "
                            f"(increase(prometheus_notifications_dropped_total{{{SEL}}}"
                            f"[{RANGE}]))")),
               "{{outcome}} {{instance}}"),
             q(f"prometheus_notifications_alertmanagers_discovered{{{SEL}}}",
               "alertmanagers {{instance}}")]),
        timeseries(
            "Alertmanager: alerts received and notifications",
            "Alerts Alertmanager received and notifications it sent or failed to send per "
            "integration in the range (alertmanager_alerts_received_total, "
            "alertmanager_notifications_total, alertmanager_notifications_failed_total). The "
            "shipped null receiver sends nothing.", "none",
            [q(outcomes(
                ("received", f"sum by (job, instance) "
                             f"(increase(alertmanager_alerts_received_total{{{SEL}}}"
                             f"[{RANGE}]))"),
                ("notified", f"sum by (job, instance) "
                             f"(increase(alertmanager_notifications_total{{{SEL}}}[{RANGE}]))"),
                ("failed", f"sum by (job, instance) "
                           f"(increase(alertmanager_notifications_failed_total{{{SEL}}}"
                           f"[{RANGE}]))")),
               "{{outcome}} {{instance}}")]),
        row("OpenTelemetry Collector"),
        timeseries(
            "Spans through the collector",
            "Spans the collector accepted, exported, refused, dropped or failed to export per "
            "second (otelcol_* own metrics, scraped on :8888). Losses raise "
            "CuzkCollectorDroppingSpans.", "ops",
            [q(f'sum by (__name__) (rate({{__name__=~"otelcol_(receiver_accepted|'
               f'exporter_sent|receiver_refused|processor_refused|processor_dropped|'
               f'exporter_send_failed|exporter_enqueue_failed)_spans(_total)?", {SEL}}}'
               f"[{RI}]))", "{{__name__}}")]),
        timeseries(
            "Collector export queue",
            "Spans waiting in the collector's export queue against its capacity "
            "(otelcol_exporter_queue_size, otelcol_exporter_queue_capacity): a full queue "
            "drops spans.", "short",
            [q(f"otelcol_exporter_queue_size{{{SEL}}}", "size {{exporter}}"),
             q(f"otelcol_exporter_queue_capacity{{{SEL}}}", "capacity {{exporter}}")]),
    ]
    return dashboard("cuzk-monitoring", "cuzk / Monitoring stack",
                     "Is the monitoring itself working: targets, rule evaluation, alert "
                     "delivery, span delivery.", panels,
                     [query_var("job", "Job", "label_values(up, job)"),
                      query_var("instance", "Instance",
                                'label_values(up{job=~"$job"}, instance)')])


# ---------------------------------------------------------------------------------------------
# Runbook: the alert sections of docs/operations.md, one text panel each


def runbook_sections(doc: str | None = None) -> dict[str, str]:
    """Alert name -> markdown of its '#### Name' section under '### Runbooks'."""
    doc = OPERATIONS_DOC.read_text() if doc is None else doc
    start = doc.index("\n### Runbooks")
    end_match = re.search(r"^## ", doc[start + 1:], flags=re.M)
    body = doc[start:start + 1 + end_match.start()] if end_match else doc[start:]
    parts = re.split(r"^#### (\w+)\s*$", body, flags=re.M)
    return {name: content.strip() + "\n" for name, content in
            zip(parts[1::2], parts[2::2], strict=True)}


def runbook() -> dict:
    panels = [text(name, content, h=max(6, 2 + content.count("\n")))
              for name, content in runbook_sections().items()]
    return dashboard(RUNBOOK_UID, "cuzk / Runbook",
                     "What to do for each cuzk alert (docs/operations.md). Alerts link here "
                     "through runbook_url.", panels, [], alerts=False)


def runbook_panel_ids() -> dict[str, int]:
    """Alert name -> id of its panel on the runbook dashboard (what runbook_url opens)."""
    return {p["title"]: p["id"] for p in runbook()["panels"]}


DASHBOARDS = {
    "cuzk-fleet.json": fleet,
    "cuzk-gpu-workers.json": gpu_workers,
    "cuzk-pipeline.json": pipeline,
    "cuzk-memory.json": memory,
    "cuzk-monitoring.json": monitoring,
    "cuzk-runbook.json": runbook,
}


def render() -> dict[str, str]:
    """File name -> JSON text for every dashboard."""
    return {name: json.dumps(build(), indent=2, sort_keys=True) + "\n"
            for name, build in DASHBOARDS.items()}


def write_or_check(files: dict[str, str], out_dir: Path, *, check: bool) -> list[str]:
    """Write generated files (name -> text) into ``out_dir``; with ``check``, write nothing and
    return the names whose committed copy is missing or differs. Shared with build_rules.py."""
    stale = []
    for name, content in files.items():
        path = out_dir / name
        if check:
            if not path.exists() or path.read_text() != content:
                stale.append(name)
        else:
            out_dir.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
    return stale


def generator_main(argv: list[str] | None, *, doc: str, what: str, script: str,
                   out_dir: Path, render_files, add_options=None) -> int:
    """The command line both generators share: write the files, or with --check exit 1 when
    the committed ones are stale. ``render_files(args)`` makes name -> text."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help=f"fail if the committed {what} differ from what this script makes")
    if add_options is not None:
        add_options(parser)
    args = parser.parse_args(argv)
    stale = write_or_check(render_files(args), out_dir, check=args.check)
    if stale:
        print(f"stale {what} (run {script}): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    return generator_main(argv, doc=__doc__, what="dashboards",
                          script="deploy/grafana/build_dashboards.py", out_dir=OUT_DIR,
                          render_files=lambda _args: render())


if __name__ == "__main__":
    sys.exit(main())
