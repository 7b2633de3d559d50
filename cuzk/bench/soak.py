"""The soak bench (``cuzk bench soak``): a steady mixed load through a real ``cuzk serve``,
watching for leaks.

The bench starts the server as a child process (so what it samples is the server alone), with a
fresh bearer token and a short header deadline, and drives it for ``--minutes`` with:

- proof jobs (the bundled sample input), each long-polled to its end and expected to succeed;
- jobs cancelled right after submission, expected to end cancelled (or succeeded, if they won
  the race);
- a steady fraction of bad requests (malformed JSON, unknown kinds and jobs, non-field-element
  signals, oversize bodies, missing or wrong tokens), each expected to get its exact 4xx;
- slow clients trickling request headers, expected to be cut off by the header deadline.

Every few seconds it samples the server process's RSS, open file descriptors and threads (from
/proc) and its open spans (``/v1/status``). The first half of the load is warm-up: key loading,
and the allocators (glibc's arenas, Python's object arenas) growing to the load's working set.
Measured here: in 15-minute runs RSS rose 7-10 MiB over the first five to six minutes and then
held, and a 45-minute run (11,000 jobs) rose 4.8 MiB per hour after that; a 20% warm-up judged
the end of that rise as growth. Over the second half, a least-squares line through each series
gives its growth per hour of load.
A series counts as growing when the line rises over the measured window by more than its noise:
twice the standard deviation of the samples around the line, or a floor (RSS 4 MiB, 2 fds,
2 threads, 4 spans: the allocator's and the load's granularity), whichever is larger.
At the end the load stops, every accepted job must be found in its expected terminal state (a
job not found or not finished is *lost*), and no span may stay open.

``run_soak`` returns a ``Soak`` (its figures, and whether the run ended well);
``cuzk.cli.bench_soak`` prints it.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import secrets
import selectors
import socket
import statistics
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from cuzk.bench import BenchFailed, Echo, quiet
from cuzk.bench.samples import sample_inputs
from cuzk.protocol import TERMINAL_STATES
from cuzk.serve_process import ServeProcess

MAX_MINUTES = 24 * 60
HEADER_TIMEOUT_S = 2.0
WARMUP_FRACTION = 0.5
NOISE_FLOORS = {"rss_mib": 4.0, "fds": 2.0, "threads": 2.0, "spans_open": 4.0}


@dataclass(frozen=True)
class SoakOptions:
    """What ``cuzk bench soak``'s options set (defaults there)."""

    minutes: float
    kind: str
    sample_every: float = 5.0
    jobs_in_flight: int = 2
    slow_clients: int = 20
    bad_per_second: float = 5.0
    retention_jobs: int = 50
    backend: str = "auto"
    keys_dir: Path | None = None  # absolute: the server runs in its own working directory
    seed: int = 0


# --------------------------------------------------------------------------- the server


def _status_field(status: str, name: str) -> int:
    """A number from /proc/<pid>/status (``VmRSS`` in KiB, ``Threads``)."""
    m = re.search(rf"^{name}:\s+(\d+)", status, re.M)
    if m is None:
        raise RuntimeError(f"/proc status has no {name} line")
    return int(m.group(1))


@dataclass
class Server:
    process: ServeProcess
    url: str
    token: str

    def sample(self) -> dict[str, float]:
        pid = self.process.pid
        status = Path(f"/proc/{pid}/status").read_text()
        rss_kib = _status_field(status, "VmRSS")
        threads = _status_field(status, "Threads")
        return {
            "rss_mib": rss_kib / 1024,
            "fds": float(len(os.listdir(f"/proc/{pid}/fd"))),
            "threads": float(threads),
        }


def start_server(options: SoakOptions, journal_dir: Path) -> Server:
    token = secrets.token_urlsafe(24)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUZK_SERVER_")}
    env |= {
        "CUZK_SERVER_LISTEN": "127.0.0.1:0",
        "CUZK_SERVER_AUTH_TOKEN": token,
        "CUZK_SERVER_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S),
        "CUZK_SERVER_MAX_BODY_BYTES": "1MiB",
        "CUZK_ENGINE_BACKEND": options.backend,
        # A throwaway journal: never the operator's, never shared with a running server.
        "CUZK_JOURNAL_PATH": str(journal_dir / "journal.sqlite3"),
        # A short job history: the bounded history fills during the warm-up, so the trend
        # measured after it is not the history filling up.
        "CUZK_JOURNAL_RETENTION_JOBS": str(options.retention_jobs),
    }
    if options.keys_dir:
        env["CUZK_ENGINE_KEYS_DIR"] = str(options.keys_dir)
    process = ServeProcess(env, keep_lines=200)
    url = process.start(timeout=120)
    return Server(process, url, token)


# --------------------------------------------------------------------------- the load


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: Counter[str] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    jobs: dict[str, str] = field(default_factory=dict)  # job id -> expected end ("ok"/"cancel")
    ends: Counter[str] = field(default_factory=Counter)
    seen: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # the end, as polled

    def note(self, what: str) -> None:
        with self.lock:
            self.requests[what] += 1

    def wrong(self, what: str) -> None:
        with self.lock:
            self.unexpected.append(what)
            del self.unexpected[:-50]
            self.requests["unexpected"] += 1


def _bad_requests(kind: str, inputs: dict[str, Any], token: str) -> list[tuple[Any, ...]]:
    """(name, method, path, request kwargs, expected status)."""
    auth = {"Authorization": f"Bearer {token}"}
    bad_signal = dict(inputs)
    bad_signal[next(iter(inputs))] = "9" * 5000
    return [
        ("malformed-json", "POST", "/v1/proofs", {"content": b"{nope", "headers": auth}, 400),
        ("unknown-kind", "POST", "/v1/proofs",
         {"json": {"proof_kind": "no-such-kind", "inputs": [{}]}, "headers": auth}, 404),
        ("bad-signal", "POST", "/v1/proofs",
         {"json": {"proof_kind": kind, "inputs": [bad_signal]}, "headers": auth}, 400),
        ("oversize", "POST", "/v1/proofs",
         {"content": b'{"pad": "' + b"x" * (1 << 20) + b'"}', "headers": auth}, 413),
        ("unknown-job", "GET", "/v1/proofs/0000", {"headers": auth}, 404),
        ("missing-token", "GET", "/v1/status", {}, 401),
        ("wrong-token", "POST", "/v1/proofs",
         {"json": {"proof_kind": kind, "inputs": [inputs]},
          "headers": {"Authorization": "Bearer wrong-token-wrong-token"}}, 401),
        ("bad-wait", "GET", "/v1/proofs/0000", {"params": {"wait": "-1"}, "headers": auth}, 400),
    ]  # fmt: skip


def _job_client(server: Server, kind: str, inputs: dict[str, Any], partitions: int,
                stop: threading.Event, tally: Tally, rng: random.Random) -> None:  # fmt: skip
    headers = {"Authorization": f"Bearer {server.token}"}
    body = {"proof_kind": kind, "inputs": [inputs] * partitions}
    with httpx.Client(base_url=server.url, headers=headers, timeout=120) as client:
        while not stop.is_set():
            cancel = rng.random() < 0.2
            try:
                r = client.post("/v1/proofs", json=body)
                if r.status_code != 202:
                    tally.wrong(f"submit: {r.status_code} {r.text[:200]}")
                    stop.wait(1)
                    continue
                job_id = r.json()["id"]
                with tally.lock:
                    tally.jobs[job_id] = "cancel" if cancel else "ok"
                tally.note("cancel" if cancel else "submit")
                if cancel:
                    r = client.delete(f"/v1/proofs/{job_id}")
                    if r.status_code != 200:
                        tally.wrong(f"cancel {job_id}: {r.status_code} {r.text[:200]}")
                state = ""
                while state not in TERMINAL_STATES and not stop.is_set():
                    r = client.get(f"/v1/proofs/{job_id}", params={"wait": 10})
                    tally.note("long-poll")
                    if r.status_code != 200:
                        tally.wrong(f"poll {job_id}: {r.status_code} {r.text[:200]}")
                        break
                    state = r.json()["state"]
                    if state in TERMINAL_STATES:
                        with tally.lock:
                            tally.seen[job_id] = (state, r.json().get("error"))
            except httpx.HTTPError as e:
                tally.wrong(f"job client: {type(e).__name__}: {e}")
                stop.wait(1)


def _bad_client(server: Server, bad: list[tuple[Any, ...]], per_second: float,
                stop: threading.Event, tally: Tally) -> None:  # fmt: skip
    with httpx.Client(base_url=server.url, timeout=30) as client:
        i = 0
        while not stop.wait(1.0 / per_second):
            name, method, path, kwargs, expected = bad[i % len(bad)]
            i += 1
            try:
                r = client.request(method, path, **kwargs)
            except httpx.HTTPError as e:
                tally.wrong(f"{name}: {type(e).__name__}: {e}")
                continue
            tally.note(f"bad:{name}")
            if r.status_code != expected:
                tally.wrong(f"{name}: expected {expected}, got {r.status_code} {r.text[:200]}")


def _slow_clients(server: Server, n: int, stop: threading.Event, tally: Tally) -> None:
    """Keep ``n`` connections trickling request headers; each must be closed by the server's
    header deadline (plus slack), answered 408."""
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    sel = selectors.DefaultSelector()
    opened: dict[socket.socket, tuple[float, bytearray]] = {}
    limit = HEADER_TIMEOUT_S + 3.0
    last_drip = 0.0
    while not stop.is_set():
        while len(opened) < n:
            s = socket.create_connection((host, int(port)))
            s.setblocking(False)
            s.send(b"GET /v1/status HTTP/1.1\r\nHost: soak\r\n")
            opened[s] = (time.monotonic(), bytearray())
            sel.register(s, selectors.EVENT_READ)
        for key, _ in sel.select(timeout=0.2):
            fileobj = key.fileobj
            assert isinstance(fileobj, socket.socket)
            s = fileobj
            started, got = opened[s]
            try:
                chunk = s.recv(4096)
            except OSError:
                chunk = b""
            if chunk:
                got += chunk
                continue
            took = time.monotonic() - started
            sel.unregister(s)
            s.close()
            del opened[s]
            tally.note("slow-client")
            if not bytes(got).startswith(b"HTTP/1.1 408 ") or took > limit:
                tally.wrong(f"slow client: closed after {took:.1f} s with {bytes(got[:40])!r}")
        now = time.monotonic()
        if now - last_drip >= 0.5:
            last_drip = now
            for s, (started, _) in list(opened.items()):
                if now - started > limit + 2:
                    tally.wrong(f"slow client: still open after {now - started:.1f} s")
                    sel.unregister(s)
                    s.close()
                    del opened[s]
                    continue
                with contextlib.suppress(OSError):
                    s.send(b"X")
    for s in opened:
        s.close()


# --------------------------------------------------------------------------- figures


def trend(times: list[float], values: list[float], floor: float) -> dict[str, float | bool]:
    """Least-squares slope (per hour), the rise over the window, its noise, and the verdict."""
    n = len(times)
    if n < 3:
        return {"per_hour": 0.0, "rise": 0.0, "noise": floor, "growing": False}
    mt, mv = statistics.fmean(times), statistics.fmean(values)
    sxx = sum((t - mt) ** 2 for t in times)
    slope = sum((t - mt) * (v - mv) for t, v in zip(times, values, strict=True)) / sxx
    residuals = [v - (mv + slope * (t - mt)) for t, v in zip(times, values, strict=True)]
    noise = max(2 * statistics.pstdev(residuals), floor)
    rise = slope * (times[-1] - times[0])
    return {"per_hour": slope * 3600, "rise": rise, "noise": noise, "growing": rise > noise}


def _sample(server: Server, client: httpx.Client, start: float) -> dict[str, float]:
    values = server.sample()
    status = client.get("/v1/status").json()
    values["spans_open"] = float(status.get("spans_open", -1))
    values["t"] = time.monotonic() - start
    return values


@dataclass
class Soak:
    """One soak's outcome: the figures (``--json``), the server's pid, and the verdict."""

    pid: int | None
    figures: dict[str, Any]

    @property
    def growing(self) -> bool:
        return any(bool(v["growing"]) for v in self.figures["series"].values())

    @property
    def ok(self) -> bool:
        """Nothing lost, failed or unexpected, no span left open, no series growing."""
        f = self.figures
        return not (f["lost"] or f["failed"] or f["unexpected"]
                    or f["spans_open_after_drain"] != 0 or self.growing)


def run_soak(options: SoakOptions, echo: Echo = quiet) -> Soak:
    """Start a server, drive it for ``options.minutes``, and judge what it left behind.
    ``echo`` gets a line when the server is up and one if it exits early; a failed preload
    raises ``BenchFailed``."""
    from cuzk.circuits.registry import bundled_circuits

    circuits = bundled_circuits()
    inputs = sample_inputs(options.kind)
    partitions = int(circuits[options.kind].partitions)
    journal_dir = tempfile.TemporaryDirectory(prefix="cuzk-soak-")
    try:
        server = start_server(options, Path(journal_dir.name))
    except BaseException:
        journal_dir.cleanup()
        raise
    echo(
        f"soak: cuzk serve pid {server.process.pid} at {server.url}; {options.minutes:g} min;"
        f" journal.retention_jobs = {options.retention_jobs} (a temporary journal)"
    )
    tally = Tally()
    stop = threading.Event()
    rng = random.Random(options.seed)
    samples: list[dict[str, float]] = []
    lost: list[str] = []
    failed: list[str] = []
    try:
        admin = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=600
        )
        r = admin.post(f"/v1/keys/{options.kind}/preload")
        if r.status_code != 200:
            raise BenchFailed(f"preload failed: {r.status_code} {r.text[:300]}")
        start = time.monotonic()
        samples.append(_sample(server, admin, start))
        threads = [
            threading.Thread(
                target=_job_client,
                args=(server, options.kind, inputs, partitions, stop, tally,
                      random.Random(rng.random())),
                daemon=True,
            )
            for _ in range(options.jobs_in_flight)
        ]  # fmt: skip
        bad = _bad_requests(options.kind, inputs, server.token)
        threads.append(
            threading.Thread(
                target=_bad_client,
                args=(server, bad, options.bad_per_second, stop, tally),
                daemon=True,
            )
        )
        threads.append(
            threading.Thread(
                target=_slow_clients, args=(server, options.slow_clients, stop, tally),
                daemon=True,
            )
        )
        for t in threads:
            t.start()
        end = start + options.minutes * 60
        while time.monotonic() < end:
            time.sleep(max(0.0, min(options.sample_every, end - time.monotonic())))
            samples.append(_sample(server, admin, start))
            if not server.process.running:
                echo("the server exited during the soak")
                break
        load_s = time.monotonic() - start
        stop.set()
        for t in threads:
            t.join(180)
        # Every accepted job must be found, finished, in its expected state.
        ends: Counter[str] = Counter()
        # A job whose end its client saw was checked then (the server may since have dropped it
        # from its bounded history); the others must still be there and finish now.
        for job_id, expected in list(tally.jobs.items()):
            if job_id in tally.seen:
                state, error = tally.seen[job_id]
            else:
                r = admin.get(f"/v1/proofs/{job_id}", params={"wait": 120})
                if r.status_code != 200 or r.json()["state"] not in TERMINAL_STATES:
                    lost.append(f"{job_id}: {r.status_code} {r.text[:200]}")
                    continue
                state, error = r.json()["state"], r.json().get("error")
            ends[f"{expected}->{state}"] += 1
            ok = state == "succeeded" or (expected == "cancel" and state == "cancelled")
            if not ok:
                failed.append(f"{job_id} ({expected}): {state}: {error}")
        time.sleep(1.0)
        drained = _sample(server, admin, start)
        admin.close()
    finally:
        stop.set()
        server.process.stop(60)
        journal_dir.cleanup()

    measured = [s for s in samples if s["t"] >= WARMUP_FRACTION * load_s]
    figures: dict[str, Any] = {"minutes": load_s / 60, "series": {}}
    for name, floor in NOISE_FLOORS.items():
        values = [s[name] for s in measured]
        verdict = trend([s["t"] for s in measured], values, floor)
        figures["series"][name] = {
            "first": values[0], "last": values[-1], "min": min(values), "max": max(values),
            "after_drain": drained[name], **verdict,
        }  # fmt: skip
    figures |= {
        "requests": dict(tally.requests), "jobs": dict(ends), "lost": lost, "failed": failed,
        "unexpected": tally.unexpected, "spans_open_after_drain": drained["spans_open"],
        "samples": samples,
    }  # fmt: skip
    return Soak(server.process.pid, figures)
