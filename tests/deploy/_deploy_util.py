"""Shared helpers for the deployment tests: paths, tool lookup, PromQL and dashboard walking."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import yaml

from tests._tools import require_tool as _require_tool

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
PROM_DIR = DEPLOY / "prometheus"
RULES_DIR = PROM_DIR / "rules"
PROM_TESTS_DIR = PROM_DIR / "tests"
DASH_DIR = DEPLOY / "grafana" / "dashboards"
PROVISIONING = DEPLOY / "grafana" / "provisioning"
OPERATIONS_DOC = ROOT / "docs" / "operations.md"

# Series that Prometheus itself makes; dashboards may query them next to the engine's.
PROMETHEUS_SERIES = {"up", "ALERTS", "ALERTS_FOR_STATE"}
# Device metrics that exist only where NVML is present (docs/design.md section 5).
NVML_METRICS = {"cuzk_device_memory_used_bytes", "cuzk_device_utilization_ratio"}
# Per-device budget metrics: exposed only where a GPU backend keeps device budgets.
DEVICE_BUDGET_METRICS = {"cuzk_device_memory_budget_bytes", "cuzk_device_memory_reserved_bytes"}
DEVICE_ONLY_METRICS = NVML_METRICS | DEVICE_BUDGET_METRICS
# The monitoring stack's own metrics (Prometheus, Alertmanager, OpenTelemetry Collector).
STACK_METRIC_PREFIXES = ("prometheus_", "alertmanager_", "otelcol_")
# Engine metrics the rules and dashboards use that this engine does not export yet, with why.
# The e2e test skips their queries by name while they are absent and checks them once they are.
PENDING_ENGINE_METRICS: dict[str, str] = {}


def require_tool(name: str) -> str:
    """Path of a Prometheus tool; skip without it, but fail under CI=true."""
    return _require_tool(name, hint="Debian packages prometheus, prometheus-alertmanager")


def load_yaml(path: Path) -> object:
    return yaml.safe_load(path.read_text())


def rule_groups() -> list[dict]:
    groups: list[dict] = []
    for path in sorted(RULES_DIR.glob("*.yml")):
        groups.extend(load_yaml(path)["groups"])
    return groups


def alert_rules() -> list[dict]:
    return [r for g in rule_groups() for r in g["rules"] if "alert" in r]


def recording_rules() -> list[dict]:
    return [r for g in rule_groups() for r in g["rules"] if "record" in r]


def dashboards() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted(DASH_DIR.glob("*.json"))}


def panels(dash: dict) -> Iterator[dict]:
    """Every panel, including those nested in collapsed rows."""
    for p in dash.get("panels", []):
        yield p
        yield from p.get("panels", [])


def panel_queries(dash: dict) -> Iterator[tuple[dict, dict]]:
    """(panel, target) for every query target of every panel."""
    for p in panels(dash):
        for t in p.get("targets", []):
            yield p, t


_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "bool", "offset", "inf", "nan",
}


def promql_metrics(expr: str) -> set[str]:
    """Metric names selected by a PromQL expression (a lexical scan, good for our queries)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    s = re.sub(r"\{[^}]*\}", " ", s)  # label matchers
    s = re.sub(r"\[[^\]]*\]", " ", s)  # range and subquery windows
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    names = set()
    for m in re.finditer(r"(?<![\w:.$])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", s):
        name, call = m.group(1), m.group(2)
        if call or name.lower() in _KEYWORDS:
            continue
        names.add(name)
    return names


def exposition_names(text: str) -> set[str]:
    """Series names a Prometheus text exposition declares or carries.

    A labelled histogram has no samples before its first observation, so the declared
    families count too, with the suffixes their type implies.
    """
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
                "summary": ("_sum", "_count", "")}
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split()[:4]
            base = family.removesuffix("_total") if kind == "counter" else family
            names.update(base + s for s in suffixes.get(kind, ("",)))
        elif line and not line.startswith("#"):
            names.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    return names


def nvml_metric_names() -> set[str]:
    """Metric names the engine's NVML collector declares (read from its source)."""
    src = (ROOT / "cuzk" / "telemetry" / "nvml.py").read_text()
    return set(re.findall(r'"(cuzk_device_[a-z_]+)"', src))


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
