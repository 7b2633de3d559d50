"""``cuzk status`` never cuts a proof kind or a job id, at any terminal width from 40 up."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from cuzk.cli import status as status_cmd
from cuzk.testing import make_test_engine

LONG_KIND = "snap-update-32gib-sealed"  # a configured proof kind of 24 characters
KINDS = {
    LONG_KIND: (2, "normal"),
    "winning-post": (1, "critical"),
    "window-post": (1, "high"),
    "porep-c2": (3, "normal"),
}


@pytest.fixture(scope="module")
def busy_snapshot() -> dict:
    """A real snapshot: workers mid-lease on two kinds, partitions in several phases, jobs
    running and finished, keys resident."""
    assert len(LONG_KIND) == 24
    engine, prover, _ = make_test_engine(KINDS, memory_budget_bytes=4_400, synthesis_threads=1)
    with engine:
        done = engine.submit("window-post", [{"tag": "w"}])
        assert engine.wait(done.id, 5).state == "succeeded"
        gates = [prover.hold("gpu", "L0"), prover.hold("gpu", "wp")]
        engine.submit(LONG_KIND, [{"tag": "L0"}, {"tag": "L1"}])
        engine.submit("winning-post", [{"tag": "wp"}])
        assert all(g.wait_entered() for g in gates)
        engine.submit("porep-c2", [{"tag": f"p{i}"} for i in range(3)])
        snapshot = json.loads(json.dumps(engine.status()))  # what the CLI receives
        for g in gates:
            g.release()
    return snapshot


@pytest.mark.parametrize("width", [40, 50, 80, 200])
def test_no_proof_kind_or_job_id_is_cut(busy_snapshot: dict, width: int) -> None:
    console = Console(record=True, width=width, file=io.StringIO(), color_system=None)
    console.print(status_cmd.render(busy_snapshot, server="http://127.0.0.1:9820", width=width))
    text = console.export_text()
    lines = text.splitlines()
    tokens = {tok for line in lines for tok in line.replace("│", " ").split()}
    assert "…" not in text and "..." not in text
    assert all(len(line.rstrip()) <= width for line in lines)
    kinds = {w["proof_kind"] for w in busy_snapshot["workers"] if w["proof_kind"]}
    kinds |= {j["proof_kind"] for j in busy_snapshot["jobs"]}
    assert LONG_KIND in kinds and "winning-post" in kinds and "window-post" in kinds
    ids = {j["id"] for j in busy_snapshot["jobs"]}
    ids |= {w["job_id"] for w in busy_snapshot["workers"] if w["job_id"]}
    assert len(ids) == 4
    missing = (kinds | ids) - tokens
    assert not missing, f"cut or missing at {width} columns: {missing}\n{text}"


def _cluster_snapshot(snapshot: dict) -> dict:
    """The same snapshot as a cluster head reports it: two nodes with full-length Ray node
    ids, worker actors with long names, one of them unreachable."""
    gpu_node = "a3f9" * 14  # Ray node ids are 56 hex characters
    cpu_node = "7c0d" * 14
    job = snapshot["jobs"][0]["id"]
    out = dict(snapshot)
    out["nodes"] = [
        {"id": gpu_node, "role": "gpu", "address": "10.1.2.3", "reservations": {
            "budget_bytes": 300 << 20, "reserved_bytes": 90 << 20},
         "workers": [{"id": f"gpu-{gpu_node[:12]}-0", "kind": "gpu", "state": "proving",
                      "job_id": job, "partition": 1, "partitions_done": 7,
                      "metrics_url": "http://10.1.2.3:40001/metrics"},
                     {"id": f"cpu-{gpu_node[:12]}-0", "kind": "cpu", "state": "unreachable",
                      "job_id": None, "partition": None, "partitions_done": None,
                      "metrics_url": None}]},
        {"id": cpu_node, "role": "cpu", "address": "10.1.2.4", "reservations": {
            "budget_bytes": 300 << 20, "reserved_bytes": 0},
         "workers": [{"id": f"cpu-{cpu_node[:12]}-0", "kind": "cpu", "state": "idle",
                      "job_id": None, "partition": None, "partitions_done": 3,
                      "metrics_url": "http://10.1.2.4:40002/metrics"}]},
    ]
    return out


@pytest.mark.parametrize("width", [40, 60, 80, 200])
def test_cluster_nodes_are_shown_without_cutting_a_name(busy_snapshot: dict, width: int) -> None:
    snap = _cluster_snapshot(busy_snapshot)
    console = Console(record=True, width=width, file=io.StringIO(), color_system=None)
    console.print(status_cmd.render(snap, server="http://127.0.0.1:9820", width=width))
    text = console.export_text()
    assert "…" not in text and "..." not in text
    assert all(len(line.rstrip()) <= width for line in text.splitlines())
    tokens = {tok for line in text.splitlines() for tok in line.replace("│", " ").split()}
    folded = "".join(line.strip() for line in text.splitlines())  # a name wider than the
    names = {n["id"] for n in snap["nodes"]} | {w["id"] for n in snap["nodes"]  # terminal
                                                for w in n["workers"]}  # folds, whole
    missing = {n for n in names if n not in tokens and (len(n) <= width or n not in folded)}
    assert not missing, f"cut or missing at {width} columns: {missing}\n{text}"
    assert "unreachable" in tokens
