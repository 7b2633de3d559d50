"""``cuzk status`` of a cluster head: each node is named once, its workers under it, and the
memory panel shows the nodes' ledgers, where partitions reserve, with the head's own budget
named as the head's (it once read "host 0 B / 21.5 GiB" while the nodes were full)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from cuzk.cli import status as status_cmd
from cuzk.engine.engine import Engine

GPU_NODE = "a3f9" * 14  # Ray node ids are 56 hex characters
CPU_NODE = "7c0d" * 14


def _worker(wid: str, kind: str, state: str, job: str | None = None,
            partition: int | None = None) -> dict[str, Any]:
    return {"id": wid, "kind": kind, "state": state, "job_id": job, "partition": partition,
            "partitions_done": 0, "metrics_url": None}


@pytest.fixture
def cluster_snapshot(engine: Engine) -> dict[str, Any]:
    """The scripted engine's real snapshot, with the nodes a two-node cluster head reports."""
    snapshot = dict(engine.status())
    snapshot["nodes"] = [
        {"id": GPU_NODE, "role": "gpu", "address": "10.1.2.3",
         "reservations": {"budget_bytes": 300 << 20, "reserved_bytes": 90 << 20},
         "workers": [_worker("gpu-a3f9-0", "gpu", "proving", "job-1", 1),
                     _worker("cpu-a3f9-0", "cpu", "idle"),
                     _worker("cpu-a3f9-1", "cpu", "unreachable")]},
        {"id": CPU_NODE, "role": "cpu", "address": "10.1.2.4",
         "reservations": {"budget_bytes": 200 << 20, "reserved_bytes": 0},
         "workers": [_worker("cpu-7c0d-0", "cpu", "idle")]},
    ]
    return snapshot


def _render(snapshot: dict[str, Any], width: int) -> list[str]:
    console = Console(record=True, width=width, file=io.StringIO(), color_system=None)
    console.print(status_cmd.render(snapshot, server="http://head:9820", width=width))
    return console.export_text().splitlines()


@pytest.mark.parametrize("width", [200, 60])
def test_each_node_is_named_once_with_its_workers_under_it(
    cluster_snapshot: dict[str, Any], width: int
) -> None:
    lines = _render(cluster_snapshot, width)
    text = "\n".join(lines)
    for node in (GPU_NODE, CPU_NODE):
        assert text.count(node) == 1, f"{node} shown {text.count(node)} times\n{text}"
    workers = ["gpu-a3f9-0", "cpu-a3f9-0", "cpu-a3f9-1", "cpu-7c0d-0"]
    rows = [next(i for i, line in enumerate(lines) if w in line) for w in workers]
    assert rows == sorted(rows) and lines.index(next(
        x for x in lines if CPU_NODE in x)) > rows[2], text  # node by node, in order
    # A worker continuing its node's block says nothing of the node (no blank labels).
    for w in workers[1:3]:
        line = lines[rows[workers.index(w)]]
        assert "node" not in line and "address" not in line and "ledger" not in line, line
        assert line.startswith(" "), line  # under its node, not a node of its own


def test_the_table_gives_each_ledger_once(cluster_snapshot: dict[str, Any]) -> None:
    table = "\n".join(_render(cluster_snapshot, 200)).split("Cluster nodes", 1)[1]
    table = table.split("Partitions by phase", 1)[0]
    assert table.count("90.0 MiB / 300.0 MiB") == 1 and table.count("0 B / 200.0 MiB") == 1


def test_memory_shows_the_node_ledgers_and_names_the_head_budget(
    cluster_snapshot: dict[str, Any], engine: Engine
) -> None:
    lines = _render(cluster_snapshot, 120)
    panel = [line.strip("│ ") for line in lines if line.startswith("│")]
    assert panel[0].startswith("node 10.1.2.3") and panel[0].endswith(
        "90.0 MiB / 300.0 MiB (30%)"), panel
    assert panel[1].startswith("node 10.1.2.4") and panel[1].endswith(
        "0 B / 200.0 MiB (0%)"), panel
    assert panel[2].startswith("head host "), panel
    assert "partitions reserve on their node's ledger" in panel[3], panel
    assert not any(line.startswith("host ") for line in panel), panel
    # All bars start in one column.
    assert len({line.index("░") if "█" not in line else line.index("█")
                for line in panel[:3]}) == 1, panel

    single = [line.strip("│ ") for line in _render(dict(engine.status()), 120)
              if line.startswith("│")]
    assert single[0].startswith("host "), single  # one process: the host budget, as before
    assert not any("node" in line or "head" in line for line in single), single
