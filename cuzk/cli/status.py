"""``cuzk status``: a live terminal view of the engine, like ``nvidia-smi`` / ``htop``.

Everything shown comes from one ``GET /v1/status`` snapshot per frame. Worker busy % in the
live view is the change in each worker's busy-seconds counter between two frames divided by
the time between them (so it is exact, not a sample of a 0/1 flag); ``--once`` has only one
snapshot and shows busy time over the engine's uptime instead.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from typing import Any

import httpx
from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from cuzk import __version__
from cuzk.cli._http import CliError, add_server_argument, make_client, request
from cuzk.protocol import ACTIVE_PHASES

PHASE_HEADERS = {
    "queued_synthesis": "synth queue",
    "waiting_memory": "mem wait",
    "synthesizing": "synth",
    "queued_gpu": "gpu queue",
    "proving": "proving",
    "finalizing": "finalize",
}
TERMINAL_STATES = ("succeeded", "failed", "cancelled")
MAX_JOB_ROWS = 12
STATE_STYLE = {
    "proving": "bold green",
    "idle": "dim",
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
    with make_client(args.server, timeout=10.0, token_file=args.token_file) as client:
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
    snapshot = request(client, "GET", "/v1/status")
    return render(snapshot, server=str(client.base_url), width=width)


def live(client: httpx.Client, console: Console, interval: float) -> None:
    previous: tuple[float, dict] | None = None
    with Live(console=console, screen=False, auto_refresh=False, transient=False) as view:
        try:
            while True:
                try:
                    snapshot = request(client, "GET", "/v1/status")
                    now = time.monotonic()
                    view.update(
                        render(
                            snapshot,
                            server=str(client.base_url),
                            previous=previous,
                            width=console.width,
                        ),
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


# --------------------------------------------------------------------------- rendering


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


def _uptime(snapshot: dict) -> float | None:
    for key in ("uptime_s", "uptime_seconds", "uptime"):
        value = snapshot.get(key)
        if isinstance(value, (int, float)):
            return float(value)
    return None


def _busy_fraction(
    worker: dict, snapshot: dict, previous: tuple[float, dict] | None, now: float
) -> float | None:
    busy = worker.get("busy_seconds")
    if not isinstance(busy, (int, float)):
        return None
    if previous is not None:
        t0, old = previous
        for w in old.get("workers") or []:
            if w.get("id") == worker.get("id") and isinstance(w.get("busy_seconds"), (int, float)):
                dt = now - t0
                if dt > 0:
                    return min(1.0, max(0.0, (busy - w["busy_seconds"]) / dt))
    uptime = _uptime(snapshot)
    if uptime:
        return min(1.0, busy / uptime)
    return None


def _workers_table(
    snapshot: dict, previous: tuple[float, dict] | None, now: float, compact: bool
) -> Table:
    """One row per GPU worker; ``compact`` (narrow terminals) keeps what fits in 80 columns."""
    workers = snapshot.get("workers") or []
    t = Table(
        title="GPU workers",
        box=box.SIMPLE_HEAD,
        title_justify="left",
        padding=(0, 1),
        collapse_padding=compact,
        pad_edge=not compact,
    )
    columns: list[tuple[str, dict[str, Any]]] = [
        ("worker", {"no_wrap": True, "min_width": 5}),
        ("device", {"no_wrap": True, "min_width": 6}),
        ("state", {"no_wrap": True, "min_width": 7}),
        ("job", {"no_wrap": True, "min_width": 32}),  # ids are shown in full, never cut
        ("proof kind", {"no_wrap": True}),
        ("part", {"justify": "right", "no_wrap": True, "min_width": 4}),
        ("busy", {"no_wrap": True}),
        ("busy time", {"justify": "right", "no_wrap": True}),
        ("proven", {"justify": "right", "no_wrap": True, "min_width": 6}),
    ]
    if compact:
        columns = [c for c in columns if c[0] not in ("device", "busy time", "proven")]
    for name, kw in columns:
        t.add_column(name, **kw)
    for w in workers:
        state = str(w.get("state", "?"))
        frac = _busy_fraction(w, snapshot, previous, now)
        part = w.get("partition")
        if frac is None:
            busy = Text("-")
        elif compact:
            busy = Text(f"{frac * 100:.0f}%")
        else:
            busy = _bar(frac, 8) + Text(f" {frac * 100:3.0f}%")
        cells: dict[str, Any] = {
            "worker": str(w.get("id", "?")),
            "device": str(w.get("device", "")),
            "state": Text(state, style=STATE_STYLE.get(state, "")),
            "job": str(w.get("job_id") or "-"),
            "proof kind": str(w.get("proof_kind") or "-"),
            "part": "-" if part is None else str(part),
            "busy": busy,
            "busy time": human_seconds(w.get("busy_seconds")),
            "proven": str(w.get("partitions_proven", "-")),
        }
        t.add_row(*[cells[name] for name, _ in columns])
    if not workers:
        t.add_row("(no workers)", *[""] * (len(columns) - 1))
    return t


def _partitions(snapshot: dict) -> list[tuple[str, str]]:
    """(proof_kind, phase) for every partition the snapshot knows, wherever it lists them."""
    out: list[tuple[str, str]] = []
    parts = snapshot.get("partitions")
    if isinstance(parts, list) and parts:
        for p in parts:
            if isinstance(p, dict):
                out.append((str(p.get("proof_kind", "?")), str(p.get("phase", "?"))))
        return out
    for job in snapshot.get("jobs") or []:
        for p in job.get("partitions") or []:
            if isinstance(p, dict):
                out.append((str(job.get("proof_kind", "?")), str(p.get("phase", "?"))))
    return out


def _phases_table(snapshot: dict) -> Table:
    counts = Counter(_partitions(snapshot))
    kinds = sorted({k for k, phase in counts if phase in ACTIVE_PHASES})
    t = Table(title="Partitions by phase", box=box.SIMPLE_HEAD, title_justify="left")
    t.add_column("proof kind")
    for phase in ACTIVE_PHASES:
        t.add_column(PHASE_HEADERS[phase], justify="right")
    t.add_column("total", justify="right")
    totals = [0] * len(ACTIVE_PHASES)
    for kind in kinds:
        row = [counts.get((kind, phase), 0) for phase in ACTIVE_PHASES]
        totals = [a + b for a, b in zip(totals, row, strict=True)]
        t.add_row(kind, *[str(n) if n else "·" for n in row], str(sum(row)))
    t.add_row(
        Text("all", style="bold"),
        *[Text(str(n), style="bold") for n in totals],
        Text(str(sum(totals)), style="bold"),
    )
    return t


def _jobs_table(snapshot: dict, compact: bool) -> Table:
    jobs = [j for j in snapshot.get("jobs") or [] if isinstance(j, dict)]
    active = [j for j in jobs if j.get("state") not in TERMINAL_STATES]
    done = [j for j in jobs if j.get("state") in TERMINAL_STATES]
    # Active jobs first (all of them count), then the most recently finished.
    done.sort(key=lambda j: (j.get("timings") or {}).get("finished_at") or 0, reverse=True)
    shown = (active + done)[:MAX_JOB_ROWS]
    title = f"Jobs ({len(active)} active, {len(done)} finished)"
    t = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    t.add_column("job", no_wrap=True, min_width=32)
    t.add_column("proof kind", no_wrap=True)
    if not compact:
        t.add_column("priority", no_wrap=True)
    t.add_column("state", no_wrap=True)
    t.add_column("parts", justify="right", no_wrap=True)
    t.add_column("time", justify="right", no_wrap=True)
    for j in shown:
        parts = j.get("partitions") or []
        n_done = sum(1 for p in parts if isinstance(p, dict) and p.get("phase") == "done")
        state = str(j.get("state", "?"))
        ms = (j.get("timings") or {}).get("duration_ms")
        row: list[Any] = [str(j.get("id", "?")), str(j.get("proof_kind", "?"))]
        if not compact:
            row.append(str(j.get("priority", "")))
        row += [
            Text(state, style=STATE_STYLE.get(state, "")),
            f"{n_done}/{len(parts)}",
            human_seconds(ms / 1000.0) if isinstance(ms, (int, float)) else "-",
        ]
        t.add_row(*row)
    if len(active) + len(done) > len(shown):
        t.caption = f"{len(active) + len(done) - len(shown)} more not shown"
    return t


def _budgets(snapshot: dict) -> list[dict]:
    memory = snapshot.get("memory")
    if isinstance(memory, dict) and "budget_bytes" in memory:
        # The host budget, plus one per GPU device under "devices".
        devices = memory.get("devices")
        out = [memory]
        if isinstance(devices, dict):
            out += [{"name": k, **v} for k, v in devices.items() if isinstance(v, dict)]
        return out
    if isinstance(memory, dict):
        out = []
        for name, value in memory.items():
            if isinstance(value, dict) and "budget_bytes" in value:
                out.append({"name": name, **value})
            elif isinstance(value, list):
                out.extend(v for v in value if isinstance(v, dict) and "budget_bytes" in v)
        return out
    if isinstance(memory, list):
        return [m for m in memory if isinstance(m, dict)]
    return []


def _memory_panel(snapshot: dict) -> RenderableType:
    rows: list[RenderableType] = []
    grid = Table.grid(padding=(0, 1))
    grid.add_column("name", no_wrap=True)
    grid.add_column("bar", no_wrap=True)
    grid.add_column("numbers", no_wrap=True)
    for b in _budgets(snapshot):
        total = b.get("budget_bytes") or 0
        used = b.get("reserved_bytes") or 0
        waiters = b.get("waiters")
        n_wait = len(waiters) if isinstance(waiters, list) else int(waiters or 0)
        frac = used / total if total else 0.0
        grid.add_row(
            str(b.get("name", "memory")),
            _bar(frac, width=40),
            f"{human_bytes(used)} / {human_bytes(total)} ({frac * 100:.0f}%)"
            + (f"  [bold yellow]{n_wait} waiting[/]" if n_wait else ""),
        )
        by = b.get("reserved_by_consumer") or {}
        if by:
            parts = ", ".join(f"{k} {human_bytes(v)}" for k, v in sorted(by.items()))
            grid.add_row("", Text(parts, style="dim"), "")
    rows.append(grid)
    return Panel(
        Group(*rows), title="Memory budget", title_align="left", box=box.ROUNDED, expand=False
    )


def _keys_table(snapshot: dict) -> Table:
    keys = snapshot.get("keys") or []
    t = Table(title="Resident proving keys", box=box.SIMPLE_HEAD, title_justify="left")
    t.add_column("proof kind")
    t.add_column("host", justify="right")
    t.add_column("device", justify="right")
    t.add_column("in use", justify="right")
    t.add_column("idle", justify="right")
    now = time.time()
    for k in keys:
        if not isinstance(k, dict):
            continue
        dev = k.get("device_bytes")
        dev_bytes = sum(dev.values()) if isinstance(dev, dict) else dev
        idle = k.get("idle_s")
        if not isinstance(idle, (int, float)):
            last = k.get("last_used")
            # last_used may be a monotonic reading from the server: only trust wall times.
            idle = now - last if isinstance(last, (int, float)) and 1e9 < last <= now else None
        t.add_row(
            str(k.get("proof_kind", "?")),
            human_bytes(k.get("host_bytes")),
            human_bytes(dev_bytes) if dev_bytes else "-",
            str(k.get("in_use", "-")),
            human_seconds(idle) if idle is not None else "-",
        )
    if not keys:
        t.add_row("(none resident)", "", "", "", "")
    return t


def _header(snapshot: dict, server: str) -> Text:
    parts = [f"cuzk {snapshot.get('version') or __version__}", server]
    backend = snapshot.get("backend")
    if backend:
        parts.append(f"backend {backend}")
    uptime = _uptime(snapshot)
    if uptime is not None:
        parts.append(f"up {human_seconds(uptime)}")
    text = Text(" · ".join(parts), style="bold")
    if snapshot.get("paused") or snapshot.get("workers_paused"):
        text.append("  WORKERS PAUSED", style="bold yellow")
    line = _counters_line(snapshot.get("counters"))
    if line:
        text.append("\n" + line, style="dim")
    return text


def _total(value: Any) -> int | None:
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, dict):
        return sum(int(v) for v in value.values() if isinstance(v, (int, float)))
    return None


def _counters_line(counters: Any) -> str:
    """Totals since start: jobs submitted and completed by status (keys "<kind>/<status>")."""
    if not isinstance(counters, dict):
        return ""
    parts = []
    submitted = _total(counters.get("jobs_submitted"))
    if submitted is not None:
        parts.append(f"submitted {submitted}")
    completed = counters.get("jobs_completed")
    if isinstance(completed, dict):
        by_status: Counter[str] = Counter()
        for key, n in completed.items():
            if isinstance(n, (int, float)):
                by_status[str(key).rpartition("/")[2]] += int(n)
        parts += [f"{status} {n}" for status, n in sorted(by_status.items())]
    proven = _total(counters.get("worker_partitions"))
    if proven is not None:
        parts.append(f"partitions proven {proven}")
    return "jobs: " + " · ".join(parts) if parts else ""


def render(
    snapshot: dict,
    *,
    server: str = "",
    previous: tuple[float, dict] | None = None,
    now: float | None = None,
    width: int = 120,
) -> RenderableType:
    """The whole frame for one snapshot; ``previous`` (time, snapshot) gives exact busy %.

    ``width`` is the terminal's: under 110 columns the tables drop their least useful columns
    rather than cutting job ids short.
    """
    now = time.monotonic() if now is None else now
    compact = width < 110
    return Group(
        _header(snapshot, server),
        _workers_table(snapshot, previous, now, compact),
        _phases_table(snapshot),
        _memory_panel(snapshot),
        _keys_table(snapshot),
        _jobs_table(snapshot, compact),
    )
