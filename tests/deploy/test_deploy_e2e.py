"""End to end: a real engine and a real Prometheus with the shipped rules and dashboards.

`cuzk serve` (CPU backend) and `prometheus` run on random loopback ports; Prometheus scrapes the
engine every second with the shipped rule files. Against that Prometheus the test checks:

1. under a normal workload of real proofs (winning-post, window-post) the idle alert is never
   pending or firing;
2. with the GPU workers paused (POST /v1/workers/pause) and jobs queued, the idle alert becomes
   pending/firing, and it clears once the workers resume;
3. every PromQL expression of every dashboard panel and every recording rule returns data
   (template variables substituted as Grafana would: $__rate_interval -> 4s, the four-scrape
   minimum at a 1 s scrape; $instance -> the engine's instance, regex-escaped; multi-value
   variables -> their All value ".*"); the NVML device panels are exempt only when the engine
   runs the CPU backend, where those series do not exist by design;
4. /api/v1/query_exemplars returns exemplars for both latency histograms, and their trace ids
   are those of the jobs the test submitted (so the scrape used OpenMetrics).

Time compression, in the test's copy of the alert rules only: every duration in `for:` and in
range selectors is divided by 30 (5m -> 10s, 15m -> 30s), so an alert that needs 5 minutes of
evidence in production needs 10 seconds here. The expressions, labels and thresholds are the
shipped ones; the production durations are covered by the promtool unit tests.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.deploy._deploy_util import (
    DEVICE_ONLY_METRICS,
    ROOT,
    RULES_DIR,
    dashboards,
    panel_queries,
    promql_metrics,
    recording_rules,
    require_tool,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

IDLE = "CuzkGpuWorkersIdleWithQueuedWork"
KINDS = ("winning-post", "window-post")
SCALE = 30
DEADLINE_S = 170  # the whole test stays under 3 minutes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _compress(duration: str) -> str:
    """Divide a Prometheus duration such as 5m or 1h30m by SCALE (whole seconds, at least 1)."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    total = sum(float(n) * units[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d)", duration))
    return f"{max(1, round(total / SCALE))}s"


def compressed_rules(text: str) -> str:
    """The alert rule file with every for: and range duration divided by SCALE."""
    doc = yaml.safe_load(text)
    for group in doc["groups"]:
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            if "for" in rule:
                rule["for"] = _compress(rule["for"])
            rule["expr"] = re.sub(r"\[(\w+)\]", lambda m: f"[{_compress(m.group(1))}]",
                                  rule["expr"])
    return yaml.safe_dump(doc, sort_keys=False)


def test_compressed_rules_keep_expressions():
    text = (RULES_DIR / "cuzk-alerts.yml").read_text()
    out = yaml.safe_load(compressed_rules(text))
    rules = {r["alert"]: r for g in out["groups"] for r in g["rules"]}
    assert rules[IDLE]["for"] == "10s"
    assert "[10s]" in rules[IDLE]["expr"] and "[5m]" not in rules[IDLE]["expr"]
    assert rules["CuzkJobsStuck"]["for"] == "30s"


class _Proc:
    """A child process with its log in a file; stopped with SIGTERM, then SIGKILL."""

    def __init__(self, cmd: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        self.fh = log.open("w")
        self.proc = subprocess.Popen(cmd, stdout=self.fh, stderr=subprocess.STDOUT, env=env,
                                     cwd=log.parent, start_new_session=True)

    def tail(self) -> str:
        return self.log.read_text()[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.fh.close()


def _http(url: str, data: dict | None = None, timeout: float = 10) -> dict:
    body = None if data is None else json.dumps(data).encode()
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"},
                                 method="GET" if data is None else "POST")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read() or b"{}")


def _wait_for(what: str, check, timeout: float, interval: float = 0.5, procs=()):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        for p in procs:
            if p.proc.poll() is not None:
                pytest.fail(f"{p.log.name} exited with {p.proc.returncode} while waiting for "
                            f"{what}:\n{p.tail()}")
        try:
            last = check()
        except (OSError, ValueError) as e:  # not up yet
            last = e
        else:
            if last:
                return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


class Prom:
    """Minimal Prometheus HTTP API client."""

    def __init__(self, base: str) -> None:
        self.base = base

    def get(self, path: str, **params) -> dict:
        url = f"{self.base}{path}?{urllib.parse.urlencode(params, doseq=True)}"
        out = _http(url, timeout=15)
        assert out["status"] == "success", out
        return out["data"]

    def query(self, expr: str) -> list[dict]:
        return self.get("/api/v1/query", query=expr)["result"]

    def query_range(self, expr: str, start: float, end: float, step: str = "1s") -> list[dict]:
        return self.get("/api/v1/query_range", query=expr, start=start, end=end,
                        step=step)["result"]

    def alert_states(self, name: str) -> set[str]:
        return {a["state"] for a in self.get("/api/v1/alerts")["alerts"]
                if a["labels"].get("alertname") == name}


def _finite(result: list[dict]) -> bool:
    for series in result:
        for _, v in series.get("values", []):
            if math.isfinite(float(v)):
                return True
    return False


def _substitute(expr: str, instance: str) -> str:
    escaped = re.escape(instance).replace("\\", "\\\\")
    out = (expr.replace("$__rate_interval", "4s").replace("$instance", escaped)
           .replace("$proof_kind", ".*"))
    assert "$" not in out, out
    return out


@pytest.fixture
def stack(tmp_path):
    """A running engine and Prometheus; yields (engine_url, Prom, instance)."""
    prometheus = require_tool("prometheus")
    eport, pport = _free_port(), _free_port()
    instance = f"127.0.0.1:{eport}"

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CUZK_"))}
    env.update({"CUZK_ENGINE_BACKEND": "cpu", "CUZK_SERVER_LISTEN": instance,
                "OTEL_TRACES_EXPORTER": "none", "PYTHONPATH": str(ROOT)})
    env["CUZK_JOURNAL_PATH"] = str(tmp_path / "journal.sqlite3")  # never the user's journal
    # Share the test suite's proving-key cache (tests/conftest.py), so keys are made once.
    env["CUZK_ENGINE_KEYS_DIR"] = os.environ.get(
        "CUZK_ENGINE_KEYS_DIR", os.environ.get("CUZK_TEST_KEYS_DIR", str(ROOT / ".cache" / "keys")))
    engine = _Proc([sys.executable, "-m", "cuzk.cli.main", "serve"], tmp_path / "cuzk.log", env)

    rules = tmp_path / "rules"
    rules.mkdir()
    for path in RULES_DIR.glob("*.yml"):
        text = path.read_text()
        (rules / path.name).write_text(compressed_rules(text) if "alert:" in text else text)
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                   "scrape_timeout": "1s"},
        "rule_files": ["rules/*.yml"],
        "scrape_configs": [
            {"job_name": "cuzk", "metrics_path": "/metrics",
             "static_configs": [{"targets": [instance]}]},
            {"job_name": "prometheus",
             "static_configs": [{"targets": [f"127.0.0.1:{pport}"]}]},
        ],
    }))
    prom_proc = _Proc([prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
                       f"--storage.tsdb.path={tmp_path / 'data'}",
                       f"--web.listen-address=127.0.0.1:{pport}",
                       "--enable-feature=exemplar-storage", "--log.level=warn"],
                      tmp_path / "prometheus.log")
    try:
        base = f"http://{instance}"
        _wait_for("the engine's /healthz", lambda: _http(f"{base}/healthz"), 60,
                  procs=(engine, prom_proc))
        prom = Prom(f"http://127.0.0.1:{pport}")
        _wait_for("Prometheus to scrape the engine",
                  lambda: prom.query(f'up{{job="cuzk",instance="{instance}"}} == 1'), 30,
                  procs=(engine, prom_proc))
        yield base, prom, instance
    except BaseException:
        print("--- cuzk log ---\n" + engine.tail(), "\n--- prometheus log ---\n" +
              prom_proc.tail())
        raise
    finally:
        engine.stop()
        prom_proc.stop()


def _inputs(kind: str) -> list[dict]:
    path = ROOT / "cuzk" / "circuits" / "data" / kind / "input.json"
    return [json.loads(path.read_text())]


def _submit(base: str, kind: str) -> dict:
    return _http(f"{base}/v1/proofs", {"proof_kind": kind, "inputs": _inputs(kind)})


def _await_jobs(base: str, jobs: list[dict], timeout: float) -> list[dict]:
    end = time.monotonic() + timeout
    done = []
    for job in jobs:
        left = max(1, int(end - time.monotonic()))
        out = _http(f"{base}/v1/proofs/{job['id']}?wait={left}", timeout=left + 10)
        assert out["state"] == "succeeded", (out["proof_kind"], out["state"], out.get("error"))
        done.append(out)
    return done


def test_engine_and_prometheus_end_to_end(stack):
    base, prom, instance = stack
    for kind in KINDS:  # load (or first generate) the proving keys before the clock starts
        _http(f"{base}/v1/keys/{kind}/preload", {}, timeout=150)
    t0 = time.time()
    deadline = time.monotonic() + DEADLINE_S
    trace_ids: set[str] = set()

    # 1. Normal load: real proofs, two in flight at a time; the idle alert stays inactive.
    idle_states: set[str] = set()
    load_end = time.monotonic() + 25
    rounds = 0
    while time.monotonic() < load_end or rounds < 2:
        jobs = [_submit(base, kind) for kind in KINDS]
        for job in _await_jobs(base, jobs, timeout=max(10, deadline - time.monotonic() - 90)):
            trace_ids.add(job["trace_id"])
        idle_states |= prom.alert_states(IDLE)
        rounds += 1
    time.sleep(2)
    idle_states |= prom.alert_states(IDLE)
    assert not idle_states, f"{IDLE} was {idle_states} under normal load"
    # Not even for one rule evaluation in between the polls: ALERTS keeps every state.
    history = prom.query_range(f'ALERTS{{alertname="{IDLE}"}}', t0, time.time())
    assert not history, f"{IDLE} was active under normal load: {history}"

    # 2. Workers paused while jobs are queued: the idle alert must become pending or firing.
    _http(f"{base}/v1/workers/pause", {})
    try:
        paused = [_submit(base, "winning-post") for _ in range(3)]
        _wait_for("partitions queued for a GPU in Prometheus",
                  lambda: prom.query(f'sum(cuzk_partitions{{instance="{instance}",'
                                     f'phase="queued_gpu"}}) > 0'), 30)
        states = _wait_for(f"{IDLE} to become pending/firing",
                           lambda: prom.alert_states(IDLE) & {"pending", "firing"}, 40)
        assert states
    finally:
        _http(f"{base}/v1/workers/resume", {})
    for job in _await_jobs(base, paused, timeout=max(10, deadline - time.monotonic() - 40)):
        trace_ids.add(job["trace_id"])
    _wait_for(f"{IDLE} to clear after resume", lambda: not prom.alert_states(IDLE), 30)

    # 3. Every dashboard query and every recording rule returns data from this Prometheus.
    time.sleep(2)
    end = time.time()
    backend = prom.query(f'cuzk_build_info{{instance="{instance}"}}')[0]["metric"]["backend"]
    empty, exempt, checked = [], [], 0
    for name, d in dashboards().items():
        for var in d["templating"]["list"]:
            if var["type"] == "query":
                m = re.fullmatch(r"label_values\((.+), (\w+)\)", var["definition"])
                match = _substitute(m.group(1), instance)
                values = prom.get(f"/api/v1/label/{m.group(2)}/values", **{"match[]": match})
                if not values:
                    empty.append((name, f"variable {var['name']}", var["definition"]))
        for panel, target in panel_queries(d):
            checked += 1
            expr = _substitute(target["expr"], instance)
            if not _finite(prom.query_range(expr, t0, end)):
                metrics = promql_metrics(target["expr"])
                if backend == "cpu" and metrics and metrics <= DEVICE_ONLY_METRICS:
                    exempt.append(panel["title"])
                else:
                    empty.append((name, panel["title"], expr))
    for rule in recording_rules():
        checked += 1
        if not _finite(prom.query_range(rule["record"], t0, end)):
            empty.append(("recording rule", rule["record"], rule["expr"]))
    assert not empty, "queries without data:\n" + "\n".join(map(str, empty))
    assert set(exempt) <= {"Device memory used", "Device utilization", "Device memory budget"}
    assert checked >= 60, checked

    # 4. Exemplars for both latency histograms, carrying our jobs' trace ids.
    for metric in ("cuzk_job_duration_seconds_bucket",
                   "cuzk_partition_phase_duration_seconds_bucket"):
        data = prom.get("/api/v1/query_exemplars",
                        query=f'{metric}{{instance="{instance}"}}', start=t0, end=end)
        seen = {ex["labels"].get("trace_id") for series in data for ex in series["exemplars"]}
        assert seen, f"no exemplars for {metric}"
        assert seen & trace_ids, f"exemplar trace ids {seen} are not from submitted jobs"

    # Nothing else went off during a healthy run.
    firing = {a["labels"]["alertname"] for a in prom.get("/api/v1/alerts")["alerts"]
              if a["state"] == "firing"}
    assert not firing & {"CuzkTargetDown", "CuzkMetricsMissing", "CuzkJobFailureRateHigh"}
