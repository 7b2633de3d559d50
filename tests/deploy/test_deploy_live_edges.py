"""Live checks of issue 21's edges: real engines scraped by a real Prometheus on loopback.

Two `cuzk serve` engines (CPU backend) in one scrape job, and Prometheus scraping them and
itself every second with the shipped rule files, time-compressed as in test_deploy_e2e.py
(every duration divided by 30: a 10-minute window is 20 s):

- ``starved``: a 17 MiB memory budget (one window-post key and one partition fit, not two
  kinds' keys with their partitions) and a backlog of both kinds kept in flight: the synthesis
  threads wait for memory while the GPU workers have capacity to spare. CuzkMemoryPressure
  must fire for it (the shipped rule before issue 21 divided the wait by all partition time,
  backlog included, and stayed quiet).
- ``healthy``: the default budget and a steady load: memory never limits it, so
  CuzkMemoryPressure must never be active (pending included) for it.
- ``hostbound`` (issue 26): one GPU worker kept busy by a backlog, and a recorded NVML series
  (``tests/deploy/data/nvml_host_bound.json``, kernels running ~23% of the time) replayed as
  its device's utilisation through ``[telemetry] nvml_replay``: the device gauges come from the
  telemetry layer's collector exactly as a driver's would, the busy counter and the GPU queue
  from the engine. CuzkGpuStarvedByHost must fire for it; the other two engines export no
  NVML series (the CPU backend), so it must never be active for them, the starved engine's
  queue of work included.

Then every query of every engine dashboard runs with its Job and Instance variables set to
"All" as Grafana expands them (the values the variable's own query lists, joined into one
regex), and must return exactly what the same query returns with the two engines named
explicitly: a series of Prometheus's own (`up`, `process_*`) leaking into a panel, or an
aggregate counting it, makes the two differ.
"""

from __future__ import annotations

import math
import os
import re
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.deploy._deploy_util import ROOT, RULES_DIR, dashboards, free_port, panel_queries
from tests.deploy.test_deploy_e2e import (
    Prom,
    _http,
    _inputs,
    _Proc,
    _substitute,
    _wait_for,
    compressed_rules,
    require_tool,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KINDS = ("winning-post", "window-post")
STARVED_BUDGET = "37MiB"  # with the prover's runtime (20 MiB), window-post key + one
# partition: 36.2 MiB; both kinds: 43.9 MiB
PRESSURE = "CuzkMemoryPressure"
HOST_BOUND = "CuzkGpuStarvedByHost"
FIRE_BOUND_S = 300  # 20 s window + 20 s for:, with room for a loaded 2-core machine
STARVED_IN_FLIGHT = 30  # the deep backlog of issue 21: it diluted the old share rule
HEALTHY_IN_FLIGHT = 2
HOST_BOUND_IN_FLIGHT = 16  # keeps its one GPU worker's queue full, on a loaded machine too
NVML_RECORDING = Path(__file__).resolve().parent / "data" / "nvml_host_bound.json"


class Engines:
    """Engines and Prometheus on loopback; everything stops with the test."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.prometheus = require_tool("prometheus")
        self.procs: list[_Proc] = []
        self.instances: dict[str, str] = {}
        self.keys = Path(os.environ.get("CUZK_ENGINE_KEYS_DIR", os.environ.get(
            "CUZK_TEST_KEYS_DIR", str(ROOT / ".cache" / "keys"))))

    def engine(self, name: str, **extra: str) -> str:
        port = free_port()
        inst = f"127.0.0.1:{port}"
        d = self.tmp / name
        d.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CUZK_"))}
        env.update({"CUZK_ENGINE_BACKEND": "cpu", "CUZK_SERVER_LISTEN": inst,
                    "CUZK_ENGINE_KEYS_DIR": str(self.keys), "OTEL_TRACES_EXPORTER": "none",
                    "CUZK_JOURNAL_PATH": str(d / "journal.sqlite3"), "PYTHONPATH": str(ROOT),
                    # No default deadlines: the backlog is starved on purpose and its jobs
                    # must wait, not be cut or refused (deadlines have their own tests).
                    "CUZK_PROOF_KINDS_WINNING_POST_DEADLINE": "",
                    "CUZK_PROOF_KINDS_WINDOW_POST_DEADLINE": "",
                    **extra})
        proc = _Proc([sys.executable, "-m", "cuzk.cli.main", "serve"], d / "cuzk.log", env)
        self.procs.append(proc)
        _wait_for(f"{name}'s /readyz", lambda: _http(f"http://{inst}/readyz"), 120,
                  procs=(proc,))
        self.instances[name] = inst
        return inst

    def monitor(self) -> Prom:
        rules = self.tmp / "rules"
        rules.mkdir()
        for path in RULES_DIR.glob("*.yml"):
            (rules / path.name).write_text(compressed_rules(path.read_text()))
        pport = free_port()
        self.pinst = f"127.0.0.1:{pport}"
        (self.tmp / "prometheus.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                       "scrape_timeout": "1s"},
            "rule_files": ["rules/*.yml"],
            "scrape_configs": [
                {"job_name": "cuzk",
                 "static_configs": [{"targets": sorted(self.instances.values())}]},
                {"job_name": "prometheus", "static_configs": [{"targets": [self.pinst]}]},
            ],
        }))
        self.procs.append(_Proc(
            [self.prometheus, f"--config.file={self.tmp / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.tmp / 'data'}", f"--web.listen-address={self.pinst}",
             "--log.level=warn"], self.tmp / "prometheus.log"))
        prom = Prom(f"http://{self.pinst}")
        want = len(self.instances) + 1
        _wait_for("Prometheus to scrape the engines and itself",
                  lambda: len(prom.query("up == 1")) == want, 30, procs=self.procs)
        return prom

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {p.log} ---\n{p.tail()}" for p in self.procs)


@pytest.fixture
def engines(tmp_path):
    e = Engines(tmp_path)
    try:
        yield e
    except BaseException:
        print(e.logs())
        raise
    finally:
        e.stop()


def _keep_in_flight(base: str, jobs: list[str], n: int, counter: list[int]) -> list[str]:
    """Top the engine up to ``n`` unfinished jobs, alternating the two kinds."""
    live = [j for j in jobs if _http(f"{base}/v1/proofs/{j}")["state"] in ("queued", "running")]
    while len(live) < n:
        kind = KINDS[counter[0] % 2]
        counter[0] += 1
        live.append(_http(f"{base}/v1/proofs",
                          {"proof_kind": kind, "inputs": _inputs(kind)})["id"])
    return live


def _grafana_all(values: list[str]) -> str:
    """What Grafana puts for a multi-value variable set to All without a custom all value: the
    listed values, regex-escaped, joined as (a|b), inside a PromQL string (backslashes doubled)."""
    esc = [re.sub(r"([\\$^*{}\[\]'+?.()|])", r"\\\1", v).replace("\\", "\\\\") for v in values]
    return esc[0] if len(esc) == 1 else "(" + "|".join(esc) + ")"


def _variable(prom: Prom, var: dict, job: str, instance: str, at: float) -> list[str]:
    m = re.fullmatch(r"label_values\((.+), (\w+)\)", var["definition"])
    assert m, var["definition"]
    match = _substitute(m.group(1), job, instance, 600)
    return sorted(prom.get(f"/api/v1/label/{m.group(2)}/values", **{
        "match[]": match, "start": at - 600, "end": at}))


def _canonical(result: list[dict]) -> list[tuple]:
    out = []
    for s in result:
        v = float(s["value"][1])
        out.append((tuple(sorted(s["metric"].items())), "nan" if math.isnan(v) else v))
    return sorted(out, key=repr)


def _dashboard_scope(prom: Prom, instances: list[str], at: float) -> tuple[int, list]:
    """Run every engine-dashboard query with All as Grafana expands it and with the engines
    named; return how many were compared and where they differ."""
    named_inst = "(" + "|".join(re.escape(i).replace("\\", "\\\\") for i in instances) + ")"
    leaks, compared = [], 0
    for name, d in dashboards().items():
        if name in ("cuzk-monitoring.json", "cuzk-runbook.json"):
            continue  # the monitoring stack's own dashboard; the runbook has no queries
        variables = {v["name"]: v for v in d["templating"]["list"] if v["type"] == "query"}
        if "job" not in variables:
            continue
        jobs = _variable(prom, variables["job"], ".+", ".+", at)
        job_all = ".+" if variables["job"].get("allValue") else _grafana_all(jobs)
        insts = _variable(prom, variables["instance"], job_all, ".+", at)
        inst_all = ".+" if variables["instance"].get("allValue") else _grafana_all(insts)
        assert jobs == ["cuzk"], (name, "job variable lists", jobs)
        assert sorted(insts) == sorted(instances), (name, "instance variable lists", insts)
        for p, t in panel_queries(d):
            if "expr" not in t:
                continue
            compared += 1
            got = prom.get("/api/v1/query", query=_substitute(t["expr"], job_all, inst_all, 300),
                           time=at)["result"]
            want = prom.get("/api/v1/query", query=_substitute(t["expr"], "cuzk", named_inst,
                                                                300), time=at)["result"]
            if _canonical(got) != _canonical(want):
                leaks.append((name, p["title"], t["expr"], _canonical(got)[:4],
                              _canonical(want)[:4]))
    return compared, leaks


def test_memory_pressure_and_host_bound_fire_and_dashboards_see_only_engines(engines):
    starved = engines.engine("starved", CUZK_ENGINE_MEMORY_BUDGET_BYTES=STARVED_BUDGET)
    healthy = engines.engine("healthy")
    hostbound = engines.engine("hostbound", CUZK_TELEMETRY_NVML_REPLAY=str(NVML_RECORDING),
                               CUZK_ENGINE_GPU_WORKERS_PER_DEVICE="1")
    for inst in (starved, healthy, hostbound):  # load (or first generate) the keys first
        for kind in KINDS:
            _http(f"http://{inst}/v1/keys/{kind}/preload", {}, timeout=150)
    prom = engines.monitor()
    t0 = time.time()
    load = {starved: STARVED_IN_FLIGHT, healthy: HEALTHY_IN_FLIGHT,
            hostbound: HOST_BOUND_IN_FLIGHT}
    counters = {inst: [0] for inst in load}
    jobs: dict[str, list[str]] = {inst: [] for inst in load}
    fired_at: dict[str, float] = {}

    def firing(alert: str, inst: str) -> bool:
        return any(s["metric"].get("instance") == inst and s["metric"]["alertstate"] == "firing"
                   for s in prom.query(f'ALERTS{{alertname="{alert}"}}'))

    def fired() -> bool:
        for inst, n in load.items():
            jobs[inst] = _keep_in_flight(f"http://{inst}", jobs[inst], n, counters[inst])
        for alert, inst in ((PRESSURE, starved), (HOST_BOUND, hostbound)):
            if alert not in fired_at and firing(alert, inst):
                fired_at[alert] = time.time() - t0
        return len(fired_at) == 2

    def figures(inst: str) -> dict[str, float | None]:
        sel = f'{{instance="{inst}"}}'
        window = f"[{int(time.time() - t0) + 1}s]"
        out = {r: prom.scalar(f"max_over_time({r}{sel}{window})")
               for r in ("instance:cuzk_memory_waiting:avg_rate10m",
                         "instance:cuzk_gpu_worker_busy:ratio_rate10m",
                         "instance_device:cuzk_gpu_worker_busy:ratio_rate10m",
                         "instance:cuzk_gpu_queue_nonempty:ratio5m")}
        out["device utilisation (min)"] = prom.scalar(
            f"min_over_time(instance_device:cuzk_device_utilization:ratio_avg10m{sel}{window})")
        return out

    def report() -> str:
        return (f"starved: {figures(starved)} healthy: {figures(healthy)} hostbound: "
                f"{figures(hostbound)}; fired (s after start): {fired_at}; jobs submitted: "
                f"{ {k: v[0] for k, v in counters.items()} }")

    try:
        _wait_for(f"{PRESSURE} to fire for the starved engine and {HOST_BOUND} for the "
                  "host-bound one", fired, FIRE_BOUND_S, interval=1.0, procs=engines.procs)
    except pytest.fail.Exception as e:  # the figures say which alert and condition fell short
        pytest.fail(f"{e.msg}\n{report()}")
    end = time.time()
    print(report())
    healthy_alerts = [s for s in prom.query_range(f'ALERTS{{alertname="{PRESSURE}"}}', t0, end)
                      if s["metric"].get("instance") == healthy]
    assert not healthy_alerts, f"{PRESSURE} active for the healthy engine: {healthy_alerts}"
    assert counters[healthy][0] >= HEALTHY_IN_FLIGHT + 2, "the healthy engine proved nothing"
    # The replayed device is the engine's own (the CPU backend's "cpu"), the label its workers'
    # busy series carry: the alert names it. Without NVML (the other two) nothing is guessed.
    (alert,) = [s["metric"] for s in prom.query(f'ALERTS{{alertname="{HOST_BOUND}"}}')]
    assert (alert["instance"], alert["device"]) == (hostbound, "cpu"), alert
    others = {s["metric"].get("instance")
              for s in prom.query_range(f'ALERTS{{alertname="{HOST_BOUND}"}}', t0, end)}
    assert others == {hostbound}, f"{HOST_BOUND} active for engines without NVML: {others}"

    compared, leaks = _dashboard_scope(prom, sorted(load), time.time() - 5)
    assert compared >= 60, compared
    assert not leaks, "panels that count targets other than the engines:\n" + "\n".join(
        map(str, leaks))
