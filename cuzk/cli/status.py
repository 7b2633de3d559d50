"""``cuzk status``: a live terminal view of the engine, like ``nvidia-smi`` / ``htop``.

Everything shown comes from one ``GET /v1/status`` snapshot per frame, in the shape
``cuzk.protocol.StatusInfo`` defines. Worker "busy" in the live view is the change in each
worker's busy-seconds counter between two frames divided by the time between them (exact, not
a sample of a 0/1 flag); one snapshot (``--once``, the first live frame) can only show busy
time over the engine's uptime, headed "busy/uptime".

The view is data: :data:`SECTIONS` top to bottom, each table's columns a list of
``cuzk.cli._layout.Column`` whose ``keep`` rank says what leaves first at narrow widths. Job
ids and proof kinds are never cut: they move to a detail line, and one wider than the
terminal wraps with a mark. The live view pages like ``htop`` (``cuzk.cli._pager``).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import sys
import termios
import time
import tty
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.text import Text

from cuzk import __version__
from cuzk.cli._http import CliError, add_server_argument, make_client, request
from cuzk.cli._layout import Column, fit
from cuzk.cli._output import error_console, human_bytes, now_running
from cuzk.cli._pager import Pager, read_keys
from cuzk.protocol import (
    ACTIVE_PHASES,
    TERMINAL_STATES,
    ClusterWorkerInfo,
    JobInfo,
    KeyInfo,
    NodeInfo,
    StatusInfo,
    WorkerInfo,
)

PHASE_HEADERS = {
    "queued_synthesis": "synth queue",
    "waiting_memory": "mem wait",
    "loading_key": "key load",
    "synthesizing": "synth",
    "queued_gpu": "gpu queue",
    "proving": "proving",
    "finalizing": "finalize",
}
MAX_JOB_ROWS = 12


def _phase_header(phase: str) -> str:
    """A short heading for a phase; one added to the protocol shows under its own name."""
    return PHASE_HEADERS.get(phase, phase.replace("_", " "))


STATE_STYLE = {
    "proving": "bold green",
    "idle": "dim",
    "unreachable": "bold red",
    "queued": "yellow",
    "running": "cyan",
    "succeeded": "green",
    "failed": "bold red",
    "cancelled": "magenta",
    "deadline_exceeded": "bold red",
}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "status",
        help="live view of workers, partitions, jobs and memory",
        description="A live terminal view of a running cuzk server: GPU workers (state, job,"
        " partition, busy %), partitions by phase, jobs, the memory budget and resident"
        " proving keys. A view taller than the terminal pages: arrows or j/k scroll, PgUp/PgDn or"
        " space/b page, Home/End or g/G jump; q or Ctrl-C quits.",
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
            error_console().print(f"[bold red]cuzk status:[/] {e}", highlight=False)
            return 1
    return 0


def frame(client: httpx.Client, width: int = 120) -> RenderableType:
    """One frame from a fresh snapshot (raises CliError when the server cannot be read)."""
    snapshot: StatusInfo = request(client, "GET", "/v1/status")
    return render(snapshot, server=str(client.base_url), width=width)


def live(client: httpx.Client, console: Console, interval: float) -> None:
    """Refresh every ``interval`` seconds on the alternate screen; a frame taller than the
    terminal pages (``cuzk.cli._pager``) instead of being cut at its last line."""
    if not console.is_terminal:  # piped: frames one after another, nothing to page
        try:
            while True:
                console.print(_fetch(client, console.width, None)[0])
                time.sleep(interval)
        except KeyboardInterrupt:
            return
    pager = Pager()
    previous: tuple[float, StatusInfo] | None = None
    with _Keys() as keys, Live(console=console, screen=True, auto_refresh=False) as view:
        try:
            while True:
                shown, previous = _fetch(client, console.width, previous)
                next_fetch = time.monotonic() + interval
                while True:
                    width, height = console.size
                    view.update(pager.window(shown, console, width, height), refresh=True)
                    wait = next_fetch - time.monotonic()
                    if wait <= 0:
                        break
                    for key in keys.read(wait):
                        if not pager.press(key):
                            return
        except KeyboardInterrupt:
            pass


def _fetch(
    client: httpx.Client, width: int, previous: tuple[float, StatusInfo] | None
) -> tuple[RenderableType, tuple[float, StatusInfo] | None]:
    """The next frame and the (time, snapshot) the one after compares with."""
    try:
        snapshot: StatusInfo = request(client, "GET", "/v1/status")
    except CliError as e:
        # Keep watching: a restarting server comes back into view by itself.
        return Panel(Text(str(e), style="bold red"), title="cuzk status"), None
    now = time.monotonic()
    shown = render(snapshot, server=str(client.base_url), previous=previous, now=now,
                   width=width)
    return shown, (now, snapshot)


class _Keys:
    """Key presses from the terminal, one at a time as they are typed (cbreak mode: Ctrl-C
    still interrupts); without a terminal on stdin, only the waiting."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._saved: list[Any] | None = None

    def __enter__(self) -> _Keys:
        if sys.stdin.isatty():
            self._fd = sys.stdin.fileno()
            self._saved = termios.tcgetattr(self._fd)
            tty.setcbreak(self._fd)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None and self._saved is not None:
            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)

    def read(self, timeout: float) -> list[str]:
        """Keys typed within ``timeout`` seconds (returns at the first ones)."""
        if self._fd is None:
            time.sleep(timeout)
            return []
        ready, _, _ = select.select([self._fd], [], [], timeout)
        if not ready:
            return []
        return read_keys(os.read(self._fd, 1024).decode(errors="replace"))


# --------------------------------------------------------------------------- formatting


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


# --------------------------------------------------------------------------- frame and sections


@dataclass(frozen=True)
class Frame:
    """What every section renders from: one snapshot (and the one before, in the live view)."""

    snapshot: StatusInfo
    previous: tuple[float, StatusInfo] | None
    now: float
    width: int
    server: str


@dataclass(frozen=True)
class Section:
    """One part of the view, top to bottom in :data:`SECTIONS` order (add one there)."""

    name: str
    render: Callable[[Frame], RenderableType]


@dataclass(frozen=True)
class WorkerRow:
    worker: WorkerInfo
    busy: float | None  # share of time in GPU phases (see ``busy_column``)
    live: bool  # True: over the last refresh; False: since the engine started


def _busy_fraction(
    worker: WorkerInfo, snapshot: StatusInfo, previous: tuple[float, StatusInfo] | None,
    now: float,
) -> tuple[float | None, bool]:
    """(busy share, whether it is the current one): between two frames when there are two,
    else busy time over uptime."""
    busy = worker["busy_seconds"]
    if previous is not None:
        t0, old = previous
        for w in old["workers"]:
            if w["id"] == worker["id"] and now > t0:
                return min(1.0, max(0.0, (busy - w["busy_seconds"]) / (now - t0))), True
    uptime = snapshot["uptime_s"]
    return (min(1.0, busy / uptime) if uptime > 0 else None), False


def _busy_cell(r: WorkerRow) -> Text:
    if r.busy is None:
        return Text("-")
    return _bar(r.busy, 8) + Text(f" {r.busy * 100:>3.0f}%")


def _worker_state(w: WorkerInfo) -> Text:
    state = "paused" if w["paused"] and w["state"] == "idle" else w["state"]
    return Text(state, style=STATE_STYLE.get(w["state"], ""))


# "busy" is the share over the last refresh (live view); a single snapshot can only give busy
# time over the engine's uptime, which has its own heading: one word, one meaning.
BUSY_NOW = "busy"
BUSY_SINCE_START = "busy/uptime"

WORKER_COLUMNS: list[Column[WorkerRow]] = [
    Column("worker", lambda r: r.worker["id"]),
    Column("job", lambda r: r.worker["job_id"] or "-", keep=20, name=True),
    Column("proof kind", lambda r: r.worker["proof_kind"] or "-", keep=10, name=True),
    Column("state", lambda r: _worker_state(r.worker)),
    Column("part", lambda r: "-" if r.worker["partition"] is None
           else str(r.worker["partition"]), right=True),
    Column(BUSY_NOW, _busy_cell),
    Column("device", lambda r: r.worker["device"], keep=60),
    Column("lease", lambda r: human_seconds(r.worker["lease_age_seconds"])
           if r.worker["state"] == "proving" else "-", keep=50, right=True),
    Column("busy time", lambda r: human_seconds(r.worker["busy_seconds"]), keep=40, right=True),
    Column("proven", lambda r: str(r.worker["partitions_proven"]), keep=30, right=True),
]
"""GPU worker table; ``keep`` ranks what leaves first at narrow widths (names move to a detail
line, never away). Worker, state and busy share stay at every width."""


def _workers(f: Frame) -> RenderableType:
    rows = []
    for w in f.snapshot["workers"]:
        frac, live = _busy_fraction(w, f.snapshot, f.previous, f.now)
        rows.append(WorkerRow(w, frac, live))
    columns = WORKER_COLUMNS
    if rows and not all(r.live for r in rows):
        columns = [replace(c, header=BUSY_SINCE_START) if c.header == BUSY_NOW else c
                   for c in columns]
    return Group(*fit("GPU workers", columns, rows, f.width))


@dataclass(frozen=True)
class NodeRow:
    node: NodeInfo
    worker: ClusterWorkerInfo | None  # None: a node with no worker actor (yet)
    first: bool  # the node's first row: the only one that names the node and its ledger


def _node_state(r: NodeRow) -> Text:
    if r.worker is None:
        return Text("-")
    return Text(r.worker["state"], style=STATE_STYLE.get(r.worker["state"], ""))


def _node_cell(cell: Callable[[NodeInfo], str]) -> Callable[[NodeRow], str]:
    """A node's own value on its first row; blank under it, so a node with several workers
    reads as one block rather than the same node repeated."""
    return lambda r: cell(r.node) if r.first else ""


def ledger_text(reserved: int, budget: int) -> str:
    return f"{human_bytes(reserved)} / {human_bytes(budget)}"


NODE_COLUMNS: list[Column[NodeRow]] = [
    Column("node", _node_cell(lambda n: n["id"]), name=True),
    Column("address", _node_cell(lambda n: n["address"]), keep=35, name=True),
    Column("role", _node_cell(lambda n: n["role"]), keep=25),
    Column("worker", lambda r: r.worker["id"] if r.worker else "-", name=True),
    Column("kind", lambda r: r.worker["kind"] if r.worker else "-", keep=15),
    Column("state", _node_state),
    Column("job", lambda r: (r.worker["job_id"] if r.worker else None) or "-", keep=20,
           name=True),
    Column("part", lambda r: "-" if not r.worker or r.worker["partition"] is None
           else str(r.worker["partition"]), keep=30, right=True),
    Column("ledger", _node_cell(lambda n: ledger_text(n["reservations"]["reserved_bytes"],
                                                      n["reservations"]["budget_bytes"])),
           keep=40, right=True),
]
"""Cluster nodes (``cuzk serve --cluster``): a block per node, its id, address, role and
ledger (reserved / budget, in the head) once, then a row per worker actor as it answered
(``unreachable`` when it did not)."""


def _nodes(f: Frame) -> RenderableType:
    nodes = f.snapshot.get("nodes") or []
    rows: list[NodeRow] = []
    for n in nodes:
        workers: list[ClusterWorkerInfo | None] = [*n["workers"]] or [None]
        rows += [NodeRow(n, w, i == 0) for i, w in enumerate(workers)]
    return Group(*fit("Cluster nodes", NODE_COLUMNS, rows, f.width)) if rows else Group()


@dataclass(frozen=True)
class PhaseRow:
    kind: str | Text
    counts: dict[str, int]
    bold: bool = False


def _count_cell(p: str) -> Callable[[PhaseRow], Text]:
    def cell(r: PhaseRow) -> Text:
        n = sum(r.counts.values()) if p == "total" else r.counts.get(p, 0)
        return Text(str(n), style="bold") if r.bold else Text(str(n) if n else "·")
    return cell


PHASE_COLUMNS: list[Column[PhaseRow]] = [
    Column("proof kind", lambda r: r.kind, keep=10, name=True),
    *(Column(_phase_header(p), _count_cell(p), right=True) for p in ACTIVE_PHASES),
    Column("total", _count_cell("total"), right=True),
]


def _phases(f: Frame) -> RenderableType:
    """Unfinished partitions by proof kind and phase (the cuzk_partitions gauge)."""
    counts = f.snapshot["partition_phases"]
    rows: list[PhaseRow] = []
    totals = dict.fromkeys(ACTIVE_PHASES, 0)
    for kind in sorted(counts):
        by_phase = {p: counts[kind].get(p, 0) for p in ACTIVE_PHASES}
        if not any(by_phase.values()):
            continue
        for p, n in by_phase.items():
            totals[p] += n
        rows.append(PhaseRow(kind, by_phase))
    rows.append(PhaseRow(Text("all", style="bold"), totals, bold=True))
    return Group(*fit("Partitions by phase", PHASE_COLUMNS, rows, f.width,
                     details_above=True))


JOB_COLUMNS: list[Column[JobInfo]] = [
    Column("job", lambda j: j["id"], keep=20, name=True),
    Column("proof kind", lambda j: j["proof_kind"], keep=10, name=True),
    Column("state", lambda j: Text(j["state"], style=STATE_STYLE.get(j["state"], ""))),
    Column("parts", lambda j: "{}/{}".format(
        sum(1 for p in j["partitions"] if p["phase"] == "done"), len(j["partitions"])),
        right=True),
    Column("time", lambda j: human_seconds(j["timings"]["duration_ms"] / 1000.0), keep=40,
           right=True),
    Column("priority", lambda j: j["priority"], keep=30),
    Column("slack", lambda j: slack_cell(j), keep=45, right=True),
    Column("now", lambda j: now_running(j), keep=50),
]


def _jobs(f: Frame) -> RenderableType:
    jobs: list[JobInfo] = f.snapshot["jobs"]
    active = [j for j in jobs if j["state"] not in TERMINAL_STATES]
    done = [j for j in jobs if j["state"] in TERMINAL_STATES]
    done.sort(key=lambda j: j["timings"]["finished_at"] or 0.0, reverse=True)
    shown = (active + done)[:MAX_JOB_ROWS]  # active first: all of them count
    hidden = len(jobs) - len(shown)
    caption = f"{hidden} more not shown" if hidden > 0 else None
    title = f"Jobs ({len(active)} active, {len(done)} finished)"
    return Group(*fit(title, JOB_COLUMNS, shown, f.width, caption))


def slack_cell(job: JobInfo) -> Text:
    """A job's slack against its deadline; ``AT RISK`` when predicted late (or admitted so),
    ``MISSED`` once it missed; "-" without a deadline, "?" while not predicted."""
    d = job.get("deadline")
    if not d:
        return Text("-", style="dim")
    if d["missed"]:
        return Text("MISSED", style="bold red")
    slack = d["slack_s"]
    text = "?" if slack is None else ("-" if slack < 0 else "") + human_seconds(abs(slack))
    if d["at_risk"]:
        return Text(f"{text} AT RISK", style="bold red")
    return Text(text, style="" if slack is not None else "dim")


@dataclass(frozen=True)
class BudgetLine:
    name: str
    reserved: int
    budget: int
    waiting: int = 0
    by_consumer: dict[str, int] = field(default_factory=dict)
    note: str = ""


def _budgets(snapshot: StatusInfo) -> list[BudgetLine]:
    """The budgets to draw. In a cluster the partitions reserve on their node's ledger, so
    those come first, one per node, and the head's own budget (request bodies) is named so:
    shown as "host" it read as an idle machine ("0 B / 21.5 GiB") while the nodes were full."""
    memory, nodes = snapshot["memory"], snapshot.get("nodes") or []
    out = [BudgetLine(f"node {n['address']}", n["reservations"]["reserved_bytes"],
                      n["reservations"]["budget_bytes"]) for n in nodes]
    for b in [memory, *memory["devices"].values()]:
        head = bool(nodes) and b is memory
        out.append(BudgetLine(
            f"head {b['name']}" if head else b["name"], b["reserved_bytes"], b["budget_bytes"],
            len(b["waiters"]), b["reserved_by_consumer"],
            "partitions reserve on their node's ledger" if head else ""))
    parse = memory.get("request_parse")  # absent from a server older than the reserve
    if parse is not None:
        out.append(BudgetLine(parse["name"], parse["reserved_bytes"], parse["budget_bytes"],
                              len(parse["waiters"]), parse["reserved_by_consumer"],
                              "submit bodies being parsed, apart from the budget"))
    return out


def _memory(f: Frame) -> RenderableType:
    width = f.width
    bar_width = max(8, min(40, width - 40))
    lines: list[RenderableType] = []
    budgets = _budgets(f.snapshot)
    name_width = max(len(b.name) for b in budgets)  # the bars start in one column
    for b in budgets:
        frac = b.reserved / b.budget if b.budget else 0.0
        numbers = f"{ledger_text(b.reserved, b.budget)} ({frac * 100:.0f}%)"
        head = Text(f"{b.name.ljust(name_width)} ") + _bar(frac, bar_width)
        tail = Text(numbers) + (Text(f"  {b.waiting} waiting", style="bold yellow")
                                if b.waiting else Text(""))
        if head.cell_len + 1 + tail.cell_len <= width - 4:
            lines.append(head + Text(" ") + tail)
        else:
            lines += [head, tail]
        if b.by_consumer:
            lines.append(Text(", ".join(f"{k} {human_bytes(v)}"
                                        for k, v in sorted(b.by_consumer.items())), style="dim"))
        if b.note:
            lines.append(Text(b.note, style="dim"))
    return Panel(Group(*lines), title="Memory budget", title_align="left", box=box.ROUNDED,
                 expand=False)


KEY_COLUMNS: list[Column[KeyInfo]] = [
    Column("proof kind", lambda k: k["proof_kind"], keep=10, name=True),
    Column("host", lambda k: human_bytes(k["host_bytes"]), right=True),
    Column("device", lambda k: human_bytes(sum(k["device_bytes"].values()))
           if sum(k["device_bytes"].values()) else "-", keep=20, right=True),
    Column("in use", lambda k: str(k["in_use"]), right=True),
    Column("idle", lambda k: human_seconds(k["idle_s"]), keep=30, right=True),
]


def _keys(f: Frame) -> RenderableType:
    if not f.snapshot["keys"]:
        return Text("Resident proving keys: none", style="italic")
    return Group(*fit("Resident proving keys", KEY_COLUMNS, f.snapshot["keys"], f.width,
                     details_above=True))


def _header(f: Frame) -> Text:
    snapshot, server = f.snapshot, f.server
    parts = [f"cuzk {snapshot['version'] or __version__}", server,
             f"backend {snapshot['backend']}", f"up {human_seconds(snapshot['uptime_s'])}"]
    text = Text(" · ".join(p for p in parts if p), style="bold")
    if snapshot["paused"]:
        text.append("  WORKERS PAUSED", style="bold yellow")
    if snapshot.get("not_ready"):  # a server older than this field has none
        text.append(f"\nNOT READY: {snapshot['not_ready']}", style="bold red")
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


SECTIONS: list[Section] = [
    Section("header", _header),
    Section("workers", _workers),
    Section("nodes", _nodes),
    Section("phases", _phases),
    Section("memory", _memory),
    Section("keys", _keys),
    Section("jobs", _jobs),
]
"""The view, top to bottom: a new section is one entry here."""


def render(
    snapshot: StatusInfo,
    *,
    server: str = "",
    previous: tuple[float, StatusInfo] | None = None,
    now: float | None = None,
    width: int = 120,
) -> RenderableType:
    """The whole frame for one snapshot; ``previous`` (time, snapshot) gives the current busy
    share. Every section fits ``width`` and never cuts a job id or a proof kind short."""
    f = Frame(snapshot, previous, time.monotonic() if now is None else now, width, server)
    return Group(*[section.render(f) for section in SECTIONS])
