"""Prometheus config, alerting and recording rules: promtool checks plus structural rules."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.deploy._deploy_util import (
    DEPLOY,
    OPERATIONS_DOC,
    PROM_DIR,
    PROM_TESTS_DIR,
    RULES_DIR,
    alert_rules,
    dashboards,
    free_port,
    load_yaml,
    recording_rules,
    require_tool,
    rule_groups,
)


def _run(cmd: list[str], cwd=PROM_DIR) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)


def _rules_generator():
    spec = importlib.util.spec_from_file_location("build_rules", PROM_DIR / "build_rules.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["build_rules"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _test_cases() -> list[dict]:
    return [case for path in sorted(PROM_TESTS_DIR.glob("*.test.yml"))
            for case in load_yaml(path)["tests"]]


def test_committed_rules_match_generator():
    for name, text in _rules_generator().render().items():
        assert (RULES_DIR / name).read_text() == text, (
            f"{name} is stale: run python deploy/prometheus/build_rules.py")


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
    assert len(files) >= 8
    r = _run([promtool, "test", "rules", *files])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FAILED" not in r.stdout + r.stderr


def test_unit_tests_fix_the_group_evaluation_order():
    """promtool evaluates the groups of one timestamp in random order unless told: boundary
    cases would flip between runs. Recording groups go first."""
    groups = [g["name"] for g in rule_groups()]
    recording = [g["name"] for g in rule_groups() if any("record" in r for r in g["rules"])]
    for path in PROM_TESTS_DIR.glob("*.test.yml"):
        order = load_yaml(path).get("group_eval_order")
        assert order and sorted(order) == sorted(groups), path.name
        assert order[:len(recording)] == recording, path.name


def test_alerts_have_for_severity_links_and_annotations():
    alerts = alert_rules()
    names = {a["alert"] for a in alerts}
    assert {
        "CuzkGpuWorkerIdleWithQueuedWork", "CuzkGpuWorkersPausedWithQueuedWork",
        "CuzkGpuWorkerStuck", "CuzkJobsStuck", "CuzkMemoryPressure",
        "CuzkProvingKeyEvictionThrash", "CuzkTargetDown", "CuzkTargetVanished",
        "CuzkTargetAbsent", "CuzkMetricsMissing", "CuzkJobFailureRateHigh",
        "CuzkBacklogGrowing", "CuzkBacklogSlowToDrain", "CuzkLatencySLOBurnFast",
        "CuzkLatencySLOBurnSlow", "CuzkDeviceMemorySaturated", "CuzkDeviceLost",
        "CuzkEngineRestarting", "CuzkMonitoringTargetDown", "CuzkRuleEvaluationFailures",
        "CuzkAlertNotificationsFailing", "CuzkCollectorDroppingSpans",
    } <= names
    for a in alerts:
        assert re.fullmatch(r"\d+[smh]", a.get("for", "")), a["alert"]
        assert a["labels"]["severity"] in {"critical", "warning"}, a["alert"]
        assert a["labels"]["service"] == "cuzk", a["alert"]
        for key in ("summary", "description", "runbook_url", "dashboard_url"):
            assert a["annotations"].get(key), (a["alert"], key)


def test_links_are_absolute_and_share_one_base():
    """runbook_url and dashboard_url start with ONE base (the Grafana root URL), open the
    runbook panel named after the alert and a dashboard that exists."""
    gen = _rules_generator()
    base = gen.DEFAULT_GRAFANA_URL
    assert re.fullmatch(r"https?://[^/]+", base)
    dash = {d["uid"]: d for d in dashboards().values()}
    runbook = {p["id"]: p["title"] for p in dash["cuzk-runbook"]["panels"]}
    for a in alert_rules():
        ann = a["annotations"]
        m = re.fullmatch(re.escape(base) + r"/d/cuzk-runbook/cuzk-runbook\?viewPanel=panel-(\d+)",
                         ann["runbook_url"])
        assert m, ann["runbook_url"]
        assert runbook[int(m.group(1))] == a["alert"], a["alert"]
        m = re.fullmatch(re.escape(base) + r"/d/([\w-]+)/[\w-]+\?var-job=\{\{ \$labels\.job \}\}"
                         r"&var-instance=\{\{ \$labels\.instance \}\}", ann["dashboard_url"])
        assert m and m.group(1) in dash, ann["dashboard_url"]
    # Another base changes every link and nothing else.
    other = gen.render("https://grafana.example.com")
    for name, text in gen.render().items():
        assert other[name] == text.replace(base, "https://grafana.example.com")


def test_every_alert_has_a_runbook_section():
    doc = OPERATIONS_DOC.read_text()
    sections = set(re.findall(r"^#### (\w+)\s*$", doc, flags=re.M))
    assert {a["alert"] for a in alert_rules()} <= sections


def test_every_alert_fires_stays_quiet_and_has_a_boundary_case():
    """Each alert fires in some promtool case, stays quiet in another, and has a case named
    'boundary ...' that checks it near its threshold (value, count or time)."""
    fires, quiet, boundary = set(), set(), set()
    for case in _test_cases():
        checked = set()
        for check in case.get("alert_rule_test", []):
            (fires if check.get("exp_alerts") else quiet).add(check["alertname"])
            checked.add(check["alertname"])
        for check in case.get("promql_expr_test", []):
            checked |= set(re.findall(r'alertname="(\w+)"', check["expr"]))
        if case["name"].startswith("boundary"):
            boundary |= checked
    names = {a["alert"] for a in alert_rules()}
    assert names <= fires, f"never shown firing: {names - fires}"
    assert names <= quiet, f"never shown quiet: {names - quiet}"
    assert names <= boundary, f"no boundary case: {names - boundary}"


def test_every_recording_rule_is_unit_tested():
    tested = {check["expr"] for case in _test_cases()
              for check in case.get("promql_expr_test", [])}
    tested_names = {n for e in tested for n in re.findall(r"[a-z_]+:[a-z0-9_:]+", e)}
    records = {r["record"] for r in recording_rules()}
    assert records <= tested_names, f"untested recording rules: {records - tested_names}"


def _norm(expr: str) -> str:
    return re.sub(r"\s+", " ", expr).strip()


def test_alerts_read_recording_rules_instead_of_retyping_them():
    records = [(r["record"], _norm(r["expr"])) for r in recording_rules()]
    for a in alert_rules():
        expr = _norm(a["expr"])
        for name, rec in records:
            assert rec not in expr, f"{a['alert']} re-types {name}: use the recording rule"


# Prometheus 3 features Debian's 2.42 lacks (or that 3 removed): the rules and dashboards stay
# off them so that what the tests evaluate here is what the compose file's v3 evaluates.
_VERSION_SPECIFIC = ("limitk", "limit_ratio", "info(", "sort_by_label", "holt_winters",
                     "double_exponential_smoothing", "histogram_count", "histogram_sum",
                     "histogram_avg", "histogram_fraction", "histogram_stddev",
                     "histogram_stdvar", "ts_of_", "@ start()", "@ end()")


def test_rules_and_dashboards_use_only_promql_both_versions_support():
    exprs = [r["expr"] for r in recording_rules() + alert_rules()]
    exprs += [t["expr"] for d in dashboards().values() for p in d["panels"]
              for t in p.get("targets", []) if "expr" in t]
    for expr in exprs:
        for token in _VERSION_SPECIFIC:
            assert token not in expr, (token, expr)
        # Prometheus 3 writes le="10" where 2.x kept the exposition's le="10.0": match both.
        for op, value in re.findall(r'\ble\s*(=~|=)\s*"([^"]*)"', expr):
            if value == "+Inf":
                continue
            assert op == "=~", expr
            pattern = value.replace("\\\\", "\\")
            number = re.match(r"\d+", pattern).group(0)
            assert re.fullmatch(pattern, number) and re.fullmatch(pattern, number + ".0"), expr
    assert "--enable-feature=exemplar-storage" in load_yaml(
        DEPLOY.parent / "docker-compose.yml")["services"]["prometheus"]["command"]


def test_scrape_config_targets():
    cfg = load_yaml(PROM_DIR / "prometheus.yml")
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert {"cuzk", "prometheus", "alertmanager", "otel-collector"} <= set(jobs)
    assert jobs["cuzk"].get("metrics_path", "/metrics") == "/metrics"
    am = cfg["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert am == jobs["alertmanager"]["static_configs"][0]["targets"]
    # The collector's own metrics, on the port its config serves them.
    collector = load_yaml(DEPLOY / "otel-collector" / "config.yaml")
    pull = collector["service"]["telemetry"]["metrics"]["readers"][0]["pull"]
    port = pull["exporter"]["prometheus"]["port"]
    assert jobs["otel-collector"]["static_configs"][0]["targets"] == [f"otel-collector:{port}"]
    # Every engine series the rules select carries job="cuzk" (the scrape job's name); the
    # monitoring alerts name the other jobs.
    for rule in alert_rules() + recording_rules():
        for name, sel in re.findall(r"(?<![\w:])(cuzk_\w+)(\{[^}]*\})?", rule["expr"]):
            assert 'job="cuzk"' in sel, (rule.get("alert") or rule.get("record"), name)
    monitoring = next(a for a in alert_rules() if a["alert"] == "CuzkMonitoringTargetDown")
    for job in ("prometheus", "alertmanager", "otel-collector"):
        assert job in monitoring["expr"]


def test_alertmanager_config_routes_to_a_null_receiver():
    cfg = load_yaml(DEPLOY / "alertmanager" / "alertmanager.yml")
    receivers = {r["name"]: r for r in cfg["receivers"]}
    assert cfg["route"]["receiver"] == "null"
    for sub in cfg["route"].get("routes", []):
        assert sub["receiver"] in receivers
    # No integration at all: nothing to fail, nothing to retry.
    assert set(receivers["null"]) == {"name"}


@pytest.mark.integration
def test_alertmanager_config_passes_amtool():
    amtool = require_tool("amtool")  # Debian package prometheus-alertmanager; .ci/run installs it
    path = DEPLOY / "alertmanager" / "alertmanager.yml"
    r = subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([amtool, "config", "routes", "test", f"--config.file={path}",
                        "severity=critical", "alertname=CuzkTargetDown"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "null", r.stdout + r.stderr


@pytest.mark.integration
def test_alertmanager_drops_notifications_cleanly(tmp_path):
    """The shipped config in a real Alertmanager: an alert is accepted, routed to the null
    receiver and dropped without a failed or retried notification (the old webhook on
    127.0.0.1:9 failed and retried forever). group_wait is shortened to 1 s in the copy."""
    binary = require_tool("prometheus-alertmanager")
    cfg = load_yaml(DEPLOY / "alertmanager" / "alertmanager.yml")
    cfg["route"]["group_wait"] = "1s"
    (tmp_path / "am.yml").write_text(json.dumps(cfg))
    port, cluster = free_port(), free_port()
    log = (tmp_path / "am.log").open("w")
    proc = subprocess.Popen(
        [binary, f"--config.file={tmp_path / 'am.yml'}", f"--storage.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}",
         f"--cluster.listen-address=127.0.0.1:{cluster}", "--log.level=debug"],
        stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"{base}/-/ready", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline, "alertmanager did not become ready"
                time.sleep(0.2)
        alert = [{"labels": {"alertname": "CuzkTargetDown", "severity": "critical",
                             "service": "cuzk", "instance": "a:9820", "job": "cuzk"},
                  "annotations": {"summary": "test"}}]
        req = urllib.request.Request(f"{base}/api/v2/alerts", data=json.dumps(alert).encode(),
                                     headers={"Content-Type": "application/json"})
        assert urllib.request.urlopen(req, timeout=5).status == 200
        got = json.loads(urllib.request.urlopen(f"{base}/api/v2/alerts", timeout=5).read())
        assert [a["receivers"][0]["name"] for a in got] == ["null"]
        deadline = time.monotonic() + 15
        text = ""
        while "flushing" not in text.lower():  # the aggregation group has been flushed once
            assert time.monotonic() < deadline, "alert group never flushed"
            time.sleep(0.3)
            text = (tmp_path / "am.log").read_text()
        metrics = urllib.request.urlopen(f"{base}/metrics", timeout=5).read().decode()
        failed = [line for line in metrics.splitlines()
                  if line.startswith("alertmanager_notifications_failed_total")
                  and not line.endswith(" 0")]
        assert not failed, failed
        assert "Notify for alerts failed" not in text and "level=error" not in text, text
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
