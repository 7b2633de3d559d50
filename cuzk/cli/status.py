"""``cuzk status``: a live terminal view of the engine, like ``nvidia-smi`` / ``htop``.

Everything shown comes from one ``GET /v1/status`` snapshot per frame, in the shape
``cuzk.protocol.StatusInfo`` defines. Worker busy % in the live view is the change in each
worker's busy-seconds counter between two frames divided by the time between them (exact, not
a sample of a 0/1 flag); ``--once`` has one snapshot and shows busy time over the engine's
uptime instead.

Job ids and proof kinds are shown in full at every width: a table that does not fit drops
its least useful columns, and when even that does not fit each row is stacked into lines.
"""

from __future__ import annotations

import argparse
import io
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from cuzk import __version__
from cuzk.cli._http import CliError, add_server_argument, make_client, request
from cuzk.protocol import (
    ACTIVE_PHASES,
    TERMINAL_STATES,
    ClusterWorkerInfo,
    JobInfo,
    MemoryBudgetInfo,
    StatusInfo,
    WorkerInfo,
)

PHASE_HEADERS = {
    "queued_synthesis": "synth queue",
    "waiting_memory": "mem wait",
    "synthesizing": "synth",
    "queued_gpu": "gpu queue",
    "proving": "proving",
    "finalizing": "finalize",
}
MAX_JOB_ROWS = 12
STATE_STYLE = {
    "proving": "bold green",
    "idle": "dim",
    "unreachable": "bold red",
    "queued": "yellow",
    "running": "cyan",
    "succeeded": "green",
    "failed": "bold red",
    "cancelled": "magenta",
}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "status",
        help="live view of workers, partitions, jobs and memory",
        description="A live terminal view of a running cuzk server: GPU workers (state, job,"
        " partition, busy %%), partitions by phase, jobs, the memory budget and resident"
        " proving keys. Ctrl-C quits.",
    )
    add_server_argument(p)
    p.add_argument("--once", action="store_true", help="print one frame and exit")
    p.add_argument(
        "--json", action="store_true", help="print the raw status snapshot as JSON and exit"
    )
    p.add_argument("--interval", type=float, default=1.0, metavar="SECONDS", help="refresh period")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    console = Console()
    with make_client(args.server, timeout=10.0) as client:
        try:
            if args.json:
                print(json.dumps(request(client, "GET", "/v1/status"), indent=2))
                return 0
            if args.once:
                console.print(frame(client, console.width))
                return 0
            live(client, console, max(0.1, args.interval))
        except CliError as e:
            Console(stderr=True).print(f"[bold red]cuzk status:[/] {e}", highlight=False)
            return 1
    return 0


def frame(client: httpx.Client, width: int = 120) -> RenderableType:
    """One frame from a fresh snapshot (raises CliError when the server cannot be read)."""
    snapshot: StatusInfo = request(client, "GET", "/v1/status")
    return render(snapshot, server=str(client.base_url), width=width)


def live(client: httpx.Client, console: Console, interval: float) -> None:
    previous: tuple[float, StatusInfo] | None = None
    with Live(console=console, screen=False, auto_refresh=False, transient=False) as view:
        try:
            while True:
                try:
                    snapshot: StatusInfo = request(client, "GET", "/v1/status")
                    now = time.monotonic()
                    view.update(
                        render(snapshot, server=str(client.base_url), previous=previous,
                               width=console.width),
                        refresh=True,
                    )
                    previous = (now, snapshot)
                except CliError as e:
                    # Keep watching: a restarting server comes back into view by itself.
                    view.update(
                        Panel(Text(str(e), style="bold red"), title="cuzk status"),
                        refresh=True,
                    )
                    previous = None
                time.sleep(interval)
        except KeyboardInterrupt:
            pass


# --------------------------------------------------------------------------- formatting


def human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def human_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    s = max(0.0, float(s))
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(int(s), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def _bar(fraction: float, width: int = 10) -> Text:
    fraction = min(1.0, max(0.0, fraction))
    filled = round(fraction * width)
    style = "green" if fraction < 0.8 else "yellow" if fraction < 0.95 else "red"
    return Text("█" * filled, style=style) + Text("░" * (width - filled), style="dim")


# --------------------------------------------------------------------------- fitting tables


@dataclass(frozen=True)
class Column:
    header: str
    right: bool = False
    drop: int = 0  # 0: never dropped; otherwise dropped in this order (1 first) when narrow
    lead: bool = False  # stacked rows: on a line of its own (ids and proof kinds)


def fitted(
    title: str,
    columns: Sequence[Column],
    rows: Sequence[dict[str, str | Text]],
    width: int,
    caption: str | None = None,
) -> RenderableType:
    """A table that fits ``width`` without cutting any cell: drop columns (``Column.drop``
    order) until it fits; if even the essential ones do not, stack each row into lines."""
    cols = list(columns)
    while True:
        table = _table(title, cols, rows, caption)
        if _natural_width(table) <= width:
            return table
        droppable = [c for c in cols if c.drop]
        if not droppable:
            break
        cols.remove(min(droppable, key=lambda c: c.drop))
    return _stacked(title, list(columns), rows, width, caption)


_MEASURE = Console(width=100_000, file=io.StringIO(), color_system=None)


def _natural_width(table: Table) -> int:
    """The width the table needs to show every cell whole (what rich would measure)."""
    return Measurement.get(_MEASURE, _MEASURE.options, table).maximum


def _table(
    title: str, cols: Sequence[Column], rows: Sequence[dict[str, str | Text]],
    caption: str | None,
) -> Table:
    t = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", padding=(0, 1),
              pad_edge=False, caption=caption, caption_justify="left")
    for c in cols:
        t.add_column(c.header, justify="right" if c.right else "left", no_wrap=True)
    for r in rows:
        t.add_row(*[r.get(c.header, "") for c in cols])
    return t


def _stacked(
    title: str, cols: Sequence[Column], rows: Sequence[dict[str, str | Text]], width: int,
    caption: str | None,
) -> RenderableType:
    """Each row as lines: the first columns (ids, kinds) alone on a line each, the rest as
    ``header value`` pairs packed into lines no wider than ``width``."""
    lines: list[Text] = [Text(title, style="italic")]
    lead = [c for c in cols if c.lead]
    rest = [c for c in cols if not c.lead]
    for r in rows:
        for c in lead:
            value = r.get(c.header, "")
            if value not in ("", "-"):
                lines.append(Text(value) if isinstance(value, str) else value.copy())
        line = Text("  ")
        for c in rest:
            value = r.get(c.header, "")
            piece = Text(f"{c.header} ", style="dim") + (
                Text(value) if isinstance(value, str) else value)
            if line.cell_len > 2 and line.cell_len + 2 + piece.cell_len > width:
                lines.append(line)
                line = Text("  ")
            if line.cell_len > 2:
                line.append("  ")
            line.append_text(piece)
        if line.cell_len > 2:
            lines.append(line)
    if not rows:
        lines.append(Text("(none)", style="dim"))
    if caption:
        lines.append(Text(caption, style="dim"))
    for line in lines:
        # A name wider than the terminal (a 56-character Ray node id at 40 columns) is folded
        # onto the next lines whole, never cut; everything else stays on one line.
        line.no_wrap = line.cell_len <= width
        line.overflow = "fold"
    return Group(*lines, Text(""))


# --------------------------------------------------------------------------- sections


def _busy_fraction(
    worker: WorkerInfo, snapshot: StatusInfo, previous: tuple[float, StatusInfo] | None,
    now: float,
) -> float | None:
    busy = worker["busy_seconds"]
    if previous is not None:
        t0, old = previous
        for w in old["workers"]:
            if w["id"] == worker["id"] and now > t0:
                return min(1.0, max(0.0, (busy - w["busy_seconds"]) / (now - t0)))
    uptime = snapshot["uptime_s"]
    return min(1.0, busy / uptime) if uptime > 0 else None


def _workers(
    snapshot: StatusInfo, previous: tuple[float, StatusInfo] | None, now: float, width: int
) -> RenderableType:
    columns = [
        Column("worker", lead=True), Column("job", lead=True),
        Column("proof kind", lead=True), Column("state"),
        Column("part", right=True), Column("busy", drop=4), Column("device", drop=3),
        Column("lease", right=True, drop=2), Column("busy time", right=True, drop=1),
        Column("proven", right=True, drop=1),
    ]
    rows = []
    for w in snapshot["workers"]:
        frac = _busy_fraction(w, snapshot, previous, now)
        state = "paused" if w["paused"] and w["state"] == "idle" else w["state"]
        busy = "-" if frac is None else f"{frac * 100:.0f}%"
        rows.append({
            "worker": w["id"],
            "job": w["job_id"] or "-",
            "proof kind": w["proof_kind"] or "-",
            "state": Text(state, style=STATE_STYLE.get(w["state"], "")),
            "part": "-" if w["partition"] is None else str(w["partition"]),
            "busy": (_bar(frac, 8) + Text(f" {busy:>4}")) if frac is not None else Text(busy),
            "device": w["device"],
            "lease": human_seconds(w["lease_age_seconds"]) if w["state"] == "proving" else "-",
            "busy time": human_seconds(w["busy_seconds"]),
            "proven": str(w["partitions_proven"]),
        })
    return fitted("GPU workers", columns, rows, width)


def _nodes(snapshot: StatusInfo, width: int) -> RenderableType | None:
    """Cluster nodes (``cuzk serve --cluster``): one row per worker actor, as it answered
    (``unreachable`` when it did not), with its node's ledger in the head."""
    nodes = snapshot.get("nodes") or []
    if not nodes:
        return None
    columns = [
        Column("node", lead=True), Column("worker", lead=True), Column("role"),
        Column("state"), Column("job", lead=True), Column("part", right=True, drop=2),
        Column("reserved", right=True, drop=1), Column("ledger", right=True, drop=1),
    ]
    rows: list[dict[str, str | Text]] = []
    for n in nodes:
        res = n["reservations"]
        workers: list[ClusterWorkerInfo | None] = [*n["workers"]] or [None]
        for w in workers:
            rows.append({
                "node": n["id"],
                "worker": w["id"] if w else "-",
                "role": w["kind"] if w else n["role"],
                "state": Text(w["state"] if w else "-",
                              style=STATE_STYLE.get(w["state"], "") if w else ""),
                "job": (w["job_id"] if w else None) or "-",
                "part": "-" if not w or w["partition"] is None else str(w["partition"]),
                "reserved": human_bytes(res["reserved_bytes"]),
                "ledger": human_bytes(res["budget_bytes"]),
            })
    return fitted("Cluster nodes", columns, rows, width)


def _phases(snapshot: StatusInfo, width: int) -> RenderableType:
    """Unfinished partitions by proof kind and phase (the cuzk_partitions gauge)."""
    counts = snapshot["partition_phases"]
    columns = [Column("proof kind", lead=True)]
    columns += [Column(PHASE_HEADERS[p], right=True) for p in ACTIVE_PHASES]
    columns.append(Column("total", right=True))
    rows: list[dict[str, str | Text]] = []
    totals = dict.fromkeys(ACTIVE_PHASES, 0)
    for kind in sorted(counts):
        by_phase = counts[kind]
        if not any(by_phase.get(p, 0) for p in ACTIVE_PHASES):
            continue
        row: dict[str, str | Text] = {"proof kind": kind}
        for p in ACTIVE_PHASES:
            n = by_phase.get(p, 0)
            totals[p] += n
            row[PHASE_HEADERS[p]] = str(n) if n else "·"
        row["total"] = str(sum(by_phase.get(p, 0) for p in ACTIVE_PHASES))
        rows.append(row)
    total_row: dict[str, str | Text] = {"proof kind": Text("all", style="bold")}
    for p in ACTIVE_PHASES:
        total_row[PHASE_HEADERS[p]] = Text(str(totals[p]), style="bold")
    total_row["total"] = Text(str(sum(totals.values())), style="bold")
    rows.append(total_row)
    return fitted("Partitions by phase", columns, rows, width)


def _jobs(snapshot: StatusInfo, width: int) -> RenderableType:
    jobs: list[JobInfo] = snapshot["jobs"]
    active = [j for j in jobs if j["state"] not in TERMINAL_STATES]
    done = [j for j in jobs if j["state"] in TERMINAL_STATES]
    done.sort(key=lambda j: j["timings"]["finished_at"] or 0.0, reverse=True)
    shown = (active + done)[:MAX_JOB_ROWS]  # active first: all of them count
    columns = [
        Column("job", lead=True), Column("proof kind", lead=True), Column("state"),
        Column("parts", right=True),
        Column("time", right=True, drop=2), Column("priority", drop=1),
    ]
    rows = []
    for j in shown:
        parts = j["partitions"]
        n_done = sum(1 for p in parts if p["phase"] == "done")
        rows.append({
            "job": j["id"],
            "proof kind": j["proof_kind"],
            "state": Text(j["state"], style=STATE_STYLE.get(j["state"], "")),
            "parts": f"{n_done}/{len(parts)}",
            "time": human_seconds(j["timings"]["duration_ms"] / 1000.0),
            "priority": j["priority"],
        })
    hidden = len(jobs) - len(shown)
    caption = f"{hidden} more not shown" if hidden > 0 else None
    return fitted(f"Jobs ({len(active)} active, {len(done)} finished)", columns, rows, width,
                  caption)


def _memory(snapshot: StatusInfo, width: int) -> RenderableType:
    memory = snapshot["memory"]
    budgets: list[MemoryBudgetInfo] = [memory, *memory["devices"].values()]
    bar_width = max(8, min(40, width - 40))
    lines: list[RenderableType] = []
    for b in budgets:
        total, used = b["budget_bytes"], b["reserved_bytes"]
        frac = used / total if total else 0.0
        waiting = len(b["waiters"])
        numbers = f"{human_bytes(used)} / {human_bytes(total)} ({frac * 100:.0f}%)"
        head = Text(f"{b['name']} ") + _bar(frac, bar_width)
        tail = Text(numbers) + (Text(f"  {waiting} waiting", style="bold yellow")
                                if waiting else Text(""))
        if head.cell_len + 1 + tail.cell_len <= width - 4:
            lines.append(head + Text(" ") + tail)
        else:
            lines += [head, tail]
        by = b["reserved_by_consumer"]
        if by:
            lines.append(Text(", ".join(f"{k} {human_bytes(v)}" for k, v in sorted(by.items())),
                              style="dim"))
    return Panel(Group(*lines), title="Memory budget", title_align="left", box=box.ROUNDED,
                 expand=False)


def _keys(snapshot: StatusInfo, width: int) -> RenderableType:
    columns = [
        Column("proof kind", lead=True), Column("host", right=True),
        Column("device", right=True, drop=2),
        Column("in use", right=True), Column("idle", right=True, drop=1),
    ]
    rows = []
    for k in snapshot["keys"]:
        dev = sum(k["device_bytes"].values())
        rows.append({
            "proof kind": k["proof_kind"],
            "host": human_bytes(k["host_bytes"]),
            "device": human_bytes(dev) if dev else "-",
            "in use": str(k["in_use"]),
            "idle": human_seconds(k["idle_s"]),
        })
    if not rows:
        return Text("Resident proving keys: none", style="italic")
    return fitted("Resident proving keys", columns, rows, width)


def _header(snapshot: StatusInfo, server: str, width: int) -> Text:
    parts = [f"cuzk {snapshot['version'] or __version__}", server,
             f"backend {snapshot['backend']}", f"up {human_seconds(snapshot['uptime_s'])}"]
    text = Text(" · ".join(p for p in parts if p), style="bold")
    if snapshot["paused"]:
        text.append("  WORKERS PAUSED", style="bold yellow")
    line = _counters_line(snapshot)
    if line:
        text.append("\n" + line, style="dim")
    return text


def _counters_line(snapshot: StatusInfo) -> str:
    """Totals since start: jobs submitted, completed by outcome, partitions proven."""
    c = snapshot["counters"]
    by_status: dict[str, int] = {}
    for key, n in c["jobs_completed"].items():
        outcome = key.rpartition("/")[2]
        by_status[outcome] = by_status.get(outcome, 0) + n
    parts = [f"submitted {sum(c['jobs_submitted'].values())}"]
    parts += [f"{status} {n}" for status, n in sorted(by_status.items())]
    parts.append(f"partitions proven {sum(c['worker_partitions'].values())}")
    return "jobs: " + " · ".join(parts)


def render(
    snapshot: StatusInfo,
    *,
    server: str = "",
    previous: tuple[float, StatusInfo] | None = None,
    now: float | None = None,
    width: int = 120,
) -> RenderableType:
    """The whole frame for one snapshot; ``previous`` (time, snapshot) gives exact busy %.

    ``width`` is the terminal's: tables drop or stack columns to fit it and never cut a job
    id or a proof kind short.
    """
    now = time.monotonic() if now is None else now
    nodes = _nodes(snapshot, width)
    return Group(
        _header(snapshot, server, width),
        _workers(snapshot, previous, now, width),
        *([nodes] if nodes is not None else []),
        _phases(snapshot, width),
        _memory(snapshot, width),
        _keys(snapshot, width),
        _jobs(snapshot, width),
    )
