"""docker-compose.yml, Dockerfile and the collector config: parse, and agree with the engine."""

from __future__ import annotations

import re

import yaml

from cuzk.config import load_config
from tests.deploy._deploy_util import DEPLOY, PROM_DIR, PROVISIONING, ROOT, load_yaml

COMPOSE = ROOT / "docker-compose.yml"
SERVICES = {"cuzk", "otel-collector", "jaeger", "jaeger-data-init", "prometheus", "grafana",
            "alertmanager"}
ONE_SHOT = {"jaeger-data-init"}  # runs once before its dependants, then exits


class _TagLoader(yaml.SafeLoader):
    """Safe loader that accepts compose's own tags such as !reset."""


_TagLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def _compose() -> dict:
    return load_yaml(COMPOSE)


def _engine_port() -> int:
    return load_config(None, env={}).server.port


def _env(service: dict) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def _host_ports(service: dict) -> set[int]:
    return {int(str(p).split(":")[-1].split("/")[0]) for p in service.get("ports", [])}


def test_compose_services_and_pinned_images():
    services = _compose()["services"]
    assert set(services) == SERVICES
    for name, svc in services.items():
        image = svc.get("image", "")
        tag = image.rsplit(":", 1)[-1] if ":" in image else ""
        assert tag and tag != "latest" and re.search(r"\d", tag), (name, image)
    assert services["cuzk"]["build"]["dockerfile"] == "Dockerfile"
    assert services["jaeger"]["image"].startswith("jaegertracing/jaeger:2.")


def test_compose_cuzk_matches_engine_settings():
    port = _engine_port()
    svc = _compose()["services"]["cuzk"]
    env = _env(svc)
    host, _, listen_port = env["CUZK_SERVER_LISTEN"].rpartition(":")
    assert host == "0.0.0.0" and int(listen_port) == port
    assert port in _host_ports(svc)
    # Every CUZK_* variable names a real config key: the engine accepts the environment.
    load_config(None, env={k: v for k, v in env.items() if k.startswith("CUZK_")},
                check_files=False)
    # GPU reservation.
    devices = svc["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]
    # Traces go to the collector's OTLP gRPC receiver.
    collector = load_yaml(DEPLOY / "otel-collector" / "config.yaml")
    grpc_port = int(collector["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].split(":")[-1])
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == f"http://otel-collector:{grpc_port}"
    assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "grpc"


def _healthcheck_url(service: dict) -> str:
    test = service["healthcheck"]["test"]
    assert test[0] == "CMD", test  # exec form: no shell needed in the image
    return test[-1]


def test_compose_healthchecks_and_start_order():
    """Each service with a shell has a healthcheck on its readiness endpoint, and dependents
    wait for it to be healthy. Prometheus does not wait for the engine: it must be up to alert
    on an engine that never becomes healthy."""
    services = _compose()["services"]
    port = _engine_port()
    assert _healthcheck_url(services["cuzk"]) == f"http://127.0.0.1:{port}/readyz"
    assert _healthcheck_url(services["prometheus"]) == "http://127.0.0.1:9090/-/ready"
    assert _healthcheck_url(services["alertmanager"]) == "http://127.0.0.1:9093/-/ready"
    assert _healthcheck_url(services["grafana"]) == "http://127.0.0.1:3000/api/health"
    assert _healthcheck_url(services["jaeger"]) == "http://127.0.0.1:16686/"
    assert "healthcheck" not in services["otel-collector"]  # distroless image: nothing to run
    assert services["cuzk"]["healthcheck"]["test"][1] == "curl"  # the image installs curl
    for name, svc in services.items():
        for dep, cond in svc.get("depends_on", {}).items():
            want = "service_healthy" if "healthcheck" in services[dep] else "service_started"
            if dep in ONE_SHOT:
                want = "service_completed_successfully"
            assert cond == {"condition": want}, (name, dep)
    assert set(services["grafana"]["depends_on"]) == {"prometheus", "jaeger", "alertmanager"}
    assert set(services["prometheus"]["depends_on"]) == {"alertmanager"}
    assert services["otel-collector"]["depends_on"] == {"jaeger": {"condition": "service_healthy"}}


def test_compose_keeps_engine_state_on_a_volume_the_image_owns():
    svc = _compose()["services"]["cuzk"]
    env = _env(svc)
    text = (ROOT / "Dockerfile").read_text()
    home = re.search(r"--home-dir (\S+)", text).group(1)
    assert f"cuzk-data:{home}" in svc["volumes"]
    keys = env["CUZK_ENGINE_KEYS_DIR"]
    assert keys.startswith(home + "/")
    # The image creates the keys and state directories owned by the cuzk user, so a fresh named
    # volume (filled from the image, ownership included) is writable by the engine.
    created = re.search(r"install -d -o cuzk -g cuzk -m 0750 (.+)", text).group(1).split()
    assert keys in created
    state = re.search(r"XDG_STATE_HOME=(\S+)", text).group(1)
    assert state in created and state.startswith(home + "/")
    assert f"CUZK_ENGINE_KEYS_DIR={keys}" in text
    assert re.search(r"^USER cuzk$", text, flags=re.M)


def test_compose_gives_the_engine_time_to_drain():
    svc = _compose()["services"]["cuzk"]
    grace = int(svc["stop_grace_period"].removesuffix("s"))
    assert grace > load_config(None, env={}).server.drain_timeout_s


def test_grafana_root_url_is_the_alert_link_base():
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("build_rules",
                                                  PROM_DIR / "build_rules.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["build_rules"] = mod
    spec.loader.exec_module(mod)
    env = _env(_compose()["services"]["grafana"])
    assert env["GF_SERVER_ROOT_URL"] == "${CUZK_GRAFANA_URL:-" + mod.DEFAULT_GRAFANA_URL + "}"


def test_prometheus_scrapes_the_engine_where_it_listens():
    port = _engine_port()
    cfg = load_yaml(PROM_DIR / "prometheus.yml")
    cuzk = next(j for j in cfg["scrape_configs"] if j["job_name"] == "cuzk")
    assert cuzk["static_configs"][0]["targets"] == [f"cuzk:{port}"]
    from cuzk.api.app import create_app
    from cuzk.config import load_config

    class _NoEngine:
        pass

    # Routes only: no engine, so no metrics subscribed to it (the /metrics route stays).
    config = load_config(None, env={"CUZK_TELEMETRY_METRICS": "false"})
    paths = {getattr(r, "path", None) for r in create_app(_NoEngine(), config).routes}
    assert cuzk.get("metrics_path", "/metrics") in paths
    assert "/healthz" in paths and "/readyz" in paths


def test_compose_prometheus_exemplars_and_mounts():
    svc = _compose()["services"]["prometheus"]
    assert "--enable-feature=exemplar-storage" in svc["command"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in svc["command"]
    assert "./deploy/prometheus:/etc/prometheus:ro" in svc["volumes"]
    cfg = load_yaml(PROM_DIR / "prometheus.yml")
    assert cfg["rule_files"] == ["rules/*.yml"]  # relative to the mounted prometheus.yml
    assert 9090 in _host_ports(svc)


def test_compose_grafana_alertmanager_jaeger_wiring():
    services = _compose()["services"]
    grafana = services["grafana"]
    env = _env(grafana)
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    assert "./deploy/grafana/provisioning:/etc/grafana/provisioning:ro" in grafana["volumes"]
    home = env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home.startswith("/var/lib/grafana/dashboards/cuzk/")
    assert (DEPLOY / "grafana" / "dashboards" / home.rsplit("/", 1)[1]).exists()
    ds = {d["uid"]: d for d in load_yaml(PROVISIONING / "datasources" / "datasources.yml")
          ["datasources"]}
    assert ds["prometheus"]["url"] == "http://prometheus:9090"
    assert ds["jaeger"]["url"] == "http://jaeger:16686"
    assert ds["alertmanager"]["url"] == "http://alertmanager:9093"
    am = services["alertmanager"]
    assert "./deploy/alertmanager/alertmanager.yml:/etc/alertmanager/alertmanager.yml:ro" in (
        am["volumes"])
    assert 9093 in _host_ports(am) and 3000 in _host_ports(grafana)
    assert 16686 in _host_ports(services["jaeger"])


def test_collector_pipeline():
    cfg = load_yaml(DEPLOY / "otel-collector" / "config.yaml")
    protocols = cfg["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"].endswith(":4317")
    assert protocols["http"]["endpoint"].endswith(":4318")
    traces = cfg["service"]["pipelines"]["traces"]
    assert traces["receivers"] == ["otlp"]
    assert traces["processors"][0] == "memory_limiter"  # must come first
    assert "batch" in traces["processors"]
    for name in traces["exporters"]:
        exporter = cfg["exporters"][name]
        assert name.split("/")[0] == "otlp"
        assert exporter["endpoint"] == "jaeger:4317"
    for ext in cfg["service"].get("extensions", []):
        assert ext in cfg["extensions"]
    svc = _compose()["services"]["otel-collector"]
    mount = next(v for v in svc["volumes"] if v.startswith("./deploy/otel-collector/config.yaml:"))
    assert f"--config={mount.split(':')[1]}" in svc["command"]
    assert {4317, 4318} <= _host_ports(svc)


def test_cpu_override_drops_gpu_reservation():
    override = yaml.load((DEPLOY / "docker-compose.cpu.yml").read_text(), Loader=_TagLoader)
    cuzk = override["services"]["cuzk"]
    assert "deploy" in cuzk and cuzk["deploy"] is None  # !reset
    load_config(None, env=_env(cuzk), check_files=False)


def _dockerfile_args() -> dict[str, str]:
    text = (ROOT / "Dockerfile").read_text()
    return dict(re.findall(r"^ARG (\w+)=(\S*)$", text, flags=re.M))


def test_cpu_override_builds_without_cuda():
    """The CPU-only stack builds on a plain, pinned image with no GPU extra (no CUDA devel
    image, no CUDA toolchain), under its own tag; the default build stays the CUDA one."""
    override = yaml.load((DEPLOY / "docker-compose.cpu.yml").read_text(), Loader=_TagLoader)
    cuzk = override["services"]["cuzk"]
    args = cuzk["build"]["args"]
    defaults = _dockerfile_args()
    assert set(args) <= set(defaults), f"the Dockerfile declares no ARG for {set(args)}"
    assert "cuda" not in args["BASE_IMAGE"].lower()
    assert re.fullmatch(r"\S+:\S*\d\S*", args["BASE_IMAGE"])  # pinned
    assert args["CUZK_EXTRAS"] == ""
    assert cuzk["image"] != _compose()["services"]["cuzk"]["image"]
    assert "cuda" in defaults["BASE_IMAGE"] and defaults["CUZK_EXTRAS"] == "gpu"


def test_dockerfile_matches_engine():
    text = (ROOT / "Dockerfile").read_text()
    port = _engine_port()
    assert f"EXPOSE {port}" in text
    assert f"CUZK_SERVER_LISTEN=0.0.0.0:{port}" in text
    assert f"curl -fsS http://127.0.0.1:{port}/readyz" in text  # HEALTHCHECK on readiness
    assert 'ENTRYPOINT ["/usr/local/bin/cuzk-entrypoint"]' in text
    assert "COPY --chmod=0755 deploy/docker/entrypoint.sh /usr/local/bin/cuzk-entrypoint" in text
    # .dockerignore keeps deploy/ out of the build context except the entrypoint.
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert "deploy" in ignore and "!deploy/docker/entrypoint.sh" in ignore
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", text, flags=re.M)
    assert re.fullmatch(r"\S+:\S*\d\S*", _dockerfile_args()["BASE_IMAGE"])  # pinned base image
    for line in re.findall(r"^COPY (.+)$", text, flags=re.M):
        for path in [w for w in line.split()[:-1] if not w.startswith("--")]:
            assert (ROOT / path).exists(), f"Dockerfile copies {path}, which does not exist"


def test_jaeger_keeps_traces_on_a_volume():
    """Exemplar links from Prometheus's 15 days of history open traces in Jaeger: Jaeger must
    keep them across a restart (Badger on a named volume, not the in-memory default), for as
    long as Prometheus keeps the samples that link to them."""
    compose = _compose()
    jaeger = compose["services"]["jaeger"]
    mounts = dict(v.rsplit(":", 1)[0].split(":", 1) if v.count(":") == 2 else v.split(":", 1)
                  for v in jaeger["volumes"])
    assert mounts["./deploy/jaeger/config.yaml"] == "/etc/jaeger/config.yaml"
    assert "jaeger-data" in compose["volumes"]
    data_dir = mounts["jaeger-data"]
    assert jaeger["command"] == ["--config=/etc/jaeger/config.yaml"]
    config = load_yaml(DEPLOY / "jaeger" / "config.yaml")
    store = config["extensions"]["jaeger_query"]["storage"]["traces"]
    assert config["exporters"]["jaeger_storage_exporter"]["trace_storage"] == store
    assert config["service"]["pipelines"]["traces"]["exporters"] == ["jaeger_storage_exporter"]
    badger = config["extensions"]["jaeger_storage"]["backends"][store]["badger"]
    assert set(config["extensions"]["jaeger_storage"]["backends"][store]) == {"badger"}
    assert badger["ephemeral"] is False
    for d in badger["directories"].values():
        assert d.startswith(data_dir + "/"), (d, data_dir)
    ttl_h = int(badger["ttl"]["spans"].removesuffix("h"))
    retention = next(a for a in compose["services"]["prometheus"]["command"]
                     if a.startswith("--storage.tsdb.retention.time="))
    assert ttl_h == 24 * int(retention.split("=")[1].removesuffix("d"))
    # The collector sends OTLP gRPC to the receiver Jaeger listens on.
    assert config["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].endswith(":4317")
    # The image runs as uid 10001; a fresh named volume is root's: the one-shot init hands the
    # same volume over before Jaeger starts.
    init = compose["services"]["jaeger-data-init"]
    assert init["command"][:2] == ["chown", "-R"] and init["command"][2].startswith("10001:")
    assert f"jaeger-data:{data_dir}" in init["volumes"] and init["command"][3] == data_dir
    assert jaeger["depends_on"] == {
        "jaeger-data-init": {"condition": "service_completed_successfully"}}
