"""Grafana dashboards and provisioning: generator in sync, structure, datasources, metric names."""

from __future__ import annotations

import importlib.util
import re

import pytest

from tests.deploy._deploy_util import (
    DASH_DIR,
    DEPLOY,
    DEVICE_ONLY_METRICS,
    NVML_METRICS,
    PROMETHEUS_SERIES,
    PROVISIONING,
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

EXPECTED = {"cuzk-fleet.json", "cuzk-gpu-workers.json", "cuzk-pipeline.json", "cuzk-memory.json"}


def _generator():
    spec = importlib.util.spec_from_file_location(
        "build_dashboards", DEPLOY / "grafana" / "build_dashboards.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _datasources() -> dict[str, dict]:
    cfg = load_yaml(PROVISIONING / "datasources" / "datasources.yml")
    return {d["uid"]: d for d in cfg["datasources"]}


def test_committed_json_matches_generator():
    rendered = _generator().render()
    assert set(rendered) == EXPECTED
    for name, text in rendered.items():
        assert (DASH_DIR / name).read_text() == text, (
            f"{name} is stale: run python deploy/grafana/build_dashboards.py")


def test_dashboards_parse_with_unique_ids():
    dash = dashboards()
    assert set(dash) == EXPECTED
    uids = [d["uid"] for d in dash.values()]
    assert len(set(uids)) == len(uids)
    for name, d in dash.items():
        ids = [p["id"] for p in panels(d)]
        assert len(ids) == len(set(ids)), name
        assert all(isinstance(i, int) for i in ids), name


def test_panels_have_unit_description_and_variable_datasource():
    provisioned = _datasources()
    for name, d in dashboards().items():
        variables = {v["name"]: v for v in d["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource"
        assert variables["datasource"]["query"] == "prometheus"
        assert variables["datasource"]["current"]["value"] in provisioned
        assert provisioned[variables["datasource"]["current"]["value"]]["type"] == "prometheus"
        assert variables["instance"]["type"] == "query"
        assert variables["instance"]["datasource"]["uid"] == "${datasource}"
        for p in panels(d):
            if p["type"] == "row":
                continue
            assert p.get("description"), (name, p["title"])
            assert p["fieldConfig"]["defaults"].get("unit"), (name, p["title"])
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
            for t in p["targets"]:
                assert t["datasource"]["uid"] == "${datasource}", p["title"]


def test_queries_use_rate_interval_and_instance():
    for name, d in dashboards().items():
        for p, t in panel_queries(d):
            expr = t["expr"]
            for m in re.finditer(r"\b(rate|irate|increase)\(", expr):
                window = re.match(r"[^\[]*\[([^\]]+)\]", expr[m.end():])
                assert window and window.group(1) == "$__rate_interval", (name, p["title"], expr)
            if promql_metrics(expr) - {"ALERTS"}:
                assert 'instance=~"$instance"' in expr, (name, p["title"], expr)


def test_histogram_panels_ask_for_exemplars():
    for name, d in dashboards().items():
        for p, t in panel_queries(d):
            if re.search(r"cuzk_(job|partition_phase)_duration_seconds_bucket", t["expr"]):
                assert t["exemplar"] is True, (name, p["title"])


def test_proof_kind_legends_are_full_names():
    """Proof kinds are shown by their label, never a derived or shortened form."""
    for _, d in dashboards().items():
        for p, t in panel_queries(d):
            if "proof_kind" in t["expr"] and "sum by" in t["expr"] and t["format"] != "table":
                grouped = re.findall(r"by \(([^)]*)\)", t["expr"])
                if any("proof_kind" in g for g in grouped):
                    assert "{{proof_kind}}" in t["legendFormat"], p["title"]


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
def engine_exposition() -> str:
    """The real engine's /metrics (CPU backend, in process, through the ASGI app)."""
    from starlette.testclient import TestClient

    from cuzk.api.app import create_app
    from cuzk.config import load_config
    from cuzk.engine import Engine

    config = load_config(None, env={"CUZK_ENGINE_BACKEND": "cpu"})
    engine = Engine(config.engine_settings())
    engine.start()
    try:
        with TestClient(create_app(engine, config)) as client:
            r = client.get("/metrics")
            assert r.status_code == 200
            return r.text
    finally:
        engine.shutdown(10)


def test_every_queried_metric_exists_in_the_engine(engine_exposition):
    exposed = exposition_names(engine_exposition)
    assert "cuzk_gpu_worker_busy_seconds_total" in exposed
    records = {r["record"] for r in recording_rules()}
    assert nvml_metric_names() == NVML_METRICS
    known = exposed | records | PROMETHEUS_SERIES | DEVICE_ONLY_METRICS
    used: set[str] = set()
    for _, d in dashboards().items():
        for _, t in panel_queries(d):
            used |= promql_metrics(t["expr"])
    for r in recording_rules():
        used |= promql_metrics(r["expr"])
    for a in alert_rules():
        used |= promql_metrics(a["expr"])
    assert used, "no metrics found in queries"
    assert used <= known, f"queried but not exposed by the engine: {sorted(used - known)}"


def test_promql_metric_scan():
    expr = ('histogram_quantile(0.95, sum by (proof_kind, le) ('
            'rate(cuzk_job_duration_seconds_bucket{instance=~"$instance", proof_kind=~"a|b"}'
            '[$__rate_interval]))) or on (instance) '
            'vector(0) unless instance:cuzk_memory_reserved:ratio > 0.9')
    assert promql_metrics(expr) == {"cuzk_job_duration_seconds_bucket",
                                    "instance:cuzk_memory_reserved:ratio"}
