"""The cluster's Prometheus config (acceptance check 9): a ``cuzk`` and a ``ray`` file_sd job,
accepted by promtool; the head's file_sd file in the shape Prometheus reads."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from cuzk.engine.snapshot import ClusterWorkerView, NodeView
from tests._tools import require_tool

PROM_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
CONFIG = PROM_DIR / "prometheus.cluster.yml"


@pytest.mark.integration
def test_promtool_accepts_the_cluster_config():
    promtool = require_tool("promtool")
    r = subprocess.run([promtool, "check", "config", CONFIG.name], cwd=PROM_DIR,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_cuzk_and_ray_are_separate_file_sd_jobs():
    jobs = {j["job_name"]: j for j in yaml.safe_load(CONFIG.read_text())["scrape_configs"]}
    assert "file_sd_configs" in jobs["cuzk"] and "file_sd_configs" in jobs["ray"]
    cuzk_files = jobs["cuzk"]["file_sd_configs"][0]["files"]
    ray_files = jobs["ray"]["file_sd_configs"][0]["files"]
    assert cuzk_files[0].endswith("cuzk_sd.json")
    assert ray_files == ["/tmp/ray/prom_metrics_service_discovery.json"]
    assert set(cuzk_files).isdisjoint(ray_files)


def test_sd_file_lists_answering_workers_with_node_and_role(tmp_path: Path):
    from cuzk.cluster.service_discovery import targets, write

    nodes = [
        NodeView("n" * 56, "gpu", "10.0.0.2", (
            ClusterWorkerView("gpu-nnn-0", "gpu", "proving", "j", 0, 3,
                              "http://10.0.0.2:41001/metrics"),
            ClusterWorkerView("cpu-nnn-0", "cpu", "unreachable", metrics_url=
                              "http://10.0.0.2:41002/metrics"),
        ), 300, 0),
        NodeView("m" * 56, "cpu", "10.0.0.3", (
            ClusterWorkerView("cpu-mmm-0", "cpu", "idle", None, None, 0,
                              "http://10.0.0.3:41003/metrics"),), 300, 0),
    ]
    path = tmp_path / "cuzk_sd.json"
    write(path, targets(nodes, head=("10.0.0.1:9820", "head")))
    groups = json.loads(path.read_text())
    by_target = {g["targets"][0]: g["labels"] for g in groups}
    assert by_target == {
        "10.0.0.1:9820": {"node": "head", "role": "head", "worker": "head"},
        "10.0.0.2:41001": {"node": "n" * 56, "role": "gpu", "worker": "gpu-nnn-0"},
        "10.0.0.3:41003": {"node": "m" * 56, "role": "cpu", "worker": "cpu-mmm-0"},
    }  # the unreachable worker is left out: its series go with it
    for g in groups:
        assert set(g) == {"targets", "labels"}
        assert all(re.fullmatch(r"[^:/]+:\d+", t) for t in g["targets"])
