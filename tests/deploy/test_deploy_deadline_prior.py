"""CuzkDeadlineAtRisk for a kind without history (issue 27): the alert never fired for the first
critical and high misses because a kind never measured had no prediction, so no slack series.
The promtool case is built from the series a fresh engine exports: its scrape, as Prometheus
would label it, fed to the shipped rules."""

from __future__ import annotations

import re
import subprocess
import time

import yaml
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from cuzk.engine.settings import ProofKindSettings as K
from cuzk.simulated_prover import ScriptedKind, ScriptedProver
from tests._doubles import make_test_engine, metrics_of
from tests.deploy._deploy_util import PROM_TESTS_DIR, RULES_DIR, load_yaml, require_tool

SCRAPE = {"job": "cuzk", "instance": "a:9820"}
KINDS = {
    "porep-c2": K("porep-c2", 2, "normal"),
    "window-post": K("window-post", 1, "high", deadline_s=1800.0, on_deadline_miss="cancel",
                     deadline_admission="accept"),
}
PRIORS = {"porep-c2": {"synthesizing": 0.5, "proving": 20.0, "finalizing": 0.2},
          "window-post": {"synthesizing": 0.2, "proving": 1.0, "finalizing": 0.1}}


def _scrape_at_risk() -> list[tuple[str, dict[str, str], float]]:
    """A fresh engine (no measured, configured or journaled figure): porep-c2 on the one GPU
    worker for 20 s by its prior, and a window-post due in 3 s: the series it exports."""
    prover = ScriptedProver({k: ScriptedKind(prior=p) for k, p in PRIORS.items()})
    engine, prover, _ = make_test_engine(KINDS, prover, gpu_workers_per_device=1)
    # whichever porep-c2 partition reaches the one GPU worker first is held there (a named one
    # let the other finish at once, measured as instant, and the prior no longer spoke)
    gate = prover.hold("gpu", lambda inputs: inputs.get("tag", "").startswith("p"))
    with engine:
        try:
            engine.submit("porep-c2", [{"tag": "p0"}, {"tag": "p1"}])
            assert gate.wait_entered()
            engine.submit("window-post", [{"tag": "w"}], deadline=time.time() + 3)
            text = metrics_of(engine).render(openmetrics_format=True)[0].decode()
        finally:
            gate.release()
    return [(s.name, dict(s.labels), s.value) for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == "cuzk_queue_min_slack_seconds"]


def _series(name: str, labels: dict[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in {**SCRAPE, **labels}.items())
    return f"{name}{{{inner}}}"


def test_deadline_at_risk_fires_for_a_kind_without_history(tmp_path):
    promtool = require_tool("promtool")
    scraped = _scrape_at_risk()
    assert [(n, lab) for n, lab, _ in scraped] == [
        ("cuzk_queue_min_slack_seconds", {"priority": "high"})], scraped
    slack = scraped[0][2]
    assert -60 < slack < -1, slack  # 20 s of porep GPU phase ahead, 3 s left
    # The expected annotations: the shipped case's, for this priority and value.
    shipped = next(c for c in load_yaml(PROM_TESTS_DIR / "deadlines.test.yml")["tests"]
                   if c["name"].startswith("negative least slack fires"))
    template = shipped["alert_rule_test"][0]["exp_alerts"][0]["exp_annotations"]
    ann = {k: v.replace("critical", "high") for k, v in template.items()}
    ann["description"] = re.sub(r"\(-30s\)", f"(-{-slack:.4g}s)", ann["description"])
    case = {
        "rule_files": [str(RULES_DIR / "cuzk-recording.yml"),
                       str(RULES_DIR / "cuzk-alerts.yml")],
        "evaluation_interval": "1m",
        "group_eval_order": load_yaml(PROM_TESTS_DIR / "deadlines.test.yml")["group_eval_order"],
        "tests": [{
            "name": "scraped from a fresh engine: a high job predicted late by priors",
            "interval": "1m",
            "input_series": [{"series": _series(n, lab), "values": f"{v!r}x10"}
                             for n, lab, v in scraped],
            "alert_rule_test": [
                {"eval_time": "30s", "alertname": "CuzkDeadlineAtRisk", "exp_alerts": []},
                {"eval_time": "3m", "alertname": "CuzkDeadlineAtRisk", "exp_alerts": [{
                    "exp_labels": {**SCRAPE, "priority": "high", "severity": "warning",
                                   "service": "cuzk"},
                    "exp_annotations": ann}]},
            ],
        }],
    }
    path = tmp_path / "prior.test.yml"
    path.write_text(yaml.safe_dump(case, sort_keys=False))
    r = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
