"""Grafana dashboards and provisioning: generator in sync, structure, variables, selectors,
exemplars, traces, links, and every queried metric known to the engine or the stack."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest

from tests.deploy._deploy_util import (
    DASH_DIR,
    DEPLOY,
    DEVICE_ONLY_METRICS,
    NVML_METRICS,
    OPERATIONS_DOC,
    PENDING_ENGINE_METRICS,
    PROMETHEUS_SERIES,
    PROVISIONING,
    STACK_METRIC_PREFIXES,
    alert_rules,
    dashboards,
    exposition_names,
    load_yaml,
    nvml_metric_names,
    panel_queries,
    panels,
    promql_metrics,
    recording_rules,
)

EXPECTED = {"cuzk-fleet.json", "cuzk-gpu-workers.json", "cuzk-pipeline.json",
            "cuzk-memory.json", "cuzk-monitoring.json", "cuzk-runbook.json"}
ENGINE_DASHBOARDS = EXPECTED - {"cuzk-monitoring.json", "cuzk-runbook.json"}


def _generator():
    spec = importlib.util.spec_from_file_location(
        "build_dashboards", DEPLOY / "grafana" / "build_dashboards.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["build_dashboards"] = mod
    spec.loader.exec_module(mod)
    return mod


def _datasources() -> dict[str, dict]:
    cfg = load_yaml(PROVISIONING / "datasources" / "datasources.yml")
    return {d["uid"]: d for d in cfg["datasources"]}


def _prom_queries():
    """(dashboard, panel, target) for every Prometheus query."""
    for name, d in dashboards().items():
        for p, t in panel_queries(d):
            if "expr" in t:
                yield name, p, t


def test_committed_json_matches_generator():
    rendered = _generator().render()
    assert set(rendered) == EXPECTED
    for name, text in rendered.items():
        assert (DASH_DIR / name).read_text() == text, (
            f"{name} is stale: run python deploy/grafana/build_dashboards.py")


def test_dashboards_parse_with_unique_ids_current_schema_and_not_editable():
    dash = dashboards()
    assert set(dash) == EXPECTED
    uids = [d["uid"] for d in dash.values()]
    assert len(set(uids)) == len(uids)
    for name, d in dash.items():
        ids = [p["id"] for p in panels(d)]
        assert len(ids) == len(set(ids)), name
        assert all(isinstance(i, int) for i in ids), name
        assert d["editable"] is False, name
        assert d["schemaVersion"] == 41, name  # Grafana 12.1, what compose deploys


def test_job_and_instance_variables_are_multi_select_with_all_matching_something():
    for name, d in dashboards().items():
        if name == "cuzk-runbook.json":
            continue
        variables = {v["name"]: v for v in d["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource"
        assert variables["datasource"]["query"] == "prometheus"
        for var in ("job", "instance"):
            v = variables[var]
            assert v["type"] == "query" and v["datasource"]["uid"] == "${datasource}", name
            assert v["multi"] is True and v["includeAll"] is True, (name, var)
            if name == "cuzk-monitoring.json":  # the stack's own targets: any job
                assert v["allValue"] == ".+", (name, var)  # ".*" would match an empty label
            else:  # "All" = the engines listed, never every scrape job
                assert v["allValue"] is None, (name, var)
                assert v["definition"].startswith("label_values(cuzk_build_info"), (name, var)
        assert variables["instance"]["label"] == "Instance"
        assert '$job' in variables["instance"]["definition"], name


def test_panels_have_unit_description_and_variable_datasource():
    provisioned = _datasources()
    for name, d in dashboards().items():
        for p in panels(d):
            if p["type"] in ("row", "text"):
                continue
            assert p.get("description"), (name, p["title"])
            assert p["fieldConfig"]["defaults"].get("unit"), (name, p["title"])
            ds = p["datasource"]
            assert ds["uid"] == "${datasource}" or provisioned[ds["uid"]]["type"] == ds["type"], (
                name, p["title"])
            for t in p["targets"]:
                assert t["datasource"] == ds, (name, p["title"])


CLUSTER_PANELS = {"Cluster nodes", "GPU busy fraction by node and worker",
                  "Worker actors answering by node"}
"""Panels on a Ray cluster's worker actors: selected by job and role (gpu, cpu), not instance
(an actor is not an engine; tests/deploy/test_deploy_cluster_dashboard.py runs them live)."""


def test_every_selector_filters_on_job_and_instance():
    """Every metric selector carries job=~"$job" and instance=~"$instance"; a cluster panel's
    job=~"$job" and a role of worker actors instead."""
    for name, p, t in _prom_queries():
        if p["title"] in CLUSTER_PANELS:
            for _, matchers in re.findall(r"([a-zA-Z_:][\w:]*)?\s*\{([^}]*)\}", t["expr"]):
                assert 'job=~"$job"' in matchers and re.search(
                    r'role(="gpu"|="cpu"|=~"gpu\|cpu")', matchers), (name, p["title"], matchers)
            continue
        expr = t["expr"]
        if not promql_metrics(expr) - {"ALERTS"}:
            continue
        stripped = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
        selectors = re.findall(r"([a-zA-Z_:][\w:]*)?\s*\{([^}]*)\}", expr)
        assert selectors, (name, p["title"], expr)
        for metric, matchers in selectors:
            assert 'job=~"$job"' in matchers and 'instance=~"$instance"' in matchers, (
                name, p["title"], metric, expr)
        # A bare metric name without a selector would escape the filters.
        for metric in promql_metrics(expr):
            assert re.search(re.escape(metric) + r"\s*\{", expr) or (
                "__name__" in expr), (name, p["title"], metric, stripped)


def test_rates_use_rate_interval_and_counters_in_totals_use_the_range():
    for name, p, t in _prom_queries():
        expr = t["expr"]
        for m in re.finditer(r"\b(rate|irate|increase|changes|resets)\(", expr):
            window = re.match(r"[^\[]*\[([^\]]+)\]", expr[m.end():])
            want = "$__rate_interval" if m.group(1) in ("rate", "irate") else "$__range"
            assert window and window.group(1) == want, (name, p["title"], expr)
        # A raw counter is never plotted as such.
        for metric in promql_metrics(expr):
            if metric.endswith("_total"):
                assert re.search(r"\b(rate|increase|changes|resets)\(", expr), (
                    name, p["title"], expr)


def test_exemplars_on_exactly_one_series_of_each_histogram_panel():
    for name, d in dashboards().items():
        for p in panels(d):
            targets = p.get("targets", [])
            with_exemplars = [t for t in targets if t.get("exemplar")]
            assert len(with_exemplars) <= 1, (name, p["title"])
            if any(re.search(r"cuzk_(job|partition_phase)_duration_seconds_bucket",
                             t.get("expr", "")) for t in targets):
                assert len(with_exemplars) == 1, (name, p["title"])


def test_latency_panels_count_succeeded_jobs_only():
    for name, p, t in _prom_queries():
        for sel in re.findall(r"cuzk_job_duration_seconds_bucket\{([^}]*)\}", t["expr"]):
            assert 'status="succeeded"' in sel, (name, p["title"])
    for r in recording_rules():
        for sel in re.findall(r"cuzk_job_duration_seconds_\w+\{([^}]*)\}", r["expr"]):
            assert 'status="succeeded"' in sel, r["record"]


def test_proof_kind_legends_are_full_names():
    """Proof kinds are shown by their label, never a derived or shortened form."""
    for _, p, t in _prom_queries():
        if t["format"] == "table":
            continue
        grouped = re.findall(r"by \(([^)]*)\)", t["expr"])
        if any("proof_kind" in g for g in grouped) and t["expr"].lstrip().startswith(
                ("sum by", "histogram_quantile")):
            assert "{{proof_kind}}" in t["legendFormat"], p["title"]


def test_traces_panel_and_data_links_to_jaeger():
    ds = _datasources()
    pipeline = dashboards()["cuzk-pipeline.json"]
    traces = [p for p in panels(pipeline) if p.get("datasource", {}).get("type") == "jaeger"]
    assert traces, "no traces panel"
    for p in traces:
        assert ds[p["datasource"]["uid"]]["type"] == "jaeger"
        (target,) = p["targets"]
        assert target["queryType"] == "search" and target["service"] == "cuzk"
        assert target["operation"] == "cuzk.job" and target["minDuration"] == "$slow"
    variables = {v["name"] for v in pipeline["templating"]["list"]}
    assert "slow" in variables
    # Job and worker panels link to their traces in Jaeger (Explore), by proof kind or worker.
    linked = {}
    for name, d in dashboards().items():
        for p in panels(d):
            for link in p.get("fieldConfig", {}).get("defaults", {}).get("links", []):
                assert link["url"].startswith("/explore?schemaVersion=1&panes=")
                assert '"datasource":"jaeger"' in link["url"]
                linked.setdefault(name, set()).add(
                    re.search(r"__field\.labels\.(\w+)", link["url"]).group(1))
    assert linked["cuzk-gpu-workers.json"] >= {"worker", "proof_kind"}
    assert "proof_kind" in linked["cuzk-pipeline.json"] and "proof_kind" in linked[
        "cuzk-fleet.json"]


def test_worker_history_scales_to_a_fleet():
    gpu = dashboards()["cuzk-gpu-workers.json"]
    (hist,) = [p for p in panels(gpu) if p["type"] == "status-history"]
    assert hist["gridPos"]["h"] >= 20 and hist["gridPos"]["w"] == 24  # 64 rows of ~9 px
    assert hist["options"]["legend"]["showLegend"] is False
    assert hist["options"]["showValue"] == "never"
    assert hist["maxDataPoints"] <= 100
    assert "cuzk_gpu_worker_busy_seconds_total" in hist["targets"][0]["expr"]
    least = [p for p in panels(gpu) if "bottomk(" in str(p.get("targets"))]
    assert least, "no least-busy table"


def test_rss_budget_restarts_and_alert_annotations():
    fleet = dashboards()["cuzk-fleet.json"]
    exprs = " ".join(t["expr"] for _, t in panel_queries(fleet) if "expr" in t)
    assert "process_resident_memory_bytes" in exprs and "cuzk_memory_budget_bytes" in exprs
    assert "process_start_time_seconds" in exprs and "resets(" in exprs
    for name in ENGINE_DASHBOARDS:
        ann = [a for a in dashboards()[name]["annotations"]["list"] if "expr" in a]
        assert ann and ann[0]["expr"].startswith("ALERTS{") and 'alertstate="firing"' in ann[
            0]["expr"], name


def test_runbook_dashboard_serves_every_alert_section():
    gen = _generator()
    sections = gen.runbook_sections(OPERATIONS_DOC.read_text())
    runbook = dashboards()["cuzk-runbook.json"]
    by_title = {p["title"]: p for p in runbook["panels"]}
    assert {a["alert"] for a in alert_rules()} <= set(by_title)
    for title, p in by_title.items():
        assert p["type"] == "text" and p["options"]["content"] == sections[title]


def test_exemplar_links_go_to_the_provisioned_jaeger():
    ds = _datasources()
    prom = next(d for d in ds.values() if d["type"] == "prometheus")
    dests = prom["jsonData"]["exemplarTraceIdDestinations"]
    assert [d["name"] for d in dests] == ["trace_id"]
    assert ds[dests[0]["datasourceUid"]]["type"] == "jaeger"


def test_dashboard_provider_points_at_the_mounted_folder():
    cfg = load_yaml(PROVISIONING / "dashboards" / "dashboards.yml")
    compose = load_yaml(DEPLOY.parent / "docker-compose.yml")
    mounts = compose["services"]["grafana"]["volumes"]
    path = cfg["providers"][0]["options"]["path"]
    assert f"./deploy/grafana/dashboards:{path}:ro" in mounts


@pytest.fixture(scope="module")
def engine_exposition(tmp_path_factory) -> str:
    """The real engine's /metrics (CPU backend, in process, through the ASGI app), with its
    journal in a temporary directory (never the user's)."""
    from starlette.testclient import TestClient

    from cuzk.api.app import create_app
    from cuzk.config import load_config
    from cuzk.engine import Engine
    from cuzk.prover.real_prover import RealProver

    journal = tmp_path_factory.mktemp("journal") / "journal.sqlite3"
    config = load_config(None, env={"CUZK_ENGINE_BACKEND": "cpu",
                                    "CUZK_JOURNAL_PATH": str(journal)})
    settings = config.engine_settings()
    engine = Engine(settings, RealProver(settings))
    engine.start()
    try:
        with TestClient(create_app(engine, config)) as client:
            r = client.get("/metrics")
            assert r.status_code == 200
            return r.text
    finally:
        engine.shutdown(10)


def test_every_queried_metric_exists_in_the_engine(engine_exposition):
    """Engine metrics in rules and dashboards exist in the real engine's /metrics; the others
    are Prometheus's, Alertmanager's or the collector's own, NVML/device-only, or named in
    docs/design.md section 5 and not yet exported by this engine (PENDING_ENGINE_METRICS)."""
    exposed = exposition_names(engine_exposition)
    assert "cuzk_gpu_worker_busy_seconds_total" in exposed
    records = {r["record"] for r in recording_rules()}
    assert nvml_metric_names() == NVML_METRICS
    used: set[str] = set()
    for _, _, t in _prom_queries():
        used |= promql_metrics(t["expr"])
    for r in recording_rules() + alert_rules():
        used |= promql_metrics(r["expr"])
    stack = {m for m in used if m.startswith(STACK_METRIC_PREFIXES)}
    known = exposed | records | PROMETHEUS_SERIES | DEVICE_ONLY_METRICS | stack
    missing = used - known
    assert missing <= set(PENDING_ENGINE_METRICS), (
        f"queried but not exposed by the engine: {sorted(missing - set(PENDING_ENGINE_METRICS))}")


def test_promql_metric_scan():
    expr = ('histogram_quantile(0.95, sum by (proof_kind, le) ('
            'rate(cuzk_job_duration_seconds_bucket{instance=~"$instance", proof_kind=~"a|b"}'
            '[$__rate_interval]))) or on (instance) '
            'vector(0) unless instance:cuzk_memory_reserved:ratio > 0.9')
    assert promql_metrics(expr) == {"cuzk_job_duration_seconds_bucket",
                                    "instance:cuzk_memory_reserved:ratio"}
