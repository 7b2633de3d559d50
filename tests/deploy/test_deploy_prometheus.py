"""Prometheus config, alerting and recording rules: promtool checks plus structural rules."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.deploy._deploy_util import (
    DEPLOY,
    OPERATIONS_DOC,
    PROM_DIR,
    PROM_TESTS_DIR,
    RULES_DIR,
    alert_rules,
    load_yaml,
    recording_rules,
    require_tool,
)


def _run(cmd: list[str], cwd=PROM_DIR) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.integration
def test_promtool_check_config():
    promtool = require_tool("promtool")
    r = _run([promtool, "check", "config", "prometheus.yml"])
    assert r.returncode == 0, r.stdout + r.stderr
    # The config loads both rule files (their paths are relative to prometheus.yml).
    assert "2 rule files found" in r.stdout + r.stderr


@pytest.mark.integration
def test_promtool_check_rules():
    promtool = require_tool("promtool")
    files = sorted(str(p.relative_to(PROM_DIR)) for p in RULES_DIR.glob("*.yml"))
    r = _run([promtool, "check", "rules", *files])
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.integration
def test_promtool_unit_tests():
    promtool = require_tool("promtool")
    files = sorted(str(p.relative_to(PROM_DIR)) for p in PROM_TESTS_DIR.glob("*.test.yml"))
    assert files
    r = _run([promtool, "test", "rules", *files])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FAILED" not in r.stdout


def test_alerts_have_for_severity_and_annotations():
    alerts = alert_rules()
    names = {a["alert"] for a in alerts}
    assert {
        "CuzkGpuWorkersIdleWithQueuedWork", "CuzkJobsStuck", "CuzkMemorySaturatedWithWaiters",
        "CuzkTargetDown", "CuzkTargetAbsent", "CuzkMetricsMissing", "CuzkJobFailureRateHigh",
    } <= names
    for a in alerts:
        assert re.fullmatch(r"\d+[smh]", a.get("for", "")), a["alert"]
        assert a["labels"]["severity"] in {"critical", "warning"}, a["alert"]
        for key in ("summary", "description", "runbook_url"):
            assert a["annotations"].get(key), (a["alert"], key)


def test_every_alert_has_a_runbook_section():
    doc = OPERATIONS_DOC.read_text()
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", doc, flags=re.M)
    }
    for a in alert_rules():
        url = a["annotations"]["runbook_url"]
        assert url.startswith("docs/operations.md#"), url
        assert url.split("#", 1)[1] in anchors, f"no runbook heading for {a['alert']}"


def test_every_alert_has_firing_and_quiet_unit_tests():
    """Each alert is expected to fire in some promtool case and to stay quiet in another."""
    fires: set[str] = set()
    quiet: set[str] = set()
    for path in PROM_TESTS_DIR.glob("*.test.yml"):
        for case in load_yaml(path)["tests"]:
            for check in case.get("alert_rule_test", []):
                (fires if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {a["alert"] for a in alert_rules()}
    assert names <= fires, f"never shown firing: {names - fires}"
    assert names <= quiet, f"never shown quiet: {names - quiet}"


def test_every_recording_rule_is_unit_tested():
    tested = set()
    for path in PROM_TESTS_DIR.glob("*.test.yml"):
        for case in load_yaml(path)["tests"]:
            for check in case.get("promql_expr_test", []):
                tested.add(check["expr"])
    records = {r["record"] for r in recording_rules()}
    assert records <= tested, f"untested recording rules: {records - tested}"


def test_scrape_config_targets():
    cfg = load_yaml(PROM_DIR / "prometheus.yml")
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert {"cuzk", "prometheus", "alertmanager"} <= set(jobs)
    assert jobs["cuzk"].get("metrics_path", "/metrics") == "/metrics"
    am = cfg["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert am == jobs["alertmanager"]["static_configs"][0]["targets"]
    # The alert rules select job="cuzk": the scrape job must carry that name.
    assert all('job="cuzk"' in a["expr"] for a in alert_rules() if "cuzk_" in a["expr"])


def test_alertmanager_config():
    cfg = load_yaml(DEPLOY / "alertmanager" / "alertmanager.yml")
    receivers = {r["name"] for r in cfg["receivers"]}
    assert cfg["route"]["receiver"] in receivers
    for sub in cfg["route"].get("routes", []):
        assert sub["receiver"] in receivers


def test_alertmanager_config_passes_amtool():
    amtool = require_tool("amtool")  # Debian package prometheus-alertmanager; .ci/run installs it
    path = DEPLOY / "alertmanager" / "alertmanager.yml"
    r = subprocess.run(
        [amtool, "check-config", str(path)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stdout + r.stderr
