"""The "Cluster nodes" row of the GPU workers dashboard, live: real worker-actor endpoints
(``cuzk.cluster.worker.WorkerState`` with the scripted prover; no Ray needed to serve them)
listed in a file_sd file by the head's own writer, scraped every second by a real Prometheus.
One GPU worker holds a lease, the other is idle; every query of the row returns data, and the
table counts each node's workers and the one proving."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from tests.deploy._deploy_util import PROM_DIR, dashboards, free_port, panel_queries
from tests.deploy.test_deploy_e2e import (
    Prom,
    _nonzero,
    _Proc,
    _substitute,
    _wait_for,
    require_tool,
)

pytestmark = pytest.mark.integration

ROW = ("Cluster nodes", "GPU busy fraction by node and worker", "Worker actors answering by node")
N1, N2 = "a" * 56, "b" * 56


def _row_queries() -> list[tuple[str, str]]:
    d = dashboards()["cuzk-gpu-workers.json"]
    out = [(p["title"], t["expr"]) for p, t in panel_queries(d) if p["title"] in ROW]
    assert {title for title, _ in out} == set(ROW)
    return out


def test_cluster_node_row_reads_the_worker_actors_endpoints(tmp_path: Path):
    prometheus = require_tool("prometheus")
    from prometheus_client import start_http_server

    from cuzk.cluster.service_discovery import targets, write
    from cuzk.cluster.worker import ProverSpec, WorkerState
    from cuzk.engine.snapshot import ClusterWorkerView, NodeView
    from tests._doubles import make_test_engine, metrics_of

    spec = ProverSpec("scripted")
    layout = [("gpu-a-0", "gpu", N1), ("cpu-a-0", "cpu", N1), ("gpu-b-0", "gpu", N2)]
    states = [WorkerState(w, role, node, "127.0.0.1", spec) for w, role, node in layout]
    procs: list[_Proc] = []
    # The head: a real engine's endpoint, whose GPU worker series carry worker labels of their
    # own, listed by the head's writer with the file's worker="head".
    head_engine, _, _ = make_test_engine({"winning-post": (1, "critical")})
    head_server, _ = start_http_server(0, addr="127.0.0.1",
                                       registry=metrics_of(head_engine).registry)
    head_workers = {w.id for w in head_engine.workers}
    try:
        nodes = [NodeView(node, "gpu", "127.0.0.1", tuple(
            ClusterWorkerView(s.worker_id, s.role, "idle", metrics_url=s.metrics_url)
            for s in states if s.node_id == node), 300, 0) for node in (N1, N2)]
        sd = tmp_path / "cuzk_sd.json"
        write(sd, targets(nodes, head=(f"127.0.0.1:{head_server.server_port}", "head")))
        pinst = f"127.0.0.1:{free_port()}"
        shipped = yaml.safe_load((PROM_DIR / "prometheus.cluster.yml").read_text())
        job = next(j for j in shipped["scrape_configs"] if j["job_name"] == "cuzk")
        job.update(scrape_interval="1s", scrape_timeout="1s",
                   file_sd_configs=[{"files": [str(sd)], "refresh_interval": "1s"}])
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [job]}))
        procs.append(_Proc(
            [prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address={pinst}",
             "--log.level=warn"], tmp_path / "prometheus.log"))
        prom = Prom(f"http://{pinst}")
        t0 = time.time()
        with states[0].leases.lease("job-1", 0):  # gpu-a-0 proving, gpu-b-0 idle
            # rate() over the 4 s the test substitutes for $__rate_interval needs 2 scrapes
            _wait_for("4 scrapes of every worker actor", lambda: len(prom.query(
                'count_over_time(up{job="cuzk"}[10s]) >= 4')) == 4, 60, procs=procs)
            end = time.time()
            range_s = int(end - t0) + 5
            empty = [(title, expr) for title, expr in _row_queries() if not _nonzero(
                prom.query_range(_substitute(expr, "cuzk", ".+", range_s), t0, end))]
            assert not empty, f"cluster panels without data: {empty}"
            d = dashboards()["cuzk-gpu-workers.json"]
            table = {t["refId"]: _substitute(t["expr"], "cuzk", ".+", range_s)
                     for p, t in panel_queries(d) if p["title"] == "Cluster nodes"}
            gpus_up, proving = prom.query(table["A"]), prom.query(table["C"])
            head_busy = prom.query('cuzk_gpu_worker_busy_seconds_total{role="head"}')
            overwritten = prom.query('{__name__=~"cuzk_.+", exported_worker!=""}')
        assert {r["metric"]["node"]: float(r["value"][1]) for r in gpus_up} == {N1: 1, N2: 1}
        assert {r["metric"]["node"]: float(r["value"][1]) for r in proving} == {N1: 1, N2: 0}
        # A series' own worker label wins over the file's (honor_labels): the head's slots read
        # as themselves, never as worker="head", and nothing is renamed to exported_worker.
        assert {r["metric"]["worker"] for r in head_busy} == head_workers
        assert "head" not in head_workers and overwritten == []
    finally:
        head_server.shutdown()
        head_engine.shutdown(5)
        for p in procs:
            p.stop()
        for s in states:
            s.close()
