"""``cuzk status`` never cuts a proof kind or a job id, at any terminal width from 40 up.

Names are at most 64 characters: one that fits the width is shown whole on one line; one that
cannot is broken across lines, each broken line ending in the wrap mark, and never shortened.
"""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console
from rich.text import Text

from cuzk.cli import status as status_cmd
from cuzk.cli._layout import WRAP_MARK, Column
from tests._doubles import make_test_engine

LONG_KIND = "snap-update-32gib-sealed-" + "x" * 29 + "-custom.v2"  # the longest name allowed
OTHER_LONG = "window-post-" + "y" * 52
KINDS = {
    LONG_KIND: (2, "normal"),
    OTHER_LONG: (1, "high"),
    "winning-post": (1, "critical"),
    "porep-c2": (3, "normal"),
}
WIDTHS = [40, 50, 64, 80, 200]


@pytest.fixture(scope="module")
def busy_snapshot() -> dict:
    """A real snapshot: workers mid-lease on two long kinds, partitions in several phases, jobs
    running and finished, keys resident."""
    assert len(LONG_KIND) == 64 and len(OTHER_LONG) == 64
    engine, prover, _ = make_test_engine(KINDS, memory_budget_bytes=4_400, synthesis_threads=1)
    with engine:
        done = engine.submit("winning-post", [{"tag": "w"}])
        assert engine.wait(done.id, 5).state == "succeeded"
        gates = [prover.hold("gpu", "L0"), prover.hold("gpu", "o")]
        engine.submit(LONG_KIND, [{"tag": "L0"}, {"tag": "L1"}])
        engine.submit(OTHER_LONG, [{"tag": "o"}])
        assert all(g.wait_entered() for g in gates)
        engine.submit("porep-c2", [{"tag": f"p{i}"} for i in range(3)])
        snapshot = json.loads(json.dumps(engine.status()))  # what the CLI receives
        for g in gates:
            g.release()
    return snapshot


def _render(snapshot: dict, width: int, **kw: object) -> str:
    console = Console(record=True, width=width, file=io.StringIO(), color_system=None)
    console.print(status_cmd.render(snapshot, server="http://127.0.0.1:9820", width=width, **kw))
    return console.export_text()


def _cells(line: str) -> list[str]:
    """A table line's cells (columns are two spaces apart; a header may hold one space)."""
    return re.split(r" {2,}", line.strip())


def _names(snapshot: dict) -> tuple[set[str], set[str]]:
    kinds = {w["proof_kind"] for w in snapshot["workers"] if w["proof_kind"]}
    kinds |= {j["proof_kind"] for j in snapshot["jobs"]}
    ids = {j["id"] for j in snapshot["jobs"]}
    ids |= {w["job_id"] for w in snapshot["workers"] if w["job_id"]}
    return kinds, ids


@pytest.mark.parametrize("width", WIDTHS)
def test_no_proof_kind_or_job_id_is_cut(busy_snapshot: dict, width: int) -> None:
    text = _render(busy_snapshot, width)
    lines = text.splitlines()
    assert "…" not in text and "..." not in text
    assert all(len(line.rstrip()) <= width for line in lines), text
    kinds, ids = _names(busy_snapshot)
    assert {LONG_KIND, OTHER_LONG, "winning-post"} <= kinds
    assert len(ids) == 4 and all(len(i) == 32 for i in ids)
    whole = {tok for line in lines for tok in line.replace("│", " ").split()}
    # A broken name continues on the next line: joining at the marks gives it back whole.
    joined = re.sub(re.escape(WRAP_MARK) + r" *\n *", "", text)
    rejoined = {tok for line in joined.splitlines() for tok in line.replace("│", " ").split()}
    for name in kinds | ids:
        if len(name) <= width:
            assert name in whole, f"{name!r} fits {width} columns but is cut:\n{text}"
        else:
            assert name not in whole and name in rejoined, f"{name!r} at {width}:\n{text}"
    marked = [line for line in lines if line.rstrip().endswith(WRAP_MARK)]
    assert bool(marked) == (width < 64), text  # only names that cannot fit are broken
    # Every broken piece is a prefix of a name, so nothing is silently dropped between lines.
    for line in marked:
        piece = line.rstrip()[: -len(WRAP_MARK)].split()[-1]
        assert any(name.startswith(piece) for name in kinds), line


@pytest.mark.parametrize("width", [80, 120])
def test_worker_state_and_busy_share_stay_at_80_columns(busy_snapshot: dict, width: int) -> None:
    """With jobs running and 64-character names, every worker column stays in the table at
    80 columns: the names move to a detail line under the row instead."""
    current = json.loads(json.dumps(busy_snapshot))
    earlier = json.loads(json.dumps(busy_snapshot))
    for now_w, old_w in zip(current["workers"], earlier["workers"], strict=True):
        now_w["busy_seconds"], old_w["busy_seconds"] = 3.0, 2.0
    text = _render(current, width, previous=(10.0, earlier), now=12.0)
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("GPU workers"))
    header = _cells(lines[head + 1])
    for column in ("worker", "state", "part", "busy", "device", "lease", "busy time", "proven"):
        assert column in header, (column, header)
    names = {w["id"] for w in current["workers"]}  # cpu-N on the test backend, gpu-N on a GPU
    rows = [line.split() for line in lines if line.split()[:1] and line.split()[0] in names]
    assert len(rows) == 2 and all("proving" in r for r in rows), text
    assert all("50%" in r for r in rows), rows  # 1 s busy over 2 s


def test_once_labels_busy_time_over_uptime_apart_from_the_current_share(
    busy_snapshot: dict,
) -> None:
    """"busy" is the share over the last refresh (live view); one snapshot shows busy time over
    the engine's uptime under its own heading."""
    once = _render(busy_snapshot, 200)
    header = _cells(next(line for line in once.splitlines() if line.startswith("worker")))
    assert status_cmd.BUSY_SINCE_START in header and "busy" not in header
    live = _render(busy_snapshot, 200, previous=(10.0, busy_snapshot), now=12.0)
    header = _cells(next(line for line in live.splitlines() if line.startswith("worker")))
    assert "busy" in header and status_cmd.BUSY_SINCE_START not in header


def test_columns_and_sections_are_data(
    busy_snapshot: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new column is one entry in a column list, shown when it fits and the first to leave
    by its keep rank; a new section is one entry in SECTIONS."""
    # A column of its own name: the real "slack" column (deadlines) stays in the list.
    extra = Column("extra", lambda j: "12s", keep=5, right=True)
    assert all(c.keep > extra.keep for c in status_cmd.JOB_COLUMNS)
    monkeypatch.setattr(status_cmd, "JOB_COLUMNS", [*status_cmd.JOB_COLUMNS, extra])
    nodes = status_cmd.Section("nodes", lambda f: Text(f"Nodes: {len(f.snapshot['workers'])}"))
    monkeypatch.setattr(status_cmd, "SECTIONS", [*status_cmd.SECTIONS, nodes])

    def jobs_header(width: int) -> list[str]:
        lines = _render(busy_snapshot, width).splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("Jobs ("))
        return _cells(lines[at + 1])

    wide = jobs_header(200)
    assert wide[-1] == "extra" and "slack" in wide, wide
    narrow = jobs_header(60)
    assert "extra" not in narrow and {"state", "parts"} <= set(narrow), narrow
    # The lowest keep rank leaves first: at the widest width one column short, only it is gone.
    full = next(w for w in range(200, 40, -1) if "extra" not in jobs_header(w))
    assert set(jobs_header(full)) == set(wide) - {"extra"}, (full, jobs_header(full))
    assert _render(busy_snapshot, 80).rstrip().splitlines()[-1] == "Nodes: 2"


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
    folded = "".join(line.strip().removesuffix(WRAP_MARK) for line in text.splitlines())  # a
    # name wider than the terminal wraps, whole, its lines marked
    names = {n["id"] for n in snap["nodes"]} | {w["id"] for n in snap["nodes"]
                                                for w in n["workers"]}
    missing = {n for n in names if n not in tokens and (len(n) <= width or n not in folded)}
    assert not missing, f"cut or missing at {width} columns: {missing}\n{text}"
    assert "unreachable" in tokens

