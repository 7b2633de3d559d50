"""The durability bench (``cuzk bench durability``): kill -9 a real ``cuzk serve`` again and
again; count what is lost.

Part 1, the kill cycles. A backlog of jobs with request ids (winning-post, and window-post
given several partitions so a job can be half done when the server dies) is released in waves,
one per server life. In each life, once a submit has been accepted, the server is killed with
SIGKILL at a random moment and started again on the same journal; the submitter retries what
was cut off with the same request id. After the last cycle the rest of the backlog runs to the
end. Figures: jobs accepted; jobs lost (accepted and then not found, not succeeded, or found as
more than one job for one request id; must be 0); partitions proven twice (a partition whose
journaled proof was later replaced: Groth16 proofs are randomized, so proving a journaled
partition again shows as a different proof); the recovery time from restart to ``/readyz``
200 (mean and max).

Part 2, the journal's cost. The same mixed backlog through a fresh server with the journal on
and with it off, alternating, ``--cost-repeats`` pairs in this run (keys preloaded and the
witness generators warmed first, so only steady proving is timed): throughput (jobs per second
from the first submit to the last completion) on against off, the median and the range of the
pairwise ratios, and the journal's own write time from ``cuzk_journal_write_seconds``.

``run_durability`` returns both parts' figures; ``cuzk.cli.bench_durability`` prints them.
"""

from __future__ import annotations

import random
import re
import signal
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from cuzk.bench import Echo, quiet
from cuzk.bench.samples import sample_inputs
from cuzk.protocol import PRIORITIES, TERMINAL_STATES
from cuzk.serve_process import ServeProcess, read_journal, serve_env, submit_until_accepted

KINDS = ("winning-post", "window-post")


@dataclass(frozen=True)
class DurabilityOptions:
    """What ``cuzk bench durability``'s options set (defaults there)."""

    cycles: int = 20
    jobs: int = 40
    window_partitions: int = 2
    max_kill_delay: float = 2.0
    cost_jobs: int = 16
    cost_repeats: int = 3  # 0: no journal-cost part
    budget_s: float = 3600.0
    backend: str = "cpu"
    keys_dir: Path | None = None  # absolute: the server runs in its own working directory
    seed: int = 0


def _backlog(n: int, window_partitions: int, seed: int, tag: str) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    win, window = sample_inputs("winning-post"), sample_inputs("window-post")
    jobs = []
    for i in range(n):
        if i % 3 == 2:
            jobs.append({"proof_kind": "window-post", "inputs": [window] * window_partitions,
                         "request_id": f"{tag}-window-{i}",
                         "priority": rng.choice(PRIORITIES[1:])})
        else:
            jobs.append({"proof_kind": "winning-post", "inputs": [win],
                         "request_id": f"{tag}-win-{i}",
                         "priority": rng.choice(["critical", "normal"])})
    rng.shuffle(jobs)
    return jobs


def _env(options: DurabilityOptions, journal: Path | None) -> dict[str, str]:
    env = serve_env(
        journal, options.keys_dir,
        CUZK_PROOF_KINDS_WINDOW_POST_PARTITIONS=str(options.window_partitions),
        # What is measured is loss across kill -9, not deadlines: a winning-post's 20 s
        # default (cancel on miss) would end jobs a restart delayed as deadline_exceeded.
        CUZK_PROOF_KINDS_WINNING_POST_DEADLINE="",
    )  # fmt: skip
    env["CUZK_ENGINE_BACKEND"] = options.backend
    return env


def _wait_done(url: str, job_id: str, deadline: float) -> dict[str, Any]:
    with httpx.Client(base_url=url, timeout=60) as client:
        while True:
            job = client.get(f"/v1/proofs/{job_id}", params={"wait": 30}).json()
            if job.get("state") in TERMINAL_STATES:
                return job
            if time.monotonic() > deadline:
                return job


# --------------------------------------------------------------------------- part 1


def kill_cycles(options: DurabilityOptions, workdir: Path, echo: Echo = quiet
                ) -> dict[str, Any]:
    deadline = time.monotonic() + options.budget_s
    journal = workdir / "kill" / "journal.sqlite3"
    env = _env(options, journal)
    rng = random.Random(options.seed)
    backlog = _backlog(options.jobs, options.window_partitions, options.seed, "kill")
    per_wave = max(1, -(-len(backlog) // max(1, options.cycles)))
    accepted: dict[str, list[str]] = {}
    current: dict[str, ServeProcess | None] = {"server": None}
    waves = threading.Semaphore(0)
    got_one = threading.Event()
    failures: list[BaseException] = []

    def url() -> str | None:
        server = current["server"]
        return server.url if server is not None and server.running else None

    def submitter() -> None:
        try:
            for n, body in enumerate(backlog):
                if n % per_wave == 0:
                    waves.acquire()
                job = submit_until_accepted(url, body, deadline)
                accepted.setdefault(body["request_id"], []).append(job["id"])
                got_one.set()
        except BaseException as e:
            failures.append(e)

    journaled: dict[tuple[str, int], str] = {}
    replaced: set[tuple[str, int]] = set()

    def check_journal() -> None:
        for key, proof in read_journal(journal)[1].items():
            if journaled.setdefault(key, proof) != proof:
                replaced.add(key)

    recoveries: list[float] = []
    resumed = 0
    server = ServeProcess(env)
    server.start(timeout=300)
    server.ready(timeout=300)
    current["server"] = server
    sub = threading.Thread(target=submitter, name="submitter", daemon=True)
    sub.start()
    try:
        for cycle in range(options.cycles):
            got_one.clear()
            waves.release()
            if not got_one.wait(max(0.0, deadline - time.monotonic())):
                raise TimeoutError("no submit accepted within the budget")
            time.sleep(rng.uniform(0.0, options.max_kill_delay))
            server.kill()
            check_journal()
            server = ServeProcess(env)
            current["server"] = server
            server.start(timeout=300)
            recoveries.append(server.ready(timeout=300))
            text = httpx.get(f"{server.url}/metrics", timeout=30).text
            resumed += int(sum(
                float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                if line.startswith("cuzk_jobs_recovered_total{") and 'outcome="resumed"' in line
            ))
            echo(f"  cycle {cycle + 1}/{options.cycles}: recovered to /readyz in "
                          f"{recoveries[-1]:.2f}s; {len(accepted)} accepted so far")
        for _ in backlog:
            waves.release()
        sub.join(max(1.0, deadline - time.monotonic()))
        finals = {}
        server_url = server.url
        assert server_url is not None  # the server is running
        for rid, ids in accepted.items():
            finals[rid] = _wait_done(server_url, ids[-1], deadline)
        server.signal(signal.SIGTERM)
        server.wait(120)
    finally:
        server.kill()
    if failures:
        raise failures[0]
    check_journal()
    rows, _ = read_journal(journal)
    per_request: dict[str, list[dict]] = {}
    for row in rows.values():
        per_request.setdefault(row["request_id"], []).append(row)
    lost = sorted(
        rid for rid, ids in accepted.items()
        if len(set(ids)) != 1 or finals[rid].get("state") != "succeeded"
        or [r["state"] for r in per_request.get(rid, [])] != ["succeeded"]
    )
    partitions = sum(len(b["inputs"]) for b in backlog if b["request_id"] in accepted)
    return {
        "cycles": options.cycles,
        "jobs_accepted": len(accepted),
        "jobs_in_backlog": len(backlog),
        "partitions": partitions,
        "lost": len(lost),
        "lost_request_ids": lost,
        "proven_twice": len(replaced),
        "jobs_resumed_at_restarts": resumed,
        "recovery_s_mean": statistics.fmean(recoveries) if recoveries else None,
        "recovery_s_max": max(recoveries) if recoveries else None,
    }


# --------------------------------------------------------------------------- part 2


def _throughput_run(options: DurabilityOptions, journal: Path | None, tag: str
                    ) -> dict[str, Any]:
    server = ServeProcess(_env(options, journal))
    try:
        url = server.start(timeout=300)
        server.ready(timeout=300)
        with httpx.Client(base_url=url, timeout=300) as client:
            for kind in KINDS:  # keys resident, witness generators compiled: steady state only
                client.post(f"/v1/keys/{kind}/preload")
            warm = _backlog(3, options.window_partitions, options.seed, f"{tag}-warm")
            for kind in KINDS:  # one job of each kind
                body = next(b for b in warm if b["proof_kind"] == kind)
                job = submit_until_accepted(lambda: url, body, time.monotonic() + 600)
                _wait_done(url, job["id"], time.monotonic() + 600)
        backlog = _backlog(options.cost_jobs, options.window_partitions, options.seed, tag)
        before = _journal_writes(url)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            # a 503 (the parse reserve busy with the other submits) is retried, any other
            # refusal named: never a KeyError on an error body
            ids = list(pool.map(
                lambda b: submit_until_accepted(lambda: url, b, time.monotonic() + 600)["id"],
                backlog))
            states = list(pool.map(
                lambda i: _wait_done(url, i, time.monotonic() + 1800)["state"], ids))
        elapsed = time.perf_counter() - t0
        after = _journal_writes(url)
        server.signal(signal.SIGTERM)
        server.wait(120)
    finally:
        server.kill()
    if states != ["succeeded"] * len(states):
        raise RuntimeError(f"journal-cost run {tag}: not every job succeeded: {states}")
    return {
        "jobs": len(backlog),
        "seconds": elapsed,
        "jobs_per_s": len(backlog) / elapsed,
        "journal_writes": after[0] - before[0],
        "journal_write_s": after[1] - before[1],
    }


def _journal_writes(url: str) -> tuple[float, float]:
    """(count, sum) of cuzk_journal_write_seconds."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    count = re.search(r"^cuzk_journal_write_seconds_count (\S+)$", text, re.M)
    total = re.search(r"^cuzk_journal_write_seconds_sum (\S+)$", text, re.M)
    return (float(count.group(1)) if count else 0.0, float(total.group(1)) if total else 0.0)


def journal_cost(options: DurabilityOptions, workdir: Path, echo: Echo = quiet
                 ) -> dict[str, Any]:
    pairs = []
    for r in range(options.cost_repeats):
        on_first = r % 2 == 0  # alternate the order so drift does not favour one side
        runs: dict[str, dict[str, Any]] = {}
        for side in (("on", "off") if on_first else ("off", "on")):
            journal = workdir / f"cost-{r}" / "journal.sqlite3" if side == "on" else None
            runs[side] = _throughput_run(options, journal, f"cost{r}{side}")
            echo(f"  pair {r + 1}/{options.cost_repeats} journal {side}: "
                          f"{runs[side]['jobs_per_s']:.3f} jobs/s")
        pairs.append(runs)
    on = [p["on"]["jobs_per_s"] for p in pairs]
    off = [p["off"]["jobs_per_s"] for p in pairs]
    cost = [1.0 - p["on"]["jobs_per_s"] / p["off"]["jobs_per_s"] for p in pairs]
    writes = sum(p["on"]["journal_writes"] for p in pairs)
    write_s = sum(p["on"]["journal_write_s"] for p in pairs)
    wall_on = sum(p["on"]["seconds"] for p in pairs)
    return {
        "pairs": pairs,
        "jobs_per_s_on_median": statistics.median(on),
        "jobs_per_s_off_median": statistics.median(off),
        "cost_median": statistics.median(cost),
        "cost_min": min(cost),
        "cost_max": max(cost),
        "journal_writes": writes,
        "journal_write_ms_mean": 1000 * write_s / writes if writes else None,
        "journal_write_share": write_s / wall_on if wall_on else None,
    }


# --------------------------------------------------------------------------- the command


def run_durability(options: DurabilityOptions, echo: Echo = quiet,
                   heading: Callable[[str, str], None] | None = None) -> dict[str, Any]:
    """Both parts in a temporary directory: ``{"kill_cycles": ..., "journal_cost": ... or
    None}``. ``heading(title, what)`` is told as each part starts, ``echo`` each cycle and pair."""
    with tempfile.TemporaryDirectory(prefix="cuzk-durability-") as tmp:
        workdir = Path(tmp)
        if heading is not None:
            heading("kill -9 cycles", f"{options.cycles} against {options.jobs} jobs")
        kills = kill_cycles(options, workdir, echo)
        if heading is not None:
            heading("journal cost",
                    f"{options.cost_repeats} on/off pairs of {options.cost_jobs} jobs")
        cost = journal_cost(options, workdir, echo) if options.cost_repeats > 0 else None
    return {"kill_cycles": kills, "journal_cost": cost}
